// Loads a SavedModel with TensorFlow's C++ LoadSavedModel (the loader TensorFlow Serving runs)
// and runs every signature of the MetaGraphDef tagged "serve" (or the tags given), with inputs
// filled deterministically from their dtype and shape (unknown dimensions taken as 2), printing
// each output's dtype, shape and bytes in hex: two models whose signatures answer the same
// print the same lines.
//
// usage: serve_harness EXPORT_DIR [TAG,TAG...]
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include <algorithm>
#include <unordered_set>

#include "tensorflow/cc/saved_model/loader.h"
#include "tensorflow/cc/saved_model/constants.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/public/session.h"

using tensorflow::Tensor;

static bool Fill(Tensor* t) {
  const int64_t n = t->NumElements();
  switch (t->dtype()) {
    case tensorflow::DT_FLOAT: {
      auto v = t->flat<float>();
      for (int64_t i = 0; i < n; ++i) v(i) = static_cast<float>(i % 7) * 0.5f - 1.25f;
      return true;
    }
    case tensorflow::DT_DOUBLE: {
      auto v = t->flat<double>();
      for (int64_t i = 0; i < n; ++i) v(i) = static_cast<double>(i % 7) * 0.5 - 1.25;
      return true;
    }
    case tensorflow::DT_INT32: {
      auto v = t->flat<int32_t>();
      for (int64_t i = 0; i < n; ++i) v(i) = static_cast<int32_t>(i % 5);
      return true;
    }
    case tensorflow::DT_INT64: {
      auto v = t->flat<int64_t>();
      for (int64_t i = 0; i < n; ++i) v(i) = i % 5;
      return true;
    }
    default:
      return false;
  }
}

static std::string Hex(const Tensor& t) {
  if (t.dtype() == tensorflow::DT_STRING) {
    std::string out;
    auto v = t.flat<tensorflow::tstring>();
    for (int64_t i = 0; i < t.NumElements(); ++i) {
      out += std::string(v(i)) + "|";
    }
    return out;
  }
  auto data = t.tensor_data();
  std::string out;
  char buf[3];
  for (size_t i = 0; i < data.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned char>(data[i]));
    out += buf;
  }
  return out;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: serve_harness EXPORT_DIR [TAG,TAG...]\n");
    return 2;
  }
  std::unordered_set<std::string> tags = {"serve"};
  if (argc > 2) {
    tags.clear();
    std::string s = argv[2];
    size_t start = 0;
    while (start <= s.size()) {
      size_t comma = s.find(',', start);
      if (comma == std::string::npos) comma = s.size();
      tags.insert(s.substr(start, comma - start));
      start = comma + 1;
    }
  }
  tensorflow::SavedModelBundle bundle;
  tensorflow::SessionOptions session_options;
  tensorflow::RunOptions run_options;
  auto status = tensorflow::LoadSavedModel(session_options, run_options, argv[1], tags, &bundle);
  if (!status.ok()) {
    std::fprintf(stderr, "LoadSavedModel: %s\n", status.ToString().c_str());
    return 1;
  }
  const auto& sigs = bundle.meta_graph_def.signature_def();
  std::vector<std::string> names;
  for (const auto& kv : sigs) names.push_back(kv.first);
  std::sort(names.begin(), names.end());
  int ran = 0;
  for (const auto& name : names) {
    const auto& sig = sigs.at(name);
    // Signatures TensorFlow adds for its own use (the init op) are not served.
    if (name.rfind("__", 0) == 0) continue;
    std::vector<std::pair<std::string, Tensor>> feeds;
    std::vector<std::string> in_keys;
    for (const auto& kv : sig.inputs()) in_keys.push_back(kv.first);
    std::sort(in_keys.begin(), in_keys.end());
    bool ok = true;
    for (const auto& key : in_keys) {
      const auto& info = sig.inputs().at(key);
      tensorflow::TensorShape shape;
      if (!info.tensor_shape().unknown_rank()) {
        for (const auto& d : info.tensor_shape().dim()) {
          shape.AddDim(d.size() < 0 ? 2 : d.size());
        }
      }
      Tensor t(info.dtype(), shape);
      if (!Fill(&t)) { ok = false; break; }
      feeds.emplace_back(info.name(), t);
    }
    if (!ok) {
      std::printf("%s: skipped (an input dtype the harness does not fill)\n", name.c_str());
      continue;
    }
    std::vector<std::string> out_keys;
    for (const auto& kv : sig.outputs()) out_keys.push_back(kv.first);
    std::sort(out_keys.begin(), out_keys.end());
    std::vector<std::string> fetches;
    for (const auto& key : out_keys) fetches.push_back(sig.outputs().at(key).name());
    std::vector<Tensor> outputs;
    status = bundle.session->Run(feeds, fetches, {}, &outputs);
    if (!status.ok()) {
      std::fprintf(stderr, "Run %s: %s\n", name.c_str(), status.ToString().c_str());
      return 1;
    }
    for (size_t i = 0; i < out_keys.size(); ++i) {
      std::printf("%s/%s %s %s %s\n", name.c_str(), out_keys[i].c_str(),
                  tensorflow::DataTypeString(outputs[i].dtype()).c_str(),
                  outputs[i].shape().DebugString().c_str(), Hex(outputs[i]).c_str());
    }
    ++ran;
  }
  std::printf("signatures run: %d\n", ran);
  return 0;
}

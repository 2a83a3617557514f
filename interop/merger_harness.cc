// merger_harness: a small command-line wrapper around TensorFlow's own C++
// proto-splitter Merger (tensorflow::tools::proto_splitter::Merger) and
// SavedModel fingerprinting, as exported by libtensorflow_framework.so.2 from
// the tensorflow-cpu 2.21.0 wheel. It is the oracle that unbound's interop
// tests script against; see interop/README.md for the contract.
//
// Build: interop/build_harness.sh [OUT]
//
// Exit codes: 0 success, 1 operation failed (message on stderr),
//             2 usage error.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/base/log_severity.h"
#include "absl/log/globals.h"
#include "absl/status/status.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"
#include "tensorflow/cc/saved_model/fingerprinting.h"
#include "tensorflow/core/framework/attr_value.pb.h"
#include "tensorflow/core/framework/function.pb.h"
#include "tensorflow/core/framework/graph.pb.h"
#include "tensorflow/core/framework/node_def.pb.h"
#include "tensorflow/core/framework/tensor.pb.h"
#include "tensorflow/core/framework/types.pb.h"
#include "tensorflow/core/protobuf/fingerprint.pb.h"
#include "tensorflow/core/protobuf/meta_graph.pb.h"
#include "tensorflow/core/protobuf/saved_model.pb.h"
#include "tensorflow/tools/proto_splitter/chunk.pb.h"
#include "tensorflow/tools/proto_splitter/merge.h"

namespace {

namespace pb = ::google::protobuf;
using ::tensorflow::tools::proto_splitter::Merger;

constexpr int kExitOk = 0;
constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;

const char kUsage[] =
    "usage:\n"
    "  merger_harness read         --type T [--descriptor-set FDS] PREFIX OUT.pb\n"
    "  merger_harness read-string  --type T [--descriptor-set FDS] FILE.cpb OUT.pb\n"
    "  merger_harness read-partial --type T [--descriptor-set FDS] PREFIX METADATA OUT.pb\n"
    "  merger_harness summary      --type T [--descriptor-set FDS] PREFIX\n"
    "  merger_harness text         --type T [--descriptor-set FDS] PREFIX\n"
    "  merger_harness fingerprint  EXPORT_DIR [OUT.pb]\n"
    "  merger_harness version\n"
    "\n"
    "PREFIX is a path without extension; TensorFlow's Merger::Read reads\n"
    "PREFIX.cpb if it exists, else PREFIX.pb. T is a full message name,\n"
    "e.g. tensorflow.SavedModel or tensorflow.GraphDef (any message compiled\n"
    "into libtensorflow_framework.so.2), or any message in FDS (a serialized\n"
    "google.protobuf.FileDescriptorSet, e.g. protoc --include_imports\n"
    "--descriptor_set_out). METADATA is a serialized ChunkMetadata (binary,\n"
    "or text format when the name ends in .pbtxt or .txt).\n"
    "Outputs are written with deterministic serialization.\n"
    "Exit codes: 0 ok, 1 failure (message on stderr), 2 usage.\n";

struct Failure {
  std::string message;
};

[[noreturn]] void Fail(const std::string& message) { throw Failure{message}; }

struct Usage {
  std::string message;
};

[[noreturn]] void UsageError(const std::string& message) {
  throw Usage{message};
}

// ---------------------------------------------------------------- files ----

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("cannot open " + path + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) Fail("error reading " + path);
  return ss.str();
}

// Writes `data` to `path` via `path.tmp.<pid>` + fsync + rename.
void WriteFileAtomic(const std::string& path, const std::string& data) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) Fail("cannot create " + tmp + ": " + std::strerror(errno));
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string err = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      Fail("error writing " + tmp + ": " + err);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    Fail("error closing " + tmp + ": " + err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    Fail("cannot rename " + tmp + " to " + path + ": " + err);
  }
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// --------------------------------------------------------- serializing ----

// Deterministic serialization (map entries sorted by key), as TensorFlow uses
// for fingerprinting. Fails for messages of 2 GiB or more, which protobuf
// cannot serialize.
std::string SerializeDeterministic(const pb::Message& msg) {
  size_t size = msg.ByteSizeLong();
  if (size > static_cast<size_t>(INT_MAX)) {
    Fail("merged " + std::string(msg.GetDescriptor()->full_name()) + " is " +
         std::to_string(size) +
         " bytes, over the 2 GiB protobuf limit; it cannot be serialized "
         "(use `summary`)");
  }
  std::string out;
  out.reserve(size);
  {
    pb::io::StringOutputStream sos(&out);
    pb::io::CodedOutputStream cos(&sos);
    cos.SetSerializationDeterministic(true);
    if (!msg.SerializeToCodedStream(&cos)) {
      Fail("serializing " + std::string(msg.GetDescriptor()->full_name()) +
           " failed (missing required fields?)");
    }
  }
  return out;
}

// ---------------------------------------------------------- json ----------

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          // Bytes outside printable ASCII are written as \u00XX (one code
          // point per byte), so the output stays valid JSON for any name.
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += "\"";
  return out;
}

// ------------------------------------------------------------ checksum ----

// FNV-1a, 64 bit: h = 0xcbf29ce484222325; for each byte b: h ^= b;
// h *= 0x100000001b3 (mod 2^64). Printed as 16 lowercase hex digits.
constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

uint64_t Fnv1a64(const std::string& data, uint64_t h = kFnvOffset) {
  for (unsigned char c : data) {
    h ^= c;
    h *= kFnvPrime;
  }
  return h;
}

std::string Hex64(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// ------------------------------------------------------------- types ------

// Owns whatever is needed to create messages of a type: either the generated
// pool (messages compiled into libtensorflow_framework.so.2) or a pool built
// from a FileDescriptorSet with a DynamicMessageFactory.
class TypeRegistry {
 public:
  explicit TypeRegistry(const std::string& descriptor_set_path) {
    if (descriptor_set_path.empty()) return;
    pb::FileDescriptorSet fds;
    std::string data = ReadFile(descriptor_set_path);
    if (!fds.ParseFromString(data)) {
      Fail(descriptor_set_path + " is not a serialized FileDescriptorSet");
    }
    pool_ = std::make_unique<pb::DescriptorPool>();
    std::map<std::string, const pb::FileDescriptorProto*> by_name;
    for (const auto& f : fds.file()) by_name[f.name()] = &f;
    std::set<std::string> in_progress;
    std::function<void(const std::string&)> build = [&](const std::string&
                                                            name) {
      if (pool_->FindFileByName(name) != nullptr) return;
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        Fail(descriptor_set_path + " lacks " + name +
             " (build it with protoc --include_imports)");
      }
      if (!in_progress.insert(name).second) Fail("import cycle at " + name);
      for (const auto& dep : it->second->dependency()) build(dep);
      if (pool_->BuildFile(*it->second) == nullptr) {
        Fail("cannot build " + name + " from " + descriptor_set_path +
             " (see protobuf errors above)");
      }
      in_progress.erase(name);
    };
    for (const auto& f : fds.file()) build(f.name());
    factory_ = std::make_unique<pb::DynamicMessageFactory>(pool_.get());
  }

  std::unique_ptr<pb::Message> New(const std::string& type) const {
    const pb::Descriptor* d = nullptr;
    const pb::Message* prototype = nullptr;
    if (pool_) {
      d = pool_->FindMessageTypeByName(type);
      if (d == nullptr) Fail("message type " + type + " is not in the descriptor set");
      prototype = factory_->GetPrototype(d);
    } else {
      d = pb::DescriptorPool::generated_pool()->FindMessageTypeByName(type);
      if (d == nullptr) {
        Fail("message type " + type +
             " is not compiled into libtensorflow_framework.so.2; pass "
             "--descriptor-set");
      }
      prototype = pb::MessageFactory::generated_factory()->GetPrototype(d);
    }
    if (prototype == nullptr) Fail("no prototype for " + type);
    return std::unique_ptr<pb::Message>(prototype->New());
  }

 private:
  std::unique_ptr<pb::DescriptorPool> pool_;
  std::unique_ptr<pb::DynamicMessageFactory> factory_;
};

// --------------------------------------------------------- arguments ------

struct Args {
  std::string command;
  std::string type;
  std::string descriptor_set;
  std::vector<std::string> positional;
};

Args ParseArgs(int argc, char** argv) {
  Args a;
  if (argc < 2) UsageError("missing command");
  a.command = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string s = argv[i];
    auto value = [&](const std::string& flag) -> std::string {
      if (i + 1 >= argc) UsageError(flag + " needs a value");
      return argv[++i];
    };
    if (s == "--type") {
      a.type = value(s);
    } else if (s.rfind("--type=", 0) == 0) {
      a.type = s.substr(7);
    } else if (s == "--descriptor-set") {
      a.descriptor_set = value(s);
    } else if (s.rfind("--descriptor-set=", 0) == 0) {
      a.descriptor_set = s.substr(17);
    } else if (s == "--") {
      for (++i; i < argc; ++i) a.positional.push_back(argv[i]);
    } else if (s.size() > 1 && s[0] == '-' && s != "-") {
      UsageError("unknown option " + s);
    } else {
      a.positional.push_back(s);
    }
  }
  return a;
}

void Expect(const Args& a, size_t n_positional, bool needs_type) {
  if (needs_type && a.type.empty()) UsageError(a.command + ": --type is required");
  if (a.positional.size() != n_positional) {
    UsageError(a.command + ": expected " + std::to_string(n_positional) +
               " positional argument(s), got " +
               std::to_string(a.positional.size()));
  }
}

void Check(const absl::Status& st, const std::string& what) {
  if (!st.ok()) Fail(what + ": " + st.ToString());
}

// ------------------------------------------------------------ summary -----

void AppendTensorEntry(std::ostringstream& js, const tensorflow::NodeDef& n,
                       const std::string& function, bool* first,
                       uint64_t* total_bytes, uint64_t* running) {
  auto it = n.attr().find("value");
  if (it == n.attr().end() || !it->second.has_tensor()) return;
  const tensorflow::TensorProto& t = it->second.tensor();
  const std::string& content = t.tensor_content();
  *total_bytes += content.size();
  *running = Fnv1a64(content, *running);
  if (!*first) js << ",";
  *first = false;
  js << "\n    {";
  if (!function.empty()) js << "\"function\":" << JsonString(function) << ",";
  js << "\"name\":" << JsonString(n.name()) << ",\"op\":" << JsonString(n.op())
     << ",\"dtype\":" << JsonString(tensorflow::DataType_Name(t.dtype()))
     << ",\"shape\":[";
  for (int d = 0; d < t.tensor_shape().dim_size(); ++d) {
    if (d) js << ",";
    js << t.tensor_shape().dim(d).size();
  }
  js << "],\"tensor_content_bytes\":" << content.size()
     << ",\"tensor_content_fnv1a64\":\"" << Hex64(Fnv1a64(content)) << "\""
     << ",\"has_inline_values\":"
     << ((t.float_val_size() || t.double_val_size() || t.int_val_size() ||
          t.int64_val_size() || t.string_val_size() || t.bool_val_size() ||
          t.half_val_size() || t.uint32_val_size() || t.uint64_val_size() ||
          t.scomplex_val_size() || t.dcomplex_val_size() ||
          t.variant_val_size() || t.resource_handle_val_size())
             ? "true"
             : "false")
     << "}";
}

void GraphSummary(std::ostringstream& js, const tensorflow::GraphDef& g) {
  uint64_t total = 0, running = kFnvOffset;
  size_t function_nodes = 0;
  for (const auto& f : g.library().function()) function_nodes += f.node_def_size();
  js << "\"graph\":{\"nodes\":" << g.node_size()
     << ",\"functions\":" << g.library().function_size()
     << ",\"function_nodes\":" << function_nodes
     << ",\"gradients\":" << g.library().gradient_size()
     << ",\"producer\":" << g.versions().producer()
     << ",\"node_tensors\":[";
  bool first = true;
  for (const auto& n : g.node()) AppendTensorEntry(js, n, "", &first, &total, &running);
  js << "],\n  \"function_tensors\":[";
  first = true;
  for (const auto& f : g.library().function()) {
    for (const auto& n : f.node_def()) {
      AppendTensorEntry(js, n, f.signature().name(), &first, &total, &running);
    }
  }
  js << "],\n  \"tensor_content_total_bytes\":" << total
     << ",\"tensor_content_fnv1a64\":\"" << Hex64(running) << "\"}";
}

std::string Summary(const pb::Message& msg) {
  std::ostringstream js;
  const std::string type(msg.GetDescriptor()->full_name());
  js << "{\"type\":" << JsonString(type)
     << ",\"byte_size\":" << msg.ByteSizeLong();
  // Only the generated classes get the graph breakdown (dynamic messages of
  // the same name are a different C++ type).
  if (const auto* sm = dynamic_cast<const tensorflow::SavedModel*>(&msg)) {
    js << ",\"meta_graphs\":" << sm->meta_graphs_size();
    if (sm->meta_graphs_size() > 0) {
      const auto& mg = sm->meta_graphs(0);
      js << ",\"tags\":[";
      for (int i = 0; i < mg.meta_info_def().tags_size(); ++i) {
        if (i) js << ",";
        js << JsonString(mg.meta_info_def().tags(i));
      }
      std::set<std::string> keys;
      for (const auto& kv : mg.signature_def()) keys.insert(kv.first);
      js << "],\"signatures\":[";
      bool first = true;
      for (const auto& k : keys) {
        if (!first) js << ",";
        first = false;
        js << JsonString(k);
      }
      js << "],\"object_graph_nodes\":" << mg.object_graph_def().nodes_size()
         << ",\"concrete_functions\":"
         << mg.object_graph_def().concrete_functions_size() << ",\n  ";
      GraphSummary(js, mg.graph_def());
    }
  } else if (const auto* g = dynamic_cast<const tensorflow::GraphDef*>(&msg)) {
    js << ",\n  ";
    GraphSummary(js, *g);
  }
  js << "}\n";
  return js.str();
}

// ------------------------------------------------------------ commands ----

int CmdRead(const Args& a) {
  Expect(a, 2, true);
  TypeRegistry types(a.descriptor_set);
  auto msg = types.New(a.type);
  Check(Merger::Read(a.positional[0], msg.get()), "Merger::Read(" + a.positional[0] + ")");
  WriteFileAtomic(a.positional[1], SerializeDeterministic(*msg));
  return kExitOk;
}

int CmdReadString(const Args& a) {
  Expect(a, 2, true);
  TypeRegistry types(a.descriptor_set);
  auto msg = types.New(a.type);
  std::string data = ReadFile(a.positional[0]);
  Check(Merger::ReadChunkedFromString(data, msg.get()),
        "Merger::ReadChunkedFromString(" + a.positional[0] + ")");
  WriteFileAtomic(a.positional[1], SerializeDeterministic(*msg));
  return kExitOk;
}

int CmdReadPartial(const Args& a) {
  Expect(a, 3, true);
  TypeRegistry types(a.descriptor_set);
  auto msg = types.New(a.type);
  ::tensorflow::proto_splitter::ChunkMetadata md;
  std::string data = ReadFile(a.positional[1]);
  bool ok = (EndsWith(a.positional[1], ".pbtxt") || EndsWith(a.positional[1], ".txt"))
                ? pb::TextFormat::ParseFromString(data, &md)
                : md.ParseFromString(data);
  if (!ok) Fail(a.positional[1] + " is not a ChunkMetadata");
  Check(Merger::ReadPartial(a.positional[0], md, msg.get()),
        "Merger::ReadPartial(" + a.positional[0] + ")");
  WriteFileAtomic(a.positional[2], SerializeDeterministic(*msg));
  return kExitOk;
}

int CmdSummary(const Args& a) {
  Expect(a, 1, true);
  TypeRegistry types(a.descriptor_set);
  auto msg = types.New(a.type);
  Check(Merger::Read(a.positional[0], msg.get()), "Merger::Read(" + a.positional[0] + ")");
  std::cout << Summary(*msg);
  return kExitOk;
}

int CmdText(const Args& a) {
  Expect(a, 1, true);
  TypeRegistry types(a.descriptor_set);
  auto msg = types.New(a.type);
  Check(Merger::Read(a.positional[0], msg.get()), "Merger::Read(" + a.positional[0] + ")");
  std::string text;
  if (!pb::TextFormat::PrintToString(*msg, &text)) Fail("text format printing failed");
  std::cout << text;
  return kExitOk;
}

int CmdFingerprint(const Args& a) {
  if (a.positional.empty() || a.positional.size() > 2) {
    UsageError("fingerprint: expected EXPORT_DIR [OUT.pb]");
  }
  auto fp = tensorflow::saved_model::fingerprinting::CreateFingerprintDef(a.positional[0]);
  Check(fp.status(), "CreateFingerprintDef(" + a.positional[0] + ")");
  // uint64 values are printed as JSON strings of decimal digits, so that
  // consumers parsing JSON numbers as doubles do not lose precision.
  std::cout << "{\"saved_model_checksum\":\"" << fp->saved_model_checksum()
            << "\",\"graph_def_program_hash\":\"" << fp->graph_def_program_hash()
            << "\",\"signature_def_hash\":\"" << fp->signature_def_hash()
            << "\",\"saved_object_graph_hash\":\"" << fp->saved_object_graph_hash()
            << "\",\"checkpoint_hash\":\"" << fp->checkpoint_hash()
            << "\",\"version_producer\":" << fp->version().producer()
            << ",\"uuid\":" << JsonString(fp->uuid())
            << ",\"singleprint\":"
            << JsonString(tensorflow::saved_model::fingerprinting::Singleprint(*fp))
            << "}\n";
  if (a.positional.size() == 2) WriteFileAtomic(a.positional[1], SerializeDeterministic(*fp));
  return kExitOk;
}

int Run(int argc, char** argv) {
  Args a = ParseArgs(argc, argv);
  if (a.command == "read") return CmdRead(a);
  if (a.command == "read-string") return CmdReadString(a);
  if (a.command == "read-partial") return CmdReadPartial(a);
  if (a.command == "summary") return CmdSummary(a);
  if (a.command == "text") return CmdText(a);
  if (a.command == "fingerprint") return CmdFingerprint(a);
  if (a.command == "version") {
    std::cout << "merger_harness 1 (protobuf " << GOOGLE_PROTOBUF_VERSION << ")\n";
    return kExitOk;
  }
  if (a.command == "-h" || a.command == "--help" || a.command == "help") {
    std::cout << kUsage;
    return kExitOk;
  }
  UsageError("unknown command " + a.command);
}

}  // namespace

int main(int argc, char** argv) {
  // Keep TensorFlow's INFO logging (e.g. merge.cc "Reading binary proto")
  // off stderr unless the caller asks for it with TF_CPP_MIN_LOG_LEVEL=0.
  // (Messages logged while the library loads, like the oneDNN notice, are
  // printed before main and cannot be suppressed from here.)
  if (std::getenv("TF_CPP_MIN_LOG_LEVEL") == nullptr) {
    absl::SetMinLogLevel(absl::LogSeverityAtLeast::kWarning);
  }
  try {
    return Run(argc, argv);
  } catch (const Usage& u) {
    std::cerr << "merger_harness: " << u.message << "\n\n" << kUsage;
    return kExitUsage;
  } catch (const Failure& f) {
    std::cerr << "merger_harness: error: " << f.message << "\n";
    return kExitFail;
  } catch (const std::exception& e) {
    std::cerr << "merger_harness: error: " << e.what() << "\n";
    return kExitFail;
  }
}

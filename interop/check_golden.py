#!/usr/bin/env python3
"""Cross-checks the golden models in testdata/models/ against TensorFlow's C++.

For each model, `merger_harness summary` (TensorFlow's C++ Merger + protobuf)
must agree with what TensorFlow's Python side recorded in
<name>.expected.json (testdata/make_models.py), and for SavedModels with a
fingerprint.pb, `merger_harness fingerprint` (TensorFlow's C++
CreateFingerprintDef) must reproduce its hashes. This checks the harness and
the golden files against each other; it needs no TensorFlow Python, only the
harness binary.

usage: interop/check_golden.py [--harness BIN] [MODELS_DIR]
Exit status 0 when everything agrees, 1 otherwise.
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(cmd):
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-500:]}")
    return json.loads(p.stdout)


def strip_entries(entries):
    keep = ("function", "name", "op", "dtype", "shape",
            "tensor_content_bytes", "tensor_content_fnv1a64")
    return [{k: e[k] for k in keep if k in e} for e in entries]


def compare_graph(name, got, want, problems):
    for key in ("nodes", "function_nodes", "producer",
                "tensor_content_total_bytes", "tensor_content_fnv1a64"):
        if got[key] != want[key]:
            problems.append(f"{name}: graph.{key}: harness {got[key]!r}, expected {want[key]!r}")
    if got["functions"] != len(want["functions"]):
        problems.append(f"{name}: graph.functions: harness {got['functions']}, "
                        f"expected {len(want['functions'])}")
    for key in ("node_tensors", "function_tensors"):
        g, w = strip_entries(got[key]), strip_entries(want[key])
        if g != w:
            problems.append(f"{name}: graph.{key} differ:\n  harness  {g}\n  expected {w}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harness")
    ap.add_argument("models", nargs="?", default=os.path.join(ROOT, "testdata", "models"))
    a = ap.parse_args()
    harness = a.harness or subprocess.run(
        [os.path.join(HERE, "build_harness.sh")], check=True,
        capture_output=True, text=True).stdout.strip().splitlines()[-1]

    problems = []
    checked = 0
    for fname in sorted(os.listdir(a.models)):
        if not fname.endswith(".expected.json"):
            continue
        name = fname[: -len(".expected.json")]
        with open(os.path.join(a.models, fname)) as f:
            want = json.load(f)
        path = os.path.join(a.models, name)
        if os.path.isdir(path):
            got = run([harness, "summary", "--type", "tensorflow.SavedModel",
                       os.path.join(path, "saved_model")])
            if got["byte_size"] != want["saved_model_pb_bytes"]:
                problems.append(f"{name}: byte_size {got['byte_size']} != "
                                f"{want['saved_model_pb_bytes']}")
            if got["tags"] != want["tags"]:
                problems.append(f"{name}: tags {got['tags']} != {want['tags']}")
            if got["signatures"] != sorted(want["signatures"]):
                problems.append(f"{name}: signatures {got['signatures']} != "
                                f"{sorted(want['signatures'])}")
            compare_graph(name, got["graph"], want["graph"], problems)
            if want.get("fingerprint"):
                fp = run([harness, "fingerprint", path])
                for k, v in want["fingerprint"].items():
                    if str(fp[k]) != str(v):
                        problems.append(f"{name}: fingerprint.{k}: C++ {fp[k]}, "
                                        f"fingerprint.pb {v}")
        else:
            got = run([harness, "summary", "--type", "tensorflow.GraphDef", path])
            if got["byte_size"] != want["graph_def_bytes"]:
                problems.append(f"{name}: byte_size {got['byte_size']} != "
                                f"{want['graph_def_bytes']}")
            compare_graph(name, got["graph"], want["graph"], problems)
        checked += 1
        print(f"checked {name}")

    for p in problems:
        print("MISMATCH", p)
    if checked == 0:
        print("no *.expected.json found", file=sys.stderr)
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

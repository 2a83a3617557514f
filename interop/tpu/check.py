"""TensorFlow 2.21's side of the TPU export checks (driven by interop/tpu/check.sh).

    python check.py show DIR                      saved_model_cli show --all lists {serve} and
                                                  {serve, tpu} (or only the latter with
                                                  --tpu-only as a third argument)
    python check.py tpu ORIG EXPORT SPEC.json     {serve,tpu} loads with the TF2 and the TF1
                                                  loader, and running it fails only with the
                                                  missing-kernel error of a TPU op; {serve} of
                                                  EXPORT (when present) gives ORIG's outputs
                                                  bit for bit
    python check.py fingerprint OURS.pb TF.pb     the fingerprint.pb unbound wrote equals
                                                  TensorFlow's CreateFingerprintDef (uuid aside)
    python check.py same_model A.pb B.pb          two SavedModels are equal messages
    python check.py layout INSPECT.json MODEL.pb  the split layout: every MetaGraphDef's graph
                                                  has chunked fields, and the root chunk holds
                                                  no graph whole
    python check.py jobs FILE                     each line of FILE as one of the above
    python check.py cpu ORIG CPU SPEC.json        {serve,tpu} of CPU (the --to-cpu rewrite of
                                                  an export) runs and gives ORIG's outputs bit
                                                  for bit

Prints one line per check and exits 1 on the first failure.
"""

import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

SENTINEL = "No OpKernel was registered to support Op 'TPU"
TPU_TAGS = ["serve", "tpu"]


def fail(message):
    print("FAIL", message)
    sys.exit(1)


def inputs_of(spec):
    return {k: np.array(v["value"], dtype=v["dtype"]) for k, v in spec["inputs"].items()}


def tf2_outputs(model_dir, tags, spec):
    loaded = tf.saved_model.load(model_dir, tags=tags)
    fn = loaded.signatures[spec["signature"]]
    out = fn(**{k: tf.constant(v) for k, v in inputs_of(spec).items()})
    return {k: v.numpy() for k, v in out.items()}


def same(a, b, what):
    if sorted(a) != sorted(b):
        fail(f"{what}: output keys {sorted(a)} != {sorted(b)}")
    for k in a:
        if a[k].dtype != b[k].dtype or a[k].shape != b[k].shape or a[k].tobytes() != b[k].tobytes():
            fail(f"{what}: output {k} differs: {a[k]!r} vs {b[k]!r}")


def show(model_dir, tpu_only=False):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    text = subprocess.run([cli, "show", "--all", "--dir", model_dir], check=True,
                          capture_output=True, text=True).stdout
    want = ["MetaGraphDef with tag-set: 'serve, tpu'"]
    absent = []
    if tpu_only:
        absent.append("MetaGraphDef with tag-set: 'serve' ")
    else:
        want.append("MetaGraphDef with tag-set: 'serve' ")
    for w in want:
        if w not in text:
            fail(f"saved_model_cli show --all {model_dir}: no {w!r}")
    for a in absent:
        if a in text:
            fail(f"saved_model_cli show --all {model_dir}: {a!r} should be gone")
    print(f"ok saved_model_cli lists the tag-sets of {model_dir}")


def expect_sentinel(run, what):
    try:
        run()
    except Exception as e:  # noqa: BLE001 - any error is judged by its message
        message = str(e)
        if SENTINEL not in message:
            fail(f"{what}: failed, but not with the missing TPU kernel error: {message[:2000]}")
        return
    fail(f"{what}: ran without a TPU (it should need TPU kernels)")


def tpu(orig, export, spec):
    # TF2 loader: loads; the call fails only at kernel lookup.
    loaded = tf.saved_model.load(export, tags=TPU_TAGS)
    fn = loaded.signatures[spec["signature"]]
    feeds = {k: tf.constant(v) for k, v in inputs_of(spec).items()}
    expect_sentinel(lambda: fn(**feeds), f"TF2 {export} {{serve,tpu}}")
    print(f"ok TF2 loads {export} {{serve,tpu}}; calling it needs TPU kernels")
    # TF1 loader.
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        meta = tf.compat.v1.saved_model.load(sess, TPU_TAGS, export)
        sig = meta.signature_def[spec["signature"]]
        fetches = {k: v.name for k, v in sig.outputs.items()}
        feed = {sig.inputs[k].name: v for k, v in inputs_of(spec).items()}
        expect_sentinel(lambda: sess.run(fetches, feed), f"TF1 {export} {{serve,tpu}}")
    print(f"ok TF1 loads {export} {{serve,tpu}}; running it needs TPU kernels")
    want = tf2_outputs(orig, ["serve"], spec)
    tag_sets = [set(m.meta_info_def.tags) for m in read_saved_model(export).meta_graphs]
    if {"serve"} in tag_sets:
        same(want, tf2_outputs(export, ["serve"], spec), f"{export} {{serve}}")
        print(f"ok {export} {{serve}} still gives the original outputs")


def cpu(orig, cpu_dir, spec):
    want = tf2_outputs(orig, ["serve"], spec)
    same(want, tf2_outputs(cpu_dir, TPU_TAGS, spec), f"{cpu_dir} {{serve,tpu}} on CPU")
    print(f"ok {cpu_dir} {{serve,tpu}} runs on CPU with the original outputs, bit for bit")


def parse_file(cls, path):
    message = cls()
    with open(path, "rb") as f:
        message.ParseFromString(f.read())
    return message


def fingerprint(ours_path, tf_path):
    from tensorflow.core.protobuf import fingerprint_pb2

    ours = parse_file(fingerprint_pb2.FingerprintDef, ours_path)
    theirs = parse_file(fingerprint_pb2.FingerprintDef, tf_path)
    for name in ["saved_model_checksum", "graph_def_program_hash", "signature_def_hash",
                 "saved_object_graph_hash", "checkpoint_hash", "version"]:
        if getattr(ours, name) != getattr(theirs, name):
            fail(f"{ours_path}: {name} {getattr(ours, name)} != TensorFlow's {getattr(theirs, name)}")
    print(f"ok {ours_path} equals TensorFlow's CreateFingerprintDef")


def same_model(a, b):
    from tensorflow.core.protobuf import saved_model_pb2

    if parse_file(saved_model_pb2.SavedModel, a) != parse_file(saved_model_pb2.SavedModel, b):
        fail(f"{a} and {b} differ")
    print(f"ok {a} equals {b}")


def layout(inspect_json, model_pb):
    from tensorflow.core.protobuf import saved_model_pb2

    with open(inspect_json) as f:
        tree = json.load(f)
    model = parse_file(saved_model_pb2.SavedModel, model_pb)
    graphs = len(model.meta_graphs)
    per_graph = [0] * graphs

    def walk(message):
        for cf in message.get("chunked_fields", []):
            tags = cf["field_tag"]
            # SavedModel.meta_graphs = 2, MetaGraphDef.graph_def = 2.
            if len(tags) >= 3 and tags[0] == {"field": 2} and tags[2] == {"field": 2}:
                per_graph[tags[1]["index"]] += 1

    walk(tree["message"])
    if graphs < 2 or 0 in per_graph:
        fail(f"{inspect_json}: chunked fields per MetaGraphDef graph: {per_graph}")
    # Everything but the graphs stays in the root chunk (SavedModel splitting splits graphs
    # only); a root holding a whole graph besides (TensorFlow's layout of a second
    # MetaGraphDef) would be at least that plus the smallest graph.
    root = tree["chunks"][0]["size"]
    sizes = [m.graph_def.ByteSize() for m in model.meta_graphs]
    outside = model.ByteSize() - sum(sizes)
    if root >= outside + min(sizes):
        fail(f"{inspect_json}: the root chunk ({root} bytes) holds a whole graph "
             f"(graphs {sizes} bytes, {outside} bytes outside them)")
    print(f"ok {inspect_json}: every graph split ({per_graph} chunked fields), root {root} bytes")


def read_saved_model(model_dir):
    from tensorflow.python.saved_model import loader_impl

    return loader_impl.parse_saved_model(model_dir)


def run(command, args):
    if command == "show":
        show(args[0], tpu_only=len(args) > 1 and args[1] == "--tpu-only")
    elif command == "fingerprint":
        fingerprint(args[0], args[1])
    elif command == "same_model":
        same_model(args[0], args[1])
    elif command == "layout":
        layout(args[0], args[1])
    elif command in ("tpu", "cpu"):
        with open(args[2]) as f:
            spec = json.load(f)
        (tpu if command == "tpu" else cpu)(args[0], args[1], spec)
    else:
        fail(f"unknown command {command}")


def main():
    if sys.argv[1] == "jobs":
        # One job (a command and its arguments) per line: one TensorFlow import for all.
        with open(sys.argv[2]) as f:
            for line in f:
                if line.strip():
                    command, *args = line.split()
                    run(command, args)
    else:
        run(sys.argv[1], sys.argv[2:])


if __name__ == "__main__":
    main()

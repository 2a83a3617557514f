"""unbound.tensorflow past 2 GiB, at the message level (see python_huge.sh).

usage: python_huge.py build|load WORK HARNESS   (WORK: a scratch directory)

build: saves a small tf.function model with TensorFlow, reads its SavedModel message, adds
FunctionDefs holding large Const nodes (FUNCTIONS x FUNCTION_BYTES, past 2 GiB in all, each
function below it), writes it with unbound.tensorflow.SavedModelSplitter(...).write into a
copy of the model directory (variables included; fingerprint.pb by TensorFlow's own
CreateFingerprintDef), checks what TensorFlow's C++ Merger reads (harness summary: node and
function counts, tensor sizes) and that read_saved_model gives the message back equal
(function by function: the whole cannot be serialized).
load: tf.saved_model.load through enable_image_format; the original signature must give
the outputs recorded at build time.
PYTHON_HUGE_CONTENT=repeated (python_huge.sh sets it when the disk is short) makes each large
constant one repeated byte instead of random, so that the .cpb is small on disk.
Each step prints one line `python_huge: ...` with its time and the process's peak memory.
"""

import json
import os
import resource
import shutil
import subprocess
import sys
import time

import numpy as np

FUNCTIONS = 3
FUNCTION_BYTES = 900_000_000


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def report(step: str, started: float) -> None:
    print(f"python_huge: {step}: {time.time() - started:.1f} s, peak RSS {peak_gb():.2f} GB",
          flush=True)


def build(work: str, harness: str) -> None:
    import tensorflow as tf
    from tensorflow.core.framework import types_pb2
    from tensorflow.python.saved_model.pywrap_saved_model import fingerprinting

    import unbound.tensorflow as ut

    class Small(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(tf.reshape(tf.range(12, dtype=tf.float32), [4, 3]))

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
        def __call__(self, x):
            return {"y": tf.matmul(x, self.w)}

    small = os.path.join(work, "small")
    model = Small()
    tf.saved_model.save(model, small)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.save(os.path.join(work, "expected.npy"), model(x)["y"].numpy())

    started = time.time()
    saved_model = ut.read_saved_model(small)
    library = saved_model.meta_graphs[0].graph_def.library
    base_functions = len(library.function)
    rng = np.random.default_rng(14)
    for i in range(FUNCTIONS):
        function = library.function.add()
        function.signature.name = f"unbound_huge_constant_{i}"
        out = function.signature.output_arg.add()
        out.name = "out"
        out.type = types_pb2.DT_UINT8
        node = function.node_def.add()
        node.name = "c"
        node.op = "Const"
        node.attr["dtype"].type = types_pb2.DT_UINT8
        tensor = node.attr["value"].tensor
        tensor.dtype = types_pb2.DT_UINT8
        tensor.tensor_shape.dim.add().size = FUNCTION_BYTES
        if os.environ.get("PYTHON_HUGE_CONTENT", "random") == "repeated":
            tensor.tensor_content = bytes([i + 1]) * FUNCTION_BYTES  # disk short: compressible
        else:
            tensor.tensor_content = rng.bytes(FUNCTION_BYTES)  # bytes straight from the generator
        function.ret["out"] = "c:output:0"
    total = sum(f.ByteSize() for f in library.function)
    report(f"built a SavedModel message with {len(library.function)} functions "
           f"({total / 1e9:.2f} GB of functions)", started)
    try:
        saved_model.ByteSize()
        print("python_huge: note: protobuf computed ByteSize() of the whole message", flush=True)
    except Exception as e:  # what the issue measured: upb refuses the whole message
        print(f"python_huge: whole-message ByteSize() fails as expected: {type(e).__name__}",
              flush=True)

    huge = os.path.join(work, "huge")
    shutil.copytree(small, huge, ignore=shutil.ignore_patterns("saved_model.pb", "fingerprint.pb"))
    started = time.time()
    path = ut.SavedModelSplitter(saved_model).write(os.path.join(huge, "saved_model"))
    size = os.path.getsize(path)
    report(f"SavedModelSplitter.write -> {os.path.basename(path)} ({size / 1e9:.2f} GB)", started)
    assert path.endswith(".cpb"), path

    started = time.time()
    with open(os.path.join(huge, "fingerprint.pb"), "wb") as f:
        f.write(fingerprinting.CreateFingerprintDef(huge))
    report("fingerprint.pb by TensorFlow's CreateFingerprintDef", started)

    started = time.time()
    result = subprocess.run(
        ["/usr/bin/time", "-f", "%M", harness, "summary", "--type", "tensorflow.SavedModel",
         os.path.join(huge, "saved_model")], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"python_huge: FAIL TensorFlow's Merger: {result.stderr[-1000:]}")
    summary = json.loads(result.stdout)
    harness_peak = int(result.stderr.strip().splitlines()[-1]) / 1e6
    print(f"python_huge: TensorFlow's Merger::Read + summary: {time.time() - started:.1f} s, "
          f"harness peak RSS {harness_peak:.2f} GB", flush=True)
    graph = summary["graph"]
    assert graph["functions"] == base_functions + FUNCTIONS, graph["functions"]
    assert graph["nodes"] == len(saved_model.meta_graphs[0].graph_def.node), graph["nodes"]
    want_nodes = sum(len(f.node_def) for f in library.function)
    assert graph["function_nodes"] == want_nodes, (graph["function_nodes"], want_nodes)
    big = [t for t in graph["function_tensors"] if t["tensor_content_bytes"] == FUNCTION_BYTES]
    assert sorted(t["function"] for t in big) == [f"unbound_huge_constant_{i}" for i in range(FUNCTIONS)]
    assert graph["tensor_content_total_bytes"] >= FUNCTIONS * FUNCTION_BYTES
    assert summary["byte_size"] > (1 << 31), summary["byte_size"]
    print(f"python_huge: TensorFlow's Merger agrees: a {summary['byte_size']}-byte SavedModel, "
          f"{graph['functions']} functions, {graph['function_nodes']} function nodes, "
          f"{len(big)} constants of {FUNCTION_BYTES} bytes", flush=True)

    started = time.time()
    back = ut.read_saved_model(huge)
    report("read_saved_model (merged in Rust, handed over by parts)", started)
    started = time.time()
    got = back.meta_graphs[0].graph_def.library.function
    assert len(got) == len(library.function)
    for a, b in zip(got, library.function):
        assert a == b, a.signature.name
    for message in (back, saved_model):
        message.meta_graphs[0].graph_def.ClearField("library")
    assert back == saved_model
    report("read_saved_model equals the message written (function by function, then the rest)",
           started)


def load(work: str) -> None:
    import tensorflow as tf

    import unbound.tensorflow as ut

    started = time.time()
    ut.enable_image_format()
    loaded = tf.saved_model.load(os.path.join(work, "huge"))
    report("tf.saved_model.load of the .cpb through enable_image_format", started)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    got = loaded.signatures["serving_default"](x=tf.constant(x))["y"].numpy()
    np.testing.assert_array_equal(got, np.load(os.path.join(work, "expected.npy")))
    print("python_huge: the original signature gives its outputs", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(sys.argv[2], sys.argv[3])
    else:
        load(sys.argv[2])

"""Tensor bundles against TensorFlow 2.21 (run by bundle_check.sh with the TF venv's python).

(a) For every variable of TensorFlow-made bundles -- the test models' variables/, and a
    checkpoint TensorFlow writes here with raw_ops.SaveV2 + MergeV2Checkpoints (every dtype it
    can hold, strings, two shards, partitioned variables as slices) -- `unbound vars PREFIX KEY
    --npy` equals tf.train.load_checkpoint(PREFIX).get_tensor(KEY). Comparison, by the
    documented .npy choices: same dtype, shape and bytes; bfloat16 as float32 (exact widening);
    float8/4-bit types with --raw-bits as their stored bytes (uint8); strings as |S arrays,
    element by element, and an element ending in a zero byte must be refused (exit 1).
(b) A bundle written by unbound's BundleWriter (write_test_bundle example: every dtype,
    strings, two shards, partitioned variables) is read by TensorFlow's checkpoint reader with
    the values recorded in the example's manifest, and each slice by raw_ops.RestoreV2 with
    its shape_and_slices.

usage: python bundle_check.py UNBOUND WORKDIR OUR_PREFIX OUR_MANIFEST
Prints `ok NAME` / `FAIL NAME: why` lines and `bundle check: N passed, M failed`; exit 1 on
any failure.
"""

import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework import dtypes as tf_dtypes  # noqa: E402

RAW_BITS = {
    "float8_e5m2", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e4m3b11fnuz",
    "float8_e5m2fnuz", "int4", "uint4", "int2", "uint2", "float4_e2m1fn",
}

results = {"passed": 0, "failed": 0}


def report(name, problem):
    if problem:
        results["failed"] += 1
        print(f"FAIL {name}: {problem}")
    else:
        results["passed"] += 1
        print(f"ok {name}")


def as_array(value):
    return np.array(value, dtype=object) if isinstance(value, bytes) else np.asarray(value)


def compare_npy(unbound, prefix, key, dtype_name, expected, npy):
    """Runs `unbound vars --npy` for KEY; returns a problem description or None."""
    cmd = [unbound, "vars", prefix, key, "--npy", npy]
    if dtype_name in RAW_BITS:
        cmd.append("--raw-bits")
    run = subprocess.run(cmd, capture_output=True, text=True)
    expected = as_array(expected)
    if dtype_name == "string":
        values = [bytes(x) for x in expected.ravel()]
        if any(v.endswith(b"\0") for v in values):
            if run.returncode == 1 and "zero byte" in run.stderr:
                return None
            return f"an element ends in a zero byte: expected refusal, got exit {run.returncode}"
    if run.returncode != 0:
        return f"unbound exit {run.returncode}: {run.stderr.strip()}"
    ours = np.load(npy, allow_pickle=False)
    if ours.shape != expected.shape:
        return f"shape {ours.shape} != {expected.shape}"
    if dtype_name == "string":
        if ours.dtype.kind != "S":
            return f"dtype {ours.dtype} is not a byte-string array"
        got = [bytes(x) for x in ours.ravel()]
        return None if got == values else f"strings differ: {got[:4]} vs {values[:4]}"
    if dtype_name == "bfloat16":
        want, want_dtype = expected.astype(np.float32).tobytes(), np.dtype("<f4")
    elif dtype_name in RAW_BITS:
        want, want_dtype = expected.tobytes(), np.dtype("u1")
    else:
        want, want_dtype = expected.tobytes(), expected.dtype
    if ours.dtype != want_dtype:
        return f"dtype {ours.dtype} != {want_dtype}"
    return None if ours.tobytes() == want else "values differ"


def check_tf_made(unbound, work, name, prefix):
    reader = tf.train.load_checkpoint(prefix)
    dtypes = reader.get_variable_to_dtype_map()
    for i, key in enumerate(sorted(dtypes)):
        npy = os.path.join(work, f"{name}.{i}.npy")
        try:
            problem = compare_npy(unbound, prefix, key, dtypes[key].name, reader.get_tensor(key), npy)
        except Exception as e:  # noqa: BLE001 -- report, keep going
            problem = f"{type(e).__name__}: {e}"
        report(f"tf-made/{name}/{key}", problem)
    # The listing names the same keys and dtypes TensorFlow does.
    run = subprocess.run([unbound, "vars", prefix, "--json"], capture_output=True, text=True)
    try:
        listed = {v["key"]: v["dtype"] for v in json.loads(run.stdout)["variables"]}
        want = {k: d.name for k, d in dtypes.items()}
        report(f"tf-made/{name}/listing", None if listed == want else f"{listed} != {want}")
    except Exception as e:  # noqa: BLE001
        report(f"tf-made/{name}/listing", f"{e}: {run.stderr.strip()}")


def tensorflow_checkpoint(work):
    """A two-shard checkpoint written by TensorFlow's own SaveV2 and MergeV2Checkpoints."""
    rng = np.random.default_rng(7)
    shard_a, shard_b = {}, {}

    def add(target, key, make):
        try:
            target[key] = ("", make())
        except Exception as e:  # noqa: BLE001 -- a dtype this TensorFlow cannot build
            print(f"note: TensorFlow could not build {key}: {type(e).__name__}: {e}")

    normal = rng.standard_normal((3, 4)) * 3
    names = ["float32", "float64", "float16", "bfloat16", "complex64", "complex128", "int8",
             "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"]
    names += sorted(RAW_BITS)
    for i, name in enumerate(names):
        target = shard_a if i % 2 == 0 else shard_b
        dt = getattr(tf_dtypes, name)
        if dt == tf.bool:
            values = normal > 0
        elif dt.is_floating or dt.is_complex:
            values = normal
        else:
            values = rng.integers(0, 2 if name.endswith("int2") else 8, size=(3, 4))
        add(target, f"t/{name}", lambda dt=dt, v=values: tf.constant(v.astype(dt.as_numpy_dtype)))
    for dt in [tf.qint8, tf.quint8, tf.qint32]:
        add(shard_b, f"t/{dt.name}", lambda dt=dt: tf.constant(
            rng.integers(0, 100, size=(2, 2)).astype(dt.as_numpy_dtype), dtype=dt))
    add(shard_a, "t/scalar", lambda: tf.constant(3.5))
    add(shard_a, "t/empty", lambda: tf.zeros((0, 3)))
    add(shard_b, "t/strings", lambda: tf.constant([[b"alpha", b""], [b"\x00in\x00side", b"x" * 300]]))
    add(shard_a, "t/trailing_zero", lambda: tf.constant([b"ok", b"ends in zero\x00"]))
    # Partitioned: slices of one variable in both shards.
    full = rng.standard_normal((4, 6)).astype(np.float32)
    shard_a["t/partitioned"] = ("4 6 0,2:-", tf.constant(full[0:2]))
    shard_b["t/partitioned"] = ("4 6 2,2:-", tf.constant(full[2:4]))
    ids = np.arange(10, dtype=np.int64) * 1000
    shard_a["t/partitioned_ids"] = ("10 0,4", tf.constant(ids[0:4]))
    shard_b["t/partitioned_ids"] = ("10 4,6", tf.constant(ids[4:10]))
    prefixes = []
    for name, tensors in [("a", shard_a), ("b", shard_b)]:
        p = os.path.join(work, f"tf_ckpt_tmp_{name}")
        keys = sorted(tensors)
        tf.raw_ops.SaveV2(prefix=p, tensor_names=keys,
                          shape_and_slices=[tensors[k][0] for k in keys],
                          tensors=[tensors[k][1] for k in keys])
        prefixes.append(p)
    merged = os.path.join(work, "tf_ckpt", "ckpt")
    tf.raw_ops.MergeV2Checkpoints(checkpoint_prefixes=prefixes, destination_prefix=merged)
    reader = tf.train.load_checkpoint(merged)
    problem = None if np.array_equal(reader.get_tensor("t/partitioned"), full) else "TF's own read differs"
    report("tf-made/tf_ckpt/self-check", problem)
    return merged


def check_ours(prefix, manifest_path):
    with open(manifest_path) as f:
        manifest = json.load(f)
    reader = tf.train.load_checkpoint(prefix)
    dtypes = reader.get_variable_to_dtype_map()
    want_keys = {t["key"] for t in manifest["tensors"]}
    report("ours/keys", None if set(dtypes) == want_keys else f"{sorted(dtypes)} != {sorted(want_keys)}")
    for t in manifest["tensors"]:
        key = t["key"]
        try:
            got = as_array(reader.get_tensor(key))
            if dtypes[key].name != t["dtype"]:
                problem = f"dtype {dtypes[key].name} != {t['dtype']}"
            elif list(got.shape) != t["shape"]:
                problem = f"shape {got.shape} != {t['shape']}"
            elif "strings" in t:
                want = [bytes.fromhex(s) for s in t["strings"]]
                problem = None if [bytes(x) for x in got.ravel()] == want else "strings differ"
            else:
                problem = None if got.tobytes() == bytes.fromhex(t["hex"]) else "values differ"
        except Exception as e:  # noqa: BLE001
            problem = f"{type(e).__name__}: {e}"
        report(f"ours/{key}", problem)
    for s in manifest["slices"]:
        name = f"ours/{s['key']}[{s['shape_and_slice']}] (RestoreV2)"
        try:
            dt = tf.dtypes.as_dtype(s["dtype"])
            (got,) = tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=[s["key"]],
                                          shape_and_slices=[s["shape_and_slice"]], dtypes=[dt])
            got = got.numpy()
            if list(got.shape) != s["shape"]:
                problem = f"shape {got.shape} != {s['shape']}"
            else:
                problem = None if got.tobytes() == bytes.fromhex(s["hex"]) else "values differ"
        except Exception as e:  # noqa: BLE001
            problem = f"{type(e).__name__}: {e}"
        report(name, problem)


def main():
    unbound, work, our_prefix, our_manifest = sys.argv[1:5]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for model in ["tf2_multi_sig", "tf1_large_consts"]:
        prefix = os.path.join(root, "testdata", "models", model, "variables", "variables")
        check_tf_made(unbound, work, model, prefix)
    check_tf_made(unbound, work, "tf_ckpt", tensorflow_checkpoint(work))
    check_ours(our_prefix, our_manifest)
    print(f"bundle check: {results['passed']} passed, {results['failed']} failed")
    sys.exit(1 if results["failed"] else 0)


if __name__ == "__main__":
    main()

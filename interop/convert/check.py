"""`unbound convert` against TensorFlow 2.21 and the `safetensors` package.

Checkpoints TensorFlow writes (an object-based one of every dtype safetensors has, nested
objects; a DTensor one of bfloat16/float16/bool, sharded on a 2x4 mesh; one of 1 GiB; a TF1
one with partitioned variables; a Keras model's SavedModel) are converted to
Hugging Face's layout: the `safetensors` package reads every tensor equal to
tf.train.load_checkpoint's value, the index names every tensor and its file, files are no
larger than asked. Converted back, tf.train.load_checkpoint reads every tensor equal, and a
restore into objects (DVariables too) works. Files laid out as PyTorch DCP's Hugging Face writer lays them out
(pieces with DCP_SHARDING_INFO offsets) are assembled equal. Strings are refused, nothing
written.

usage: python check.py UNBOUND WORKDIR     (prints "convert check: N passed, M failed")
"""

import json
import os
import shutil
import subprocess
import sys

import ml_dtypes
import numpy as np
import tensorflow as tf
from safetensors import safe_open
from safetensors.numpy import save_file

unbound, work = sys.argv[1], sys.argv[2]
passed = failed = 0
# DTensor needs its 8 logical CPU devices before anything runs.
cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 8)


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok {name}")
    else:
        failed += 1
        print(f"FAIL {name} {detail}")


def run(*args, expect=0):
    p = subprocess.run([unbound, *args], capture_output=True, text=True)
    if p.returncode != expect:
        raise RuntimeError(f"unbound {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def read_dir(d):
    """Every tensor of an output directory, through the safetensors package; with the keys
    and the file each is in."""
    files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
    out, keys, where = {}, {}, {}
    for f in files:
        with safe_open(os.path.join(d, f), framework="numpy") as st:
            meta = st.metadata() or {}
            keys.update(json.loads(meta.get("unbound.keys", "{}")))
            assert meta.get("format") == "tf", meta.get("format")
            for k in st.keys():
                assert k not in out, k
                out[k] = st.get_tensor(k)
                where[k] = f
    return out, keys, where, files


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def tf_values(prefix):
    r = tf.train.load_checkpoint(prefix)
    return {
        k: r.get_tensor(k)
        for k in r.get_variable_to_shape_map()
        if k != "_CHECKPOINTABLE_OBJECT_GRAPH"
    }


def round_trip(name, src, max_shard_size="5GB", extra=()):
    """src to safetensors and back, checked against TensorFlow's reading of src."""
    st = os.path.join(work, name + ".st")
    back = os.path.join(work, name + ".back", "ckpt")
    run("convert", src, st, "--to", "safetensors", "--max-shard-size", max_shard_size, *extra)
    prefix = os.path.join(src, "variables", "variables") if os.path.isdir(src) else src
    want = tf_values(prefix)
    got, keys, where, files = read_dir(st)
    check(f"{name}: every tensor converted", sorted(keys.values()) == sorted(want), f"{sorted(keys.values())} vs {sorted(want)}")
    bad = [n for n, v in got.items() if not same(v, want.get(keys.get(n)))]
    check(f"{name}: safetensors reads every tensor equal to TensorFlow's", not bad, bad[:5])
    if len(files) > 1:
        with open(os.path.join(st, "model.safetensors.index.json")) as f:
            index = json.load(f)
        check(f"{name}: index names every tensor and its file", index["weight_map"] == where)
        total = sum(v.nbytes for v in got.values())
        check(f"{name}: index total_size", index["metadata"]["total_size"] == total)
        limit = int(max_shard_size)
        sizes = {f: 0 for f in files}
        for n, f in where.items():
            sizes[f] += got[n].nbytes
        over = [f for f, s in sizes.items() if s > limit and len([1 for w in where.values() if w == f]) > 1]
        check(f"{name}: files no larger than {limit} bytes", not over, over)
        check(f"{name}: HF file names", all(f.startswith("model-") and f.endswith(f"-of-{len(files):05d}.safetensors") for f in files), files)
    else:
        check(f"{name}: one model.safetensors", files == ["model.safetensors"], files)
    os.makedirs(os.path.dirname(back))
    run("convert", st, back, "--to", "tf", "--jobs", "2")
    again = tf_values(back)
    bad = [k for k in want if not same(again.get(k), want[k])]
    check(f"{name}: TensorFlow reads every tensor back equal", not bad and sorted(again) == sorted(want), bad[:5])
    return back


# 1. An object-based checkpoint of every dtype safetensors has, nested objects.
rng = np.random.default_rng(32)


class Inner(tf.Module):
    def __init__(self):
        super().__init__()
        self.kernel = tf.Variable(rng.standard_normal((5, 7)).astype(np.float32))
        self.bias = tf.Variable(np.arange(7, dtype=np.float64))


def make_plain():
    m = tf.Module()
    m.dense = Inner()
    m.half = tf.Variable(rng.standard_normal((3, 4)).astype(np.float16))
    m.brain = tf.Variable(tf.cast(rng.standard_normal((4, 3)), tf.bfloat16))
    m.flags = tf.Variable(rng.integers(0, 2, (6,)).astype(bool))
    for dt in ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]:
        setattr(m, "i_" + dt, tf.Variable(rng.integers(0, 100, (2, 3)).astype(dt)))
    m.scalar = tf.Variable(np.float32(3.5))
    m.empty = tf.Variable(np.zeros((0, 4), np.float32))
    return m


try:
    m = make_plain()
    ck = tf.train.Checkpoint(model=m)
    prefix = ck.write(os.path.join(work, "plain", "ckpt"))
    back = round_trip("plain", prefix, max_shard_size="200")
    # Restore into fresh objects from what came back.
    m2 = make_plain()
    status = tf.train.Checkpoint(model=m2).read(back)
    status.assert_existing_objects_matched()
    bad = [v.name for v, w in zip(m2.variables, m.variables) if not same(v.numpy(), w.numpy())]
    check("plain: restore into objects from the converted-back checkpoint", not bad, bad)
    st = os.path.join(work, "plain.st")
    _, keys, _, _ = read_dir(st)
    check("plain: names are object paths", "model/dense/kernel" in keys, sorted(keys)[:5])
    run("convert", prefix, os.path.join(work, "plain.keys.st"), "--names", "keys")
    _, keys, _, _ = read_dir(os.path.join(work, "plain.keys.st"))
    check("plain: --names keys", all(k == v for k, v in keys.items()) and "model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE" in keys)
except Exception as e:  # noqa: BLE001
    check("plain", False, repr(e))

# 1b. A DTensor checkpoint (mesh 2x4) of bfloat16, float16, bool and float32 variables,
# sharded, replicated and partly sharded: written by tf.train.Checkpoint.save on 8 devices.
try:
    from tensorflow.experimental import dtensor

    mesh = dtensor.create_mesh([("x", 2), ("y", 4)], device_type="CPU")

    def dvar(value, dtype, specs):
        t = dtensor.copy_to_mesh(tf.constant(value, dtype=dtype), dtensor.Layout.replicated(mesh, len(value.shape)))
        return dtensor.DVariable(dtensor.relayout(t, dtensor.Layout(specs, mesh)))

    def make_dt():
        h = tf.Module()
        h.bf = dvar(rng.standard_normal((8, 12)), tf.bfloat16, ["x", "y"])
        h.hf = dvar(rng.standard_normal((4, 6)), tf.float16, ["unsharded", "unsharded"])
        h.flags = dvar(rng.integers(0, 2, (8,)).astype(bool), tf.bool, ["y"])
        h.w = dvar(rng.standard_normal((6, 8)).astype(np.float32), tf.float32, ["unsharded", "x"])
        return h

    h = make_dt()
    p = tf.train.Checkpoint(m=h).save(os.path.join(work, "dt", "ckpt"))
    back = round_trip("dtensor", p, max_shard_size="300")
    _, keys, _, _ = read_dir(os.path.join(work, "dtensor.st"))
    check("dtensor: bfloat16/float16/bool kept", {"m/bf", "m/hf", "m/flags"} <= set(keys), sorted(keys))
    h2 = make_dt()
    tf.train.Checkpoint(m=h2).read(back).expect_partial()
    def full(v):
        r = dtensor.relayout(v.read_value(), dtensor.Layout.replicated(mesh, v.shape.rank))
        return dtensor.unpack(r)[0].numpy()

    bad = [n for n in ("bf", "hf", "flags", "w") if not same(full(getattr(h2, n)), full(getattr(h, n)))]
    check("dtensor: restore into DVariables from the converted-back checkpoint", not bad, bad)
except Exception as e:  # noqa: BLE001
    check("dtensor", False, repr(e))

# 1c. A checkpoint of 1 GiB (4 variables of 256 MiB), in files of at most 600 MB: compared
# one tensor at a time.
try:
    big = tf.Module()
    for i in range(4):
        setattr(big, f"v{i}", tf.Variable(tf.random.stateless_uniform([64 << 20], seed=[i, 32])))
    bp = tf.train.Checkpoint(m=big).write(os.path.join(work, "big", "ckpt"))
    del big
    st = os.path.join(work, "big.st")
    run("convert", bp, st, "--max-shard-size", "600MB", "--jobs", "2")
    files = sorted(f for f in os.listdir(st) if f.endswith(".safetensors"))
    check("1 GiB: two tensors per 600 MB file", files == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"], files)
    r = tf.train.load_checkpoint(bp)
    bad = []
    for f in files:
        with safe_open(os.path.join(st, f), framework="numpy") as sf:
            keys = json.loads(sf.metadata()["unbound.keys"])
            for k in sf.keys():
                if not same(sf.get_tensor(k), r.get_tensor(keys[k])):
                    bad.append(k)
    check("1 GiB: safetensors reads every tensor equal to TensorFlow's", not bad, bad)
    back = os.path.join(work, "big.back", "ckpt")
    os.makedirs(os.path.dirname(back))
    run("convert", st, back, "--jobs", "2")
    shutil.rmtree(st)
    r2 = tf.train.load_checkpoint(back)
    bad = [k for k in r.get_variable_to_shape_map() if k != "_CHECKPOINTABLE_OBJECT_GRAPH" and not same(r2.get_tensor(k), r.get_tensor(k))]
    check("1 GiB: TensorFlow reads every tensor back equal", not bad, bad)
    shutil.rmtree(os.path.dirname(back))
    shutil.rmtree(os.path.dirname(bp))
except Exception as e:  # noqa: BLE001
    check("1 GiB", False, repr(e))

# 2. TF1 partitioned variables (slices assembled whole).
try:
    g = tf.Graph()
    with g.as_default():
        a = tf.compat.v1.get_variable(
            "part/a", initializer=tf.constant(rng.standard_normal((10, 6)).astype(np.float32)),
            partitioner=tf.compat.v1.fixed_size_partitioner(3))
        b = tf.compat.v1.get_variable(
            "part/b", initializer=tf.constant(rng.integers(0, 9, (4, 9)).astype(np.int32)),
            partitioner=tf.compat.v1.fixed_size_partitioner(2, axis=1))
        c = tf.compat.v1.get_variable("whole/c", initializer=tf.constant(np.arange(5, dtype=np.float32)))
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as s:
            s.run(tf.compat.v1.global_variables_initializer())
            p = saver.save(s, os.path.join(work, "part", "ckpt"), write_meta_graph=False)
    round_trip("partitioned", p)
except Exception as e:  # noqa: BLE001
    check("partitioned", False, repr(e))

# 3. A Keras model's SavedModel variables.
try:
    km = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(16), tf.keras.layers.Dense(4)])
    km(np.zeros((1, 8), np.float32))
    sm = os.path.join(work, "keras_sm")
    tf.saved_model.save(km, sm)
    round_trip("keras", sm, max_shard_size="600")
except Exception as e:  # noqa: BLE001
    check("keras", False, repr(e))

# 4. Strings are refused, naming the key; nothing written.
try:
    s = tf.train.Checkpoint(words=tf.Variable(["a", "b"]), x=tf.Variable([1.0]))
    sp = s.write(os.path.join(work, "str", "ckpt"))
    out = os.path.join(work, "str.st")
    p = run("convert", sp, out, expect=1)
    check("strings refused, naming the key, nothing written",
          "words/.ATTRIBUTES/VARIABLE_VALUE" in p.stderr and not os.path.exists(out), p.stderr)
except Exception as e:  # noqa: BLE001
    check("strings", False, repr(e))

# 5. PyTorch DCP's Hugging Face writer layout: each rank's pieces, DCP_SHARDING_INFO offsets.
try:
    # As the writer lays them out with consolidation on: the ranks' files in dcp/sharded/.
    d = os.path.join(work, "dcp")
    sharded = os.path.join(d, "sharded")
    os.makedirs(sharded)
    w = rng.standard_normal((8, 6)).astype(np.float32)
    e = rng.standard_normal((5,)).astype(ml_dtypes.bfloat16)
    n = rng.integers(0, 100, (4, 4, 2)).astype(np.int64)
    ranks = [
        {"w": (w[0:4, 0:3], [0, 0]), "e": (e[0:3], [0]), "n": (n[:, 0:2], [0, 0, 0])},
        {"w": (w[0:4, 3:6], [0, 3]), "e": (e[3:5], [3]), "n": (n[:, 2:4], [0, 2, 0])},
        {"w": (w[4:8, 0:3], [4, 0])},
        {"w": (w[4:8, 3:6], [4, 3])},
    ]
    for r, pieces in enumerate(ranks):
        tensors = {k: np.ascontiguousarray(v[0]) for k, v in pieces.items()}
        info = {k: {"saved_offsets": v[1]} for k, v in pieces.items()}
        save_file(tensors, os.path.join(sharded, f"shard-{r + 1:05d}-model-00001-of-00001.safetensors"),
                  metadata={"DCP_SHARDING_INFO": json.dumps(info), "DCP_VERSION": "1.0", "format": "pt"})
    out = os.path.join(work, "dcp.back", "ckpt")
    os.makedirs(os.path.dirname(out))
    run("convert", d, out, "--to", "tf", "--jobs", "3")
    got = tf_values(out)
    check("dcp: pieces assembled into whole tensors TensorFlow reads equal",
          same(got["w"], w) and same(got["n"], n) and
          got["e"].tobytes() == e.tobytes() and got["e"].dtype == tf.bfloat16.as_numpy_dtype,
          {k: v.shape for k, v in got.items()})
    # A missing piece is refused.
    os.remove(os.path.join(sharded, "shard-00004-model-00001-of-00001.safetensors"))
    p = run("convert", d, os.path.join(work, "dcp.missing"), "--to", "tf", expect=1)
    check("dcp: a missing piece is refused", "of its 48 elements" in p.stderr, p.stderr)
except Exception as e:  # noqa: BLE001
    check("dcp", False, repr(e))

# 6. Plain safetensors (as PyTorch/JAX users have them): one file, and a name in two files.
try:
    d = os.path.join(work, "plainst")
    os.makedirs(d)
    x = rng.standard_normal((3, 3)).astype(np.float16)
    save_file({"x": x, "y": np.arange(4, dtype=np.uint8)}, os.path.join(d, "a.safetensors"))
    out = os.path.join(work, "plainst.back", "ckpt")
    run("convert", os.path.join(d, "a.safetensors"), out)
    got = tf_values(out)
    check("plain safetensors file to a checkpoint", same(got["x"], x) and same(got["y"], np.arange(4, dtype=np.uint8)))
    save_file({"x": x}, os.path.join(d, "b.safetensors"))
    p = run("convert", d, os.path.join(work, "plainst.dup"), "--to", "tf", expect=1)
    check("a name in two files is refused", '"x"' in p.stderr and "b.safetensors" in p.stderr, p.stderr)
except Exception as e:  # noqa: BLE001
    check("plain safetensors", False, repr(e))

print(f"convert check: {passed} passed, {failed} failed")

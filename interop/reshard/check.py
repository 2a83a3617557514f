"""Sharded checkpoints: unbound against TensorFlow 2.21 DTensor (run by check.sh).

For each checkpoint TensorFlow writes here on 8 logical CPU devices (meshes 2x4, 2x2x2, x8;
variables sharded, partly sharded -- only some devices write -- and replicated; a
replicated-only one; a plain tf.Variable one; `.write` and `.save`):

(a) every variable: `unbound vars PREFIX KEY --npy` equals tf.train.load_checkpoint's value;
(b) random boxes: `unbound vars PREFIX KEY --box "SHAPE SLICE" --npy` equals RestoreV2 of the
    same shape_and_slice, or, where TensorFlow fails (float16, strings), the full value sliced
    in NumPy (counted separately);
(c) `unbound reshard` to several target meshes and layouts; TensorFlow restores the result
    into DVariables of the target layouts; every component equals the one TensorFlow's own
    restore of the source checkpoint into the same DVariables gives (and, where TensorFlow's
    cross-layout restore fails, the full value cut by the layout in NumPy), and
    load_checkpoint of the result gives every full value back;
(d) `unbound reshard --to safetensors` of a TensorFlow DTensor checkpoint: every device file,
    parsed here by a small reader of the format, holds the NumPy cut of TensorFlow's value for
    that device; `--from safetensors` back to a checkpoint on another mesh restores equal;
(e) checkpoints unbound writes from scratch (the example make_random_checkpoint: random mesh,
    layouts, shapes and values, every dtype) are restored by TensorFlow into DVariables of
    those layouts, and load_checkpoint gives the values written.

usage: python check.py UNBOUND WORKDIR MAKE_RANDOM_CHECKPOINT
Prints `ok NAME` / `FAIL NAME: why` and `reshard check: N passed, M failed`; exit 1 on failure.
"""

import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.experimental import dtensor  # noqa: E402

UNBOUND, WORK = sys.argv[1], sys.argv[2]
cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 8)

results = {"passed": 0, "failed": 0, "tf_failed_boxes": 0}
rng = np.random.default_rng(12)


def report(name, problem):
    if problem:
        results["failed"] += 1
        print(f"FAIL {name}: {problem}")
    else:
        results["passed"] += 1
        print(f"ok {name}")


def mesh_of(dims):
    return dtensor.create_mesh(list(dims), device_type="CPU")


def make_value(dtype, shape):
    n = int(np.prod(shape))
    if dtype == tf.string:
        return np.array([b"s%d-%s" % (i, b"x" * (i % 5)) for i in range(n)], dtype=object).reshape(shape)
    if dtype == tf.bool:
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    if dtype == tf.int64:
        return rng.integers(-(2**40), 2**40, n).reshape(shape)
    if dtype.is_integer:
        return rng.integers(dtype.min if dtype.min > -128 else -100, 100, n).reshape(shape)
    if dtype.is_complex:
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).reshape(shape)
    return rng.standard_normal(n).astype(np.float32).reshape(shape)


def dvariable(value, dtype, specs, mesh):
    rank = len(value.shape)
    t = dtensor.copy_to_mesh(tf.constant(value, dtype=dtype), dtensor.Layout.replicated(mesh, rank))
    return dtensor.DVariable(dtensor.relayout(t, dtensor.Layout(specs, mesh)))


class Holder(tf.Module):
    pass


def key_of(name):
    return f"m/{name}/.ATTRIBUTES/VARIABLE_VALUE"


def to_numpy(value):
    a = np.asarray(value)
    if a.dtype.name == "bfloat16":
        return a.astype(np.float32)
    return a


def read_npy(path):
    a = np.load(path)
    if a.dtype.kind == "S":
        return a.astype(object)
    return a


def same(a, b):
    a, b = to_numpy(a), to_numpy(b)
    if a.shape != b.shape:
        return f"shape {a.shape} != {b.shape}"
    if a.dtype == object or b.dtype == object:
        ok = all(bytes(x) == bytes(y) for x, y in zip(a.ravel(), b.ravel()))
    else:
        ok = np.array_equal(a.astype(b.dtype), b, equal_nan=True)
    return None if ok else "values differ"


def tf_get(reader, key, fallback):
    """load_checkpoint's value, or `fallback` where its reader has no such dtype (half)."""
    try:
        return reader.get_tensor(key)
    except ValueError:
        results["tf_failed_boxes"] += 1
        return fallback


def unbound(*args):
    return subprocess.run([UNBOUND, *args], capture_output=True, text=True)


# Checkpoints: name -> (mesh dims or None for plain, {var: (dtype, shape, specs)}, save kind)
CKPTS = {
    "mesh2x4_write": ([("x", 2), ("y", 4)], {
        "w": (tf.float32, (8, 16), ["x", "y"]),
        "p": (tf.float32, (8, 16), ["unsharded", "y"]),   # partial writers: devices 0-3 only
        "r": (tf.float32, (2, 16), ["unsharded", "unsharded"]),
        "h": (tf.float16, (8, 4), ["x", "unsharded"]),
        "b": (tf.bfloat16, (4, 8), ["unsharded", "y"]),
        "t": (tf.bool, (8, 4), ["y", "unsharded"]),
        "i": (tf.int64, (16,), ["y"]),
        "s": (tf.string, (4, 4), ["x", "unsharded"]),
    }, "write"),
    "mesh2x2x2_save": ([("a", 2), ("b", 2), ("c", 2)], {
        "w": (tf.float32, (4, 6, 8), ["a", "b", "c"]),
        "h": (tf.float16, (8, 2), ["c", "unsharded"]),
        "s": (tf.string, (4,), ["b"]),
        "r": (tf.int64, (3,), ["unsharded"]),
    }, "save"),
    "mesh8_save": ([("x", 8)], {
        "w": (tf.float32, (16, 4), ["x", "unsharded"]),
        "v": (tf.float32, (4, 16), ["unsharded", "x"]),
        "s": (tf.string, (8,), ["x"]),
    }, "save"),
    "replicated_write": ([("x", 2), ("y", 4)], {
        "w": (tf.float32, (8, 16), ["unsharded", "unsharded"]),
        "h": (tf.float16, (4,), ["unsharded"]),
        "s": (tf.string, (4,), ["unsharded"]),
    }, "write"),
    "plain_save": (None, {
        "w": (tf.float32, (8, 16), None),
        "h": (tf.float16, (8, 4), None),
        "t": (tf.bool, (8, 4), None),
        "s": (tf.string, (4, 4), None),
        "d": (tf.float64, (4, 8), None),
        "i8": (tf.int8, (8, 2), None),
        "u8": (tf.uint8, (8,), None),
        "i32": (tf.int32, (2, 8), None),
        "c": (tf.complex64, (4, 4), None),
    }, "save"),
}

# Reshard targets per checkpoint: (mesh dims, {var: specs}); variables not named keep their
# layout (DTensor ones) or stay whole (plain ones).
TARGETS = {
    "mesh2x4_write": [
        ([("x", 4), ("y", 2)], {"w": "y,unsharded", "p": "x,y", "r": "unsharded,y", "h": "y,unsharded",
                                "b": "x,unsharded", "t": "unsharded,y", "i": "x", "s": "unsharded,x"}),
        ([("x", 8)], {"w": "unsharded,x", "p": "x,unsharded", "r": "unsharded,unsharded", "h": "x,unsharded",
                      "b": "unsharded,x", "t": "x,unsharded", "i": "x", "s": "unsharded,unsharded"}),
        ([("x", 2), ("y", 4)], {"w": "y,x"}),
    ],
    "mesh2x2x2_save": [
        ([("x", 2), ("y", 4)], {"w": "x,unsharded,y", "h": "y,unsharded", "s": "y", "r": "unsharded"}),
        ([("x", 8)], {"w": "unsharded,unsharded,x", "h": "x,unsharded", "s": "unsharded", "r": "unsharded"}),
    ],
    "mesh8_save": [
        ([("x", 2), ("y", 4)], {"w": "y,unsharded", "v": "x,y", "s": "y"}),
    ],
    "replicated_write": [
        ([("x", 4), ("y", 2)], {"w": "x,y", "h": "y", "s": "x"}),
    ],
    "plain_save": [
        ([("x", 2), ("y", 4)], {"w": "x,y", "h": "y,unsharded", "t": "unsharded,x", "s": "x,unsharded",
                                "d": "unsharded,y", "i8": "y,x", "u8": "y", "i32": "x,y", "c": "y,unsharded"}),
    ],
}


def make_checkpoint(name, spec):
    dims, variables, kind = spec
    mesh = mesh_of(dims) if dims else None
    m = Holder()
    values = {}
    for var, (dtype, shape, specs) in variables.items():
        value = make_value(dtype, shape)
        if dtype != tf.string:
            value = tf.constant(value, dtype=dtype).numpy()  # as stored (float16, bfloat16)
        values[var] = value
        if mesh is None:
            setattr(m, var, tf.Variable(tf.constant(value, dtype=dtype)))
        else:
            setattr(m, var, dvariable(value, dtype, specs, mesh))
    ckpt = tf.train.Checkpoint(m=m)
    os.makedirs(f"{WORK}/{name}", exist_ok=True)
    prefix = ckpt.write(f"{WORK}/{name}/ckpt") if kind == "write" else ckpt.save(f"{WORK}/{name}/ckpt")
    return prefix, values


def check_reads(name, prefix, spec, values):
    reader = tf.train.load_checkpoint(prefix)
    for var, (dtype, shape, _) in spec[1].items():
        key = key_of(var)
        out = f"{WORK}/v.npy"
        # unbound never overwrites an output: clear it before each read.
        if os.path.exists(out):
            os.remove(out)
        r = unbound("vars", prefix, key, "--npy", out)
        if r.returncode:
            report(f"{name}/{var}/read", r.stderr.strip())
            continue
        problem = same(read_npy(out), tf_get(reader, key, values[var])) or same(read_npy(out), values[var])
        report(f"{name}/{var}/read", problem)
        for k in range(3):
            lo = [int(rng.integers(0, d)) for d in shape]
            ln = [int(rng.integers(1, d - s + 1)) for d, s in zip(shape, lo)]
            text = " ".join(str(d) for d in shape) + " " + ":".join(
                "-" if (s == 0 and n == d and k == 2) else f"{s},{n}" for s, n, d in zip(lo, ln, shape))
            if os.path.exists(out):
                os.remove(out)
            r = unbound("vars", prefix, key, "--box", text, "--npy", out)
            if r.returncode:
                report(f"{name}/{var}/box {text!r}", r.stderr.strip())
                continue
            got = read_npy(out)
            expect = values[var][tuple(slice(s, s + n) for s, n in zip(lo, ln))]
            try:
                tf_box = tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=[key],
                                              shape_and_slices=[text], dtypes=[dtype])[0].numpy()
            except Exception:  # TensorFlow cannot assemble this box (float16, strings)
                results["tf_failed_boxes"] += 1
                tf_box = expect
            report(f"{name}/{var}/box {text!r}", same(got, tf_box) or same(got, expect))


def expected_components(value, specs, mesh_dims):
    sizes = [s for _, s in mesh_dims]
    names = [n for n, _ in mesh_dims]
    out = []
    for pos in range(int(np.prod(sizes))):
        loc = np.unravel_index(pos, sizes)
        index = []
        for axis, sp in enumerate(specs):
            if sp == "unsharded":
                index.append(slice(None))
            else:
                n = sizes[names.index(sp)]
                length = value.shape[axis] // n
                c = loc[names.index(sp)]
                index.append(slice(c * length, (c + 1) * length))
        out.append(value[tuple(index)])
    return out


def restore_into(prefix, spec, mesh, layouts):
    m = Holder()
    for var, (dtype, shape, _) in spec[1].items():
        specs = layouts[var]
        zero = np.zeros(shape, dtype=object) if dtype == tf.string else np.zeros(shape)
        if dtype == tf.string:
            zero[...] = b""
        setattr(m, var, dvariable(zero, dtype, specs, mesh))
    tf.train.Checkpoint(m=m).read(prefix).expect_partial()
    return {var: [c.numpy() for c in dtensor.unpack(getattr(m, var).read_value())] for var in spec[1]}


def check_reshards(name, prefix, spec, values):
    src_dims = spec[0]
    for t, (dims, layouts) in enumerate(TARGETS[name]):
        label = f"{name}->{'x'.join(str(s) for _, s in dims)}#{t}"
        out = f"{WORK}/{name}_out{t}/ckpt"
        mesh_arg = ",".join(f"{n}={s}" for n, s in dims)
        args = ["reshard", prefix, out, "--mesh", mesh_arg]
        for var, specs in layouts.items():
            args += ["--layout", f"{key_of(var)}={specs}"]
        r = unbound(*args)
        if r.returncode:
            report(f"{label}/reshard", r.stderr.strip())
            continue
        full_layouts = {}
        for var, (_, _, specs) in spec[1].items():
            if var in layouts:
                full_layouts[var] = layouts[var].split(",")
            elif src_dims == dims and specs is not None:
                full_layouts[var] = specs
            else:
                full_layouts[var] = ["unsharded"] * len(spec[1][var][1])
        mesh = mesh_of(dims)
        ours = restore_into(out, spec, mesh, full_layouts)
        try:
            theirs = restore_into(prefix, spec, mesh, full_layouts)
        except Exception:
            theirs = None
        reader = tf.train.load_checkpoint(out)
        for var in spec[1]:
            problem = same(tf_get(reader, key_of(var), values[var]), values[var])
            expect = expected_components(values[var], full_layouts[var], dims)
            for i, comp in enumerate(ours[var]):
                problem = problem or same(comp, expect[i])
                if theirs is not None and spec[1][var][0] not in (tf.float16, tf.string):
                    problem = problem or same(comp, theirs[var][i])
            report(f"{label}/{var}", problem)


# --- safetensors (issue 12): per-device files, read here by a tiny independent reader ---

ST_DTYPES = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "I8": np.int8, "I16": np.int16,
             "I32": np.int32, "I64": np.int64, "U8": np.uint8, "U16": np.uint16, "U32": np.uint32,
             "U64": np.uint64, "BOOL": np.bool_, "BF16": np.uint16}


def read_safetensors(path):
    """{name: (dtype code, array)} and the metadata: 8-byte little-endian header length,
    JSON header, raw data (BF16 as its uint16 bits)."""
    import json
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    out = {}
    for name, info in header.items():
        a, b = info["data_offsets"]
        arr = np.frombuffer(body[a:b], dtype=ST_DTYPES[info["dtype"]]).reshape(info["shape"])
        out[name] = (info["dtype"], arr)
    return out, meta


def raw_bits(a):
    """bfloat16 as its uint16 bits; everything else unchanged."""
    a = np.asarray(a)
    return a.view(np.uint16) if a.dtype.name == "bfloat16" else a


ST_CKPT = ([("x", 2), ("y", 4)], {
    "w": (tf.float32, (8, 16), ["x", "y"]),
    "p": (tf.float32, (8, 16), ["unsharded", "y"]),
    "r": (tf.float64, (2, 4), ["unsharded", "unsharded"]),
    "h": (tf.float16, (8, 4), ["x", "unsharded"]),
    "b": (tf.bfloat16, (4, 8), ["unsharded", "y"]),
    "t": (tf.bool, (8, 4), ["y", "unsharded"]),
    "i": (tf.int64, (16,), ["y"]),
    "u": (tf.uint8, (4, 2), ["y", "x"]),
}, "write")


def check_safetensors():
    import json
    name = "st_mesh2x4"
    prefix, values = make_checkpoint(name, ST_CKPT)
    dims, variables, _ = ST_CKPT
    out = f"{WORK}/{name}_st"
    r = unbound("reshard", prefix, "--to", "safetensors", out, "--mesh", "x=2,y=4")
    if r.returncode:
        report(f"{name}/to-safetensors", r.stderr.strip())
        return
    files = sorted(os.listdir(out))
    report(f"{name}/files", None if files == [f"device_{i:04d}.safetensors" for i in range(8)] else str(files))
    for pos, fname in enumerate(files):
        tensors, meta = read_safetensors(f"{out}/{fname}")
        layouts = json.loads(meta.get("unbound.layouts", "{}"))
        problem = None if meta.get("unbound.device") == str(pos) else f"device metadata {meta}"
        for var, (dtype, shape, specs) in variables.items():
            key = key_of(var)
            if key not in tensors:
                problem = problem or f"{var} missing"
                continue
            want_specs = specs if any(s != "unsharded" for s in specs) else ["unsharded"] * len(shape)
            problem = problem or (None if layouts.get(key) == want_specs else f"{var} layout {layouts.get(key)}")
            expect = expected_components(values[var], specs, dims)[pos]
            problem = problem or same(tensors[key][1], raw_bits(expect))
        report(f"{name}/safetensors device {pos}", problem)
    # Back to a TF checkpoint on another mesh: load_checkpoint and DVariable restores agree.
    back = f"{WORK}/{name}_back/ckpt"
    tdims = [("x", 4), ("y", 2)]
    layouts = {"w": "y,unsharded", "p": "x,y", "r": "unsharded,y", "h": "y,unsharded", "b": "x,unsharded",
               "t": "unsharded,y", "i": "x", "u": "x,unsharded"}
    args = ["reshard", "--from", "safetensors", out, back, "--mesh", "x=4,y=2"]
    for var, specs in layouts.items():
        args += ["--layout", f"{key_of(var)}={specs}"]
    r = unbound(*args)
    if r.returncode:
        report(f"{name}/from-safetensors", r.stderr.strip())
        return
    reader = tf.train.load_checkpoint(back)
    full = {var: sp.split(",") for var, sp in layouts.items()}
    ours = restore_into(back, ST_CKPT, mesh_of(tdims), full)
    for var in variables:
        problem = same(tf_get(reader, key_of(var), values[var]), values[var])
        expect = expected_components(values[var], full[var], tdims)
        for i, comp in enumerate(ours[var]):
            problem = problem or same(comp, expect[i])
        report(f"{name}/safetensors round trip/{var}", problem)


# --- a bundle written from scratch by unbound (random layouts, every dtype) ---

NP_OF = {"float16": np.float16, "float32": np.float32, "float64": np.float64, "int8": np.int8,
         "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8, "uint16": np.uint16,
         "uint32": np.uint32, "uint64": np.uint64, "bool": np.bool_, "complex64": np.complex64,
         "complex128": np.complex128, "bfloat16": np.uint16}


def check_random_bundles(maker, seeds):
    import json
    for seed in seeds:
        prefix = f"{WORK}/random{seed}/ckpt"
        os.makedirs(os.path.dirname(prefix), exist_ok=True)
        r = subprocess.run([maker, prefix, str(seed)], capture_output=True, text=True)
        if r.returncode:
            report(f"random{seed}/make", r.stderr.strip())
            continue
        with open(prefix + ".manifest.json") as f:
            manifest = json.load(f)
        dims = [(n, s) for n, s in manifest["mesh"]]
        values, spec = {}, {}
        for var, info in manifest["vars"].items():
            dtype = tf.as_dtype(info["dtype"])
            shape = tuple(info["shape"])
            if info["dtype"] == "string":
                v = np.array([bytes.fromhex(h) for h in info["hex"]], dtype=object).reshape(shape)
            else:
                v = np.frombuffer(bytes.fromhex(info["hex"]), dtype=NP_OF[info["dtype"]]).reshape(shape)
            values[var] = v
            spec[var] = (dtype, shape, info["specs"])
        full = {var: s[2] for var, s in spec.items()}
        try:
            ours = restore_into(prefix, (dims, spec, None), mesh_of(dims), full)
        except Exception as e:  # noqa: BLE001
            report(f"random{seed}/restore", f"TensorFlow failed to restore: {e}")
            continue
        reader = tf.train.load_checkpoint(prefix)
        for var, (dtype, shape, specs) in spec.items():
            expect = expected_components(values[var], specs, dims)
            problem = None
            for i, comp in enumerate(ours[var]):
                problem = problem or same(raw_bits(comp), expect[i])
            got = tf_get(reader, key_of(var), None)
            if got is not None:
                problem = problem or same(raw_bits(got), values[var])
            report(f"random{seed}/{var} {'x'.join(str(s) for _, s in dims)} {','.join(specs)}", problem)


for name, spec in CKPTS.items():
    prefix, values = make_checkpoint(name, spec)
    check_reads(name, prefix, spec, values)
    check_reshards(name, prefix, spec, values)
check_safetensors()
check_random_bundles(sys.argv[3], [1, 2, 3, 4])

print(f"(TensorFlow failed to read {results['tf_failed_boxes']} values or boxes unbound read; compared with NumPy)")
print(f"reshard check: {results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] else 0)

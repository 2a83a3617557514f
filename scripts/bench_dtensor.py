#!/usr/bin/env python3
"""NumPy splitting and TensorFlow DTensor on the array bench_dtensor (Rust) times.

    $TF_VENV/bin/python scripts/bench_dtensor.py [MiB]

The array is float32 of about MiB mebibytes on a mesh x=2,y=4 of 8 logical CPU devices:
- numpy unpack: the split numpy_util.unpack does (np.split per axis), each piece made
  contiguous; numpy pack: np.block of the pieces; numpy relayout x,y -> y,x: block then split;
- TensorFlow unpack: dtensor.relayout of the replicated tensor to x,y then dtensor.unpack and
  .numpy() of every component; relayout: x,y -> y,x then unpack to NumPy; pack: dtensor.pack
  of the components, relayout to replicated, one component to NumPy.
Prints one JSON object per line (best of three runs). Each TensorFlow measurement runs in
a process of its own; one killed for lack of memory is reported as such.
"""

import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402


def best(runs, f):
    t_best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        out = f()
        t_best = min(t_best, time.perf_counter() - t)
        del out
    return t_best


def make_array(mib):
    """A float32 array of about `mib` MiB, as the Rust benchmark makes it (side divisible by 8)."""
    n = (mib << 20) // 4
    side = int(n ** 0.5)
    side -= side % 8
    shape = (side, n // side)
    return np.random.default_rng(0).standard_normal(shape, dtype=np.float32)


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    if len(sys.argv) > 3 and sys.argv[2] == "--tf":
        tf_op(mib, sys.argv[3])
        return
    g = make_array(mib)

    def split(a, rows, cols):
        return [np.ascontiguousarray(c) for r in np.split(a, rows, axis=0) for c in np.split(r, cols, axis=1)]

    def emit(op, seconds):
        print(json.dumps({"op": op, "seconds": round(seconds, 4)}), flush=True)

    # x,y on x=2,y=4: 2 row blocks, 4 column blocks; device order = row-major over (x, y).
    emit("numpy unpack x,y", best(3, lambda: split(g, 2, 4)))
    comps = split(g, 2, 4)
    emit("numpy pack x,y", best(3, lambda: np.block([comps[0:4], comps[4:8]])))

    def np_relayout():
        whole = np.block([comps[0:4], comps[4:8]])
        # y,x: rows split over y (4), columns over x (2); device (x, y) holds block (y, x).
        blocks = [[np.ascontiguousarray(c) for c in np.split(r, 2, axis=1)] for r in np.split(whole, 4, axis=0)]
        return [blocks[yy][xx] for xx in range(2) for yy in range(4)]

    emit("numpy relayout x,y -> y,x", best(3, np_relayout))
    del g, comps

    # Each TensorFlow measurement runs in its own process (TensorFlow keeps device memory
    # around; one op's copies must not push the next out of memory).
    for op in ("unpack", "pack", "relayout"):
        r = subprocess.run([sys.executable, __file__, str(mib), "--tf", op], capture_output=True, text=True)
        if r.returncode == 0:
            print(r.stdout.strip(), flush=True)
        else:
            why = "killed (out of memory)" if r.returncode in (-9, 137) else r.stderr.strip()[-300:]
            print(json.dumps({"op": f"tensorflow {op}", "error": why}), flush=True)


def tf_op(mib, op):
    g = make_array(mib)
    import tensorflow as tf
    from tensorflow.experimental import dtensor
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 8)
    mesh = dtensor.create_mesh([("x", 2), ("y", 4)], device_type="CPU")
    l_xy = dtensor.Layout(["x", "y"], mesh)
    l_yx = dtensor.Layout(["y", "x"], mesh)
    rep_layout = dtensor.Layout.replicated(mesh, 2)

    def emit(name, seconds):
        print(json.dumps({"op": name, "seconds": round(seconds, 4)}), flush=True)

    if op == "unpack":
        rep = dtensor.copy_to_mesh(tf.constant(g), rep_layout)
        del g
        emit("tensorflow unpack x,y", best(3, lambda: [c.numpy() for c in dtensor.unpack(dtensor.relayout(rep, l_xy))]))
    elif op == "relayout":
        comps = [tf.constant(np.ascontiguousarray(c)) for r in np.split(g, 2, 0) for c in np.split(r, 4, 1)]
        del g
        d_xy = dtensor.pack(comps, l_xy)
        del comps
        emit("tensorflow relayout x,y -> y,x",
             best(3, lambda: [c.numpy() for c in dtensor.unpack(dtensor.relayout(d_xy, l_yx))]))
    else:
        comps = [tf.constant(np.ascontiguousarray(c)) for r in np.split(g, 2, 0) for c in np.split(r, 4, 1)]
        del g
        emit("tensorflow pack x,y", best(3, lambda: dtensor.unpack(dtensor.relayout(
            dtensor.pack(comps, l_xy), rep_layout))[0].numpy()))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""NumPy splitting and TensorFlow DTensor on the array bench_dtensor (Rust) times.

    $TF_VENV/bin/python scripts/bench_dtensor.py [MiB]

The array is float32 of about MiB mebibytes on a mesh x=2,y=4 of 8 logical CPU devices:
- numpy unpack: the split numpy_util.unpack does (np.split per axis), each piece made
  contiguous; numpy pack: np.block of the pieces; numpy relayout x,y -> y,x: block then split;
- TensorFlow unpack: dtensor.relayout of the replicated tensor to x,y then dtensor.unpack and
  .numpy() of every component; relayout: x,y -> y,x then unpack to NumPy; pack: dtensor.pack
  of the components, relayout to replicated, one component to NumPy.
Prints one JSON object per line (best of three runs).
"""

import json
import os
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


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    n = (mib << 20) // 4
    side = int(n ** 0.5)
    side -= side % 8
    shape = (side, n // side)
    g = (np.arange(shape[0] * shape[1], dtype=np.uint32) * 7 + 3).astype(np.uint8).view(np.uint8)
    g = np.frombuffer(np.resize(g, shape[0] * shape[1] * 4).tobytes(), dtype=np.float32).reshape(shape)

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

    import tensorflow as tf
    from tensorflow.experimental import dtensor
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 8)
    mesh = dtensor.create_mesh([("x", 2), ("y", 4)], device_type="CPU")
    rep = dtensor.copy_to_mesh(tf.constant(g), dtensor.Layout.replicated(mesh, 2))
    l_xy = dtensor.Layout(["x", "y"], mesh)
    l_yx = dtensor.Layout(["y", "x"], mesh)
    emit("tensorflow unpack x,y", best(3, lambda: [c.numpy() for c in dtensor.unpack(dtensor.relayout(rep, l_xy))]))
    d_xy = dtensor.relayout(rep, l_xy)
    emit("tensorflow relayout x,y -> y,x", best(3, lambda: [c.numpy() for c in dtensor.unpack(dtensor.relayout(d_xy, l_yx))]))
    tf_comps = [tf.constant(c) for c in comps]
    emit("tensorflow pack x,y", best(3, lambda: dtensor.unpack(dtensor.relayout(
        dtensor.pack(tf_comps, l_xy), dtensor.Layout.replicated(mesh, 2)))[0].numpy()))


if __name__ == "__main__":
    main()

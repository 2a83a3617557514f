"""TensorFlow's side of scripts/bench_reshard.sh: restore the benchmark checkpoint (written by
the make_bench_checkpoint example: VARS float32 [DIM, DIM] variables m/vNN, layout x,y on a
2x4 mesh) into DVariables of layout y,unsharded on a 4x2 mesh of 8 logical CPU devices, then
save it (tf.train.Checkpoint.write): TensorFlow's own way to reshard a checkpoint.

usage: python bench_reshard_tf.py SRC DST VARS DIM [--check]
Prints `tf restore S s, save S s, total S s`; with --check also compares every variable with
the values the example writes (for small sizes).
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.experimental import dtensor  # noqa: E402

src, dst, nvars, dim = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 8)
mesh = dtensor.create_mesh([("x", 4), ("y", 2)], device_type="CPU")
layout = dtensor.Layout(["y", "unsharded"], mesh)


class Holder(tf.Module):
    pass


m = Holder()
for k in range(nvars):
    setattr(m, f"v{k:02}", dtensor.DVariable(tf.zeros([dim, dim], layout=layout)))
ckpt = tf.train.Checkpoint(m=m)
t0 = time.perf_counter()
ckpt.read(src).expect_partial()
t1 = time.perf_counter()
ckpt.write(dst)
t2 = time.perf_counter()
print(f"tf restore {t1 - t0:.2f} s, save {t2 - t1:.2f} s, total {t2 - t0:.2f} s")
if "--check" in sys.argv:
    for k in range(nvars):
        want = (k * dim * dim + np.arange(dim * dim, dtype=np.int64)).astype(np.float32).reshape(dim, dim)
        comps = dtensor.unpack(getattr(m, f"v{k:02}").read_value())
        # Mesh position p is x = p // 2, y = p % 2; axis 0 is cut by y.
        full = np.concatenate([comps[0].numpy(), comps[1].numpy()], axis=0)
        assert np.array_equal(full, want), f"v{k:02} differs"
    print("check: TensorFlow restored every variable")

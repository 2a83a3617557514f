"""Write NumPy arrays as a TensorFlow checkpoint that tf.train.load_checkpoint reads.

usage: python checkpoint_write.py PREFIX
"""

import sys

import numpy as np

import unbound


def main() -> None:
    prefix = sys.argv[1]
    with unbound.CheckpointWriter(prefix) as writer:  # refuses an existing prefix
        writer.write("dense/kernel", np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
        writer.write("dense/bias", np.zeros(3, dtype=np.float32))
        writer.write("step", np.int64(100))
        writer.write("vocab", np.array([b"hello", b"world"], dtype=object))
    # Written atomically on leaving the block; read it back.
    ckpt = unbound.Checkpoint(prefix)
    for key in ckpt:
        print(key, ckpt[key].dtype, ckpt.shape(key))


if __name__ == "__main__":
    main()

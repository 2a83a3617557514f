"""Read a TensorFlow checkpoint as NumPy arrays, without TensorFlow.

usage: python checkpoint_read.py PREFIX [KEY [SHAPE_AND_SLICE]]
  PREFIX is a checkpoint prefix (PREFIX.index), e.g. model/variables/variables.
"""

import sys

import unbound


def main() -> None:
    prefix = sys.argv[1]
    ckpt = unbound.Checkpoint(prefix)
    if len(sys.argv) == 2:
        for key in ckpt:
            print(f"{key}\t{ckpt.tf_dtype(key)}\t{list(ckpt.shape(key))}")
        return
    key = sys.argv[2]
    if len(sys.argv) > 3:
        array = ckpt.read_box(key, sys.argv[3])  # e.g. "8 16 2,4:3,10"
    else:
        array = ckpt[key]  # a read-only view of the mapped file where possible
    print(f"{key}: {array.dtype} {array.shape} (view: {not array.flags.writeable})")
    print(array)


if __name__ == "__main__":
    main()

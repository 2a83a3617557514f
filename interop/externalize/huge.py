"""Past 2 GiB (issue 33): the small TensorFlow-made model huge.sh inflates, and its expected
outputs.

usage: python huge.py make OUT             a TF2 model whose signature gathers from, and takes
                                           the max of, three float32 constants in a function
       python huge.py expect ELEMENTS      the outputs serve_harness prints for it once
                                           inflate_consts gave each constant ELEMENTS elements
       python huge.py unbound-tf DIR       the outputs of DIR (a .cpb) loaded through
                                           unbound.tensorflow, in serve_harness's format
"""
import sys

import numpy as np


def values(n):
    i = np.arange(n, dtype=np.uint64)
    return ((i * np.uint64(2654435761)) % np.uint64(1000003)).astype(np.float32)


def line(name, array):
    array = np.asarray(array)
    dims = ",".join(str(d) for d in array.shape)
    return f"serving_default/{name} float [{dims}] {array.tobytes().hex()}"


cmd = sys.argv[1]
if cmd == "make":
    import tensorflow as tf

    class Model(tf.Module):
        @tf.function
        def tables(self, i):
            c = [tf.constant(values(64), name=f"table_{k}") for k in range(3)]
            return [tf.gather(t, i) for t in c], tf.add_n([tf.reduce_max(t) for t in c])

        @tf.function(input_signature=[tf.TensorSpec([None], tf.int64)])
        def serve(self, i):
            gathered, top = self.tables(i)
            return {"a": gathered[0], "b": gathered[1], "c": gathered[2], "max": top}

    m = Model()
    tf.saved_model.save(m, sys.argv[2], signatures={"serving_default": m.serve})
elif cmd == "expect":
    n = int(sys.argv[2])
    v = values(n)
    idx = np.arange(2) % 5  # serve_harness's input: element i is i % 5, unknown dims 2
    top = np.float32(np.float32(v.max() + v.max()) + v.max())
    out = {name: v[idx] for name in "abc"}
    out["max"] = np.float32(top)
    for name in sorted(out):
        print(line(name, out[name]))
    print("signatures run: 1")
elif cmd == "unbound-tf":
    import tensorflow as tf
    import unbound.tensorflow

    unbound.tensorflow.enable_image_format()
    f = tf.saved_model.load(sys.argv[2]).signatures["serving_default"]
    out = f(i=tf.constant(np.arange(2, dtype=np.int64) % 5))
    for name in sorted(out):
        print(line(name, out[name].numpy()))
    print("signatures run: 1")

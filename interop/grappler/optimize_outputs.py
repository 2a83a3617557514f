"""`unbound optimize` with the example plugins, judged by TensorFlow 2.21.

usage:
  optimize_outputs.py make DIR            write a TF2 SavedModel with Identity chains and
                                          constant arithmetic inside its serving function
  optimize_outputs.py compare ORIG OPT [--expect-fewer OP...]
                                          load both with tf.saved_model.load, call every
                                          signature on the same generated inputs, require equal
                                          outputs; with --expect-fewer, require the optimized
                                          model's functions to hold fewer nodes of those ops

Prints PASS/FAIL lines; exits 1 on any failure.
"""
import sys

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2


def make(path):
    class Model(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable([[1.0, 2.0], [3.0, 4.0]])

        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
        def serve(self, x):
            bias = tf.constant([1.0, 2.0]) * tf.constant(3.0) + tf.constant([0.5, -0.5])
            scale = tf.constant(2, tf.int32) * tf.constant(3, tf.int32) - tf.constant(1, tf.int32)
            y = tf.identity(tf.identity(tf.identity(x)))
            z = tf.matmul(y, self.w) + bias
            return {"out": tf.identity(z * tf.cast(scale, tf.float32))}

    model = Model()
    tf.saved_model.save(model, path, signatures={"serving_default": model.serve})


def inputs_for(spec, rng):
    shape = [3 if d is None else d for d in spec.shape]
    if spec.dtype == tf.string:
        return tf.constant(np.full(shape, b"unbound", dtype=object))
    if spec.dtype == tf.bool:
        return tf.constant(rng.random(shape) > 0.5)
    if spec.dtype.is_integer:
        return tf.constant(rng.integers(-5, 5, size=shape), dtype=spec.dtype)
    return tf.constant(rng.standard_normal(shape), dtype=spec.dtype)


def op_counts(path):
    sm = saved_model_pb2.SavedModel()
    try:
        with open(f"{path}/saved_model.pb", "rb") as f:
            sm.ParseFromString(f.read())
    except FileNotFoundError:
        return {}  # chunked (.cpb): op counts are only compared for .pb models
    counts = {}
    for meta in sm.meta_graphs:
        nodes = list(meta.graph_def.node)
        for fn in meta.graph_def.library.function:
            nodes.extend(fn.node_def)
        for node in nodes:
            counts[node.op] = counts.get(node.op, 0) + 1
    return counts


def compare(orig, opt, expect_fewer):
    failed = 0
    a = tf.saved_model.load(orig)
    b = tf.saved_model.load(opt)
    rng = np.random.default_rng(7)
    for key, fa in a.signatures.items():
        fb = b.signatures[key]
        _, kwargs_spec = fa.structured_input_signature
        feeds = {name: inputs_for(spec, rng) for name, spec in kwargs_spec.items()}
        out_a, out_b = fa(**feeds), fb(**feeds)
        for name in out_a:
            va, vb = np.asarray(out_a[name].numpy()), np.asarray(out_b[name].numpy())
            same = va.shape == vb.shape and (
                np.array_equal(va, vb) if va.dtype.kind in "OSUbiu" else np.allclose(va, vb, rtol=1e-6, atol=0)
            )
            if same:
                print(f"PASS {orig} signature {key} output {name}: equal after optimize")
            else:
                print(f"FAIL {orig} signature {key} output {name}: {va!r} != {vb!r}")
                failed += 1
    before, after = op_counts(orig), op_counts(opt)
    for op in expect_fewer:
        if after.get(op, 0) < before.get(op, 0):
            print(f"PASS {orig}: {op} nodes {before.get(op, 0)} -> {after.get(op, 0)}")
        else:
            print(f"FAIL {orig}: expected fewer {op} nodes, {before.get(op, 0)} -> {after.get(op, 0)}")
            failed += 1
    return failed


def main():
    if sys.argv[1] == "make":
        make(sys.argv[2])
        return 0
    orig, opt = sys.argv[2], sys.argv[3]
    fewer = sys.argv[5:] if len(sys.argv) > 4 and sys.argv[4] == "--expect-fewer" else []
    return 1 if compare(orig, opt, fewer) else 0


if __name__ == "__main__":
    sys.exit(main())

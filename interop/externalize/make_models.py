"""Writes the TensorFlow-made models interop/externalize/check.sh externalizes.

usage: python make_models.py OUT_DIR

- tf2_func_consts: a tf.Module whose signatures call tf.functions holding large constants
  (one in a nested function called by two signatures), beside a variable of its own;
- tf1_frozen: a TF1 graph of constants only (a frozen graph), saved with the TF1 builder,
  no variables;
- tf1_vars: a TF1 graph with a variable and large constants, saved with the TF1 builder
  (a Saver and its restore op);
- keras: a small Keras model (Dense layers) with a large constant in its call.
"""
import os
import sys

import numpy as np
import tensorflow as tf

out = sys.argv[1]
rng = np.random.default_rng(33)


def big(shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# TF2: constants inside functions called by the signatures.
class Model(tf.Module):
    def __init__(self):
        super().__init__()
        self.v = tf.Variable(big([4]), name="own_variable")
        self.table = tf.constant(big([512, 4]))  # captured eagerly: becomes a Const in graphs

    @tf.function
    def inner(self, x):
        w = tf.constant(big([4, 300]))
        return tf.matmul(x, w)

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def serve(self, x):
        y = self.inner(x)
        b = tf.constant(big([300]))
        return {"y": y + b, "z": x * self.v}

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def other(self, x):
        ints = tf.constant(np.arange(70000, dtype=np.int64))
        return {"s": tf.reduce_sum(self.inner(x)) + tf.cast(tf.reduce_sum(ints), tf.float32)}


m = Model()
tf.saved_model.save(
    m,
    os.path.join(out, "tf2_func_consts"),
    signatures={"serving_default": m.serve, "other": m.other},
)

# TF1: a frozen graph (constants only) and a graph with a variable, with the TF1 builder.
for name, with_var in (("tf1_frozen", False), ("tf1_vars", True)):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 8], name="x")
        w = tf.constant(big([8, 200]), name="w")
        h = tf.nn.relu(tf.matmul(x, w))
        w2 = tf.constant(big([200, 3]), name="dense/w2")
        y = tf.matmul(h, w2)
        if with_var:
            v = tf.compat.v1.get_variable(
                "v", initializer=big([3]), use_resource=True
            )
            y = y + v
        y = tf.identity(y, name="y")
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            b = tf.compat.v1.saved_model.Builder(os.path.join(out, name))
            sig = tf.compat.v1.saved_model.predict_signature_def({"x": x}, {"y": y})
            b.add_meta_graph_and_variables(
                sess, ["serve"], signature_def_map={"serving_default": sig}
            )
            b.save()

# Keras: Dense layers and a large constant in its call.
class Scale(tf.keras.layers.Layer):
    def call(self, x):
        return x * tf.constant(big([16]))[: 16] + tf.reduce_mean(tf.constant(big([400, 700])))


inp = tf.keras.Input([16])
h = tf.keras.layers.Dense(32, activation="relu")(inp)
h = Scale()(tf.keras.layers.Dense(16)(h))
keras_model = tf.keras.Model(inp, h)
# Keras 3 exports for serving with ExportArchive (model.export); tf.saved_model.save of a
# Keras 3 model does not serve in C++ (its variables are not restored by the graph).
keras_model.export(os.path.join(out, "keras"), verbose=False)
print("models written to", out)

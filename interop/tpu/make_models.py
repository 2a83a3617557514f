"""Saves the TensorFlow 2.21 models the TPU export is checked on (interop/tpu/check.sh).

    python make_models.py OUT_DIR

Writes OUT_DIR/<name>/ (a SavedModel) and OUT_DIR/<name>.json (how to call it: signature name,
inputs as nested lists with dtypes, and the function name(s) to pass to --function) for:

- keras:      a Keras 3 Sequential model exported with model.export (serving_default);
- aliases:    a tf.Module whose TPU function is named through SaveOptions.function_aliases;
- variables:  a tf.Module whose chosen function (by concrete name) reads tf.Variables (lifted
              to resource arguments);
- multi_sig:  a tf.Module with several signatures; one of them is chosen by signature name.

Every input has a leading batch dimension of None so the BatchFunction variant can batch it.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def write_spec(out, name, spec):
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(spec, f, indent=1)


def keras_model(out):
    import keras

    keras.utils.set_random_seed(7)
    model = keras.Sequential(
        [keras.Input(shape=(6,)), keras.layers.Dense(5, activation="relu"), keras.layers.Dense(3)]
    )
    model.export(os.path.join(out, "keras"), format="tf_saved_model", verbose=False)
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(2, 6)
    write_spec(out, "keras", {"signature": "serving_default", "function": "serving_default",
                              "inputs": {"keras_tensor": {"dtype": "float32", "value": x.tolist()}}})


class Aliased(tf.Module):
    def __init__(self):
        super().__init__()
        self.scale = tf.constant(np.arange(4, dtype=np.float32) + 0.5)

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def predict(self, x):
        return {"y": tf.nn.tanh(x * self.scale) + 1.0}

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def serve(self, x):
        out = self.predict(x)
        return {"y": out["y"] * 2.0, "n": tf.shape(x)[0]}


def aliases_model(out):
    m = Aliased()
    path = os.path.join(out, "aliases")
    options = tf.saved_model.SaveOptions(function_aliases={"tpu_predict": m.predict})
    tf.saved_model.save(m, path, signatures={"serving_default": m.serve}, options=options)
    x = np.array([[0.1, -0.2, 0.3, 0.4], [1.0, 2.0, -3.0, 0.5]], np.float32)
    write_spec(out, "aliases", {"signature": "serving_default", "function": "tpu_predict",
                                "inputs": {"x": {"dtype": "float32", "value": x.tolist()}}})


class WithVariables(tf.Module):
    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(3)
        self.w = tf.Variable(rng.standard_normal((5, 3)).astype(np.float32), name="w")
        self.b = tf.Variable(rng.standard_normal((3,)).astype(np.float32), name="b")

    @tf.function(input_signature=[tf.TensorSpec([None, 5], tf.float32)])
    def serve(self, x):
        return {"logits": tf.matmul(x, self.w) + self.b}


def variables_model(out):
    m = WithVariables()
    path = os.path.join(out, "variables")
    tf.saved_model.save(m, path, signatures={"serving_default": m.serve})
    x = np.arange(15, dtype=np.float32).reshape(3, 5) / 7.0
    # Chosen by concrete name: the function that reads the variables (ReadVariableOp on its
    # resource arguments), not the signature wrapper around it.
    concrete = reading_function(path)
    write_spec(out, "variables", {"signature": "serving_default", "function": concrete,
                                  "inputs": {"x": {"dtype": "float32", "value": x.tolist()}}})


def reading_function(path):
    """The saved function (not a signature wrapper) with a ReadVariableOp in its body."""
    from tensorflow.python.saved_model import loader_impl

    library = loader_impl.parse_saved_model(path).meta_graphs[0].graph_def.library
    names = [f.signature.name for f in library.function
             if "signature_wrapper" not in f.signature.name
             and any(n.op == "ReadVariableOp" for n in f.node_def)
             and "_traced_" not in f.signature.name]
    assert len(names) == 1, names
    return names[0]


class MultiSig(tf.Module):
    def __init__(self):
        super().__init__()
        self.v = tf.Variable([1.5, -2.0, 0.25], name="v")

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def score(self, x):
        return {"score": tf.reduce_sum(x * self.v, axis=1)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
    def double(self, n):
        return {"twice": n * 2}

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32),
                                  tf.TensorSpec([None], tf.int32)])
    def both(self, x, n):
        return {"s": tf.reduce_max(x, axis=1) + tf.cast(n, tf.float32)}


def multi_sig_model(out):
    m = MultiSig()
    path = os.path.join(out, "multi_sig")
    tf.saved_model.save(m, path, signatures={"score": m.score, "double": m.double, "both": m.both})
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    write_spec(out, "multi_sig", {"signature": "score", "function": "score",
                                  "inputs": {"x": {"dtype": "float32", "value": x.tolist()}}})


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    keras_model(out)
    aliases_model(out)
    variables_model(out)
    multi_sig_model(out)


if __name__ == "__main__":
    main()

"""TensorFlow's Python loaders on externalized models: for each pair ORIG EXT, every signature
run through `tf.saved_model.load` and through the TF1 loader (`tf.compat.v1.saved_model.load`
in a graph session) gives outputs bit for bit equal to the original's, on inputs filled as
serve_harness fills them (element i: (i % 7) * 0.5 - 1.25 for floats, i % 5 for integers;
unknown dimensions 2). With the TF1 loader, a TF1 model's Saver (its SaverDef, the save op a
TF1 program runs after loading) saves every tensor of the model's checkpoint, with its value:
a Saver saves every variable it restores.

usage: python loaders_check.py ORIG EXT [ORIG EXT ...]
Prints one PASS/FAIL line per model and loader; exits 1 if any failed.
"""
import os
import sys
import tempfile

import numpy as np
import tensorflow as tf


def fill(dtype, shape):
    """The input serve_harness feeds, or None for a dtype it does not fill (the signature is
    then skipped, as the harness skips it)."""
    if not (dtype.is_floating or dtype.is_integer):
        return None
    shape = [2 if d is None or d < 0 else d for d in shape]
    n = int(np.prod(shape)) if shape else 1
    i = np.arange(n)
    if dtype.is_floating:
        values = (i % 7) * 0.5 - 1.25
    else:
        values = i % 5
    return np.asarray(values, dtype=dtype.as_numpy_dtype).reshape(shape)


def tf2_outputs(path):
    loaded = tf.saved_model.load(path)
    out = {}
    for name in sorted(loaded.signatures):
        fn = loaded.signatures[name]
        kwargs = {
            k: fill(spec.dtype, spec.shape.as_list())
            for k, spec in fn.structured_input_signature[1].items()
        }
        if any(v is None for v in kwargs.values()):
            continue
        kwargs = {k: tf.constant(v) for k, v in kwargs.items()}
        for key, value in fn(**kwargs).items():
            out[f"{name}/{key}"] = value.numpy()
    return out


def saves_what_it_restores(sess, meta, path):
    """None, or why the SaverDef's save op of a TF1 model loaded in `sess` does not save every
    tensor of the checkpoint in `path` with its value (a TF2 model, with an object graph, is
    saved through it instead: not checked here)."""
    index = os.path.join(path, "variables", "variables.index")
    if meta.object_graph_def.nodes or not meta.HasField("saver_def") or not os.path.exists(index):
        return None
    saver = meta.saver_def
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "saved")
        sess.run(saver.save_tensor_name, {saver.filename_tensor_name: prefix})
        saved = tf.train.load_checkpoint(prefix)
        source = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
        for key in sorted(source.get_variable_to_shape_map()):
            if not saved.has_tensor(key):
                return f"the Saver's save op does not save {key}, which it restores"
            if np.asarray(source.get_tensor(key)).tobytes() != np.asarray(saved.get_tensor(key)).tobytes():
                return f"the Saver's save op saves {key} with another value than it restores"
    return None


def tf1_outputs(path):
    graph = tf.Graph()
    out = {}
    with tf.compat.v1.Session(graph=graph) as sess:
        meta = tf.compat.v1.saved_model.load(sess, ["serve"], path)
        for name in sorted(meta.signature_def):
            if name.startswith("__"):
                continue
            sig = meta.signature_def[name]
            feeds = {}
            for info in sig.inputs.values():
                dims = [d.size for d in info.tensor_shape.dim]
                feeds[info.name] = fill(tf.as_dtype(info.dtype), dims)
            if any(v is None for v in feeds.values()):
                continue
            keys = sorted(sig.outputs)
            values = sess.run([sig.outputs[k].name for k in keys], feeds)
            for key, value in zip(keys, values):
                out[f"{name}/{key}"] = value
        fault = saves_what_it_restores(sess, meta, path)
        if fault:
            raise AssertionError(fault)
    return out


def same(a, b):
    if sorted(a) != sorted(b):
        return f"outputs {sorted(a)} vs {sorted(b)}"
    for key in a:
        x, y = np.asarray(a[key]), np.asarray(b[key])
        if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
            return f"{key} differs"
    return None


failed = 0
args = sys.argv[1:]
for orig, ext in zip(args[::2], args[1::2]):
    for loader, run in (("tf.saved_model.load", tf2_outputs), ("TF1 loader", tf1_outputs)):
        try:
            fault = same(run(orig), run(ext))
        except Exception as e:  # noqa: BLE001 - reported, counted
            fault = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        if fault:
            failed += 1
            print(f"FAIL {ext} ({loader}): {fault}")
        else:
            print(f"PASS {ext} ({loader}): outputs bit for bit the original's")
sys.exit(1 if failed else 0)

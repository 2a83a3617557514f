"""Measures which TensorFlow loaders read which SavedModel format (the README's table): a model
as `saved_model.pb`, the same as `saved_model.cpb` (`unbound split`), and externalized
(`unbound externalize`), through TensorFlow's C++ LoadSavedModel (serve_harness, as
TensorFlow Serving loads), `tf.saved_model.load`, the TF1 loader and `saved_model_cli show`,
without and with `unbound.tensorflow.enable_image_format()`.

usage: python loader_table.py PB_DIR CPB_DIR EXT_DIR SERVE_HARNESS SAVED_MODEL_CLI
Prints a Markdown table; each cell is "yes" or "no (the error's first words)".
"""
import subprocess
import sys

import tensorflow as tf

pb, cpb, ext, harness, cli = sys.argv[1:6]
dirs = [("`.pb`", pb), ("`.cpb`", cpb), ("externalized `.pb`", ext)]


def attempt(fn):
    try:
        fn()
        return "yes"
    except Exception as e:  # noqa: BLE001 - the table reports it
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return f"no ({first[:60]})"


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        lines = [l for l in r.stderr.splitlines() if l.strip() and not l.startswith(("I0000", "W0000", "WARNING"))]
        raise RuntimeError(lines[-1] if lines else f"exit {r.returncode}")


def tf1(d):
    with tf.compat.v1.Session(graph=tf.Graph()) as sess:
        tf.compat.v1.saved_model.load(sess, ["serve"], d)


rows = {
    "C++ `LoadSavedModel` (TF Serving)": [attempt(lambda d=d: run([harness, d])) for _, d in dirs],
    "`saved_model_cli show --all`": [attempt(lambda d=d: run([cli, "show", "--dir", d, "--all"])) for _, d in dirs],
    "`tf.saved_model.load`": [attempt(lambda d=d: tf.saved_model.load(d)) for _, d in dirs],
    "TF1 loader (`tf.compat.v1.saved_model.load`)": [attempt(lambda d=d: tf1(d)) for _, d in dirs],
}
try:
    import unbound.tensorflow

    unbound.tensorflow.enable_image_format()
    rows["`tf.saved_model.load` + `unbound.tensorflow`"] = [
        attempt(lambda d=d: tf.saved_model.load(d)) for _, d in dirs
    ]
    rows["TF1 loader + `unbound.tensorflow`"] = [attempt(lambda d=d: tf1(d)) for _, d in dirs]
except ImportError:
    pass

print("| loader (TensorFlow 2.21) | " + " | ".join(name for name, _ in dirs) + " |")
print("|---|" + "---|" * len(dirs))
for loader, cells in rows.items():
    print(f"| {loader} | " + " | ".join(cells) + " |")

"""Shared helpers of the `test_tensorflow_*` tests: tiny TensorFlow-made models, TensorFlow's
C++ Merger (interop/merger_harness) and the release `unbound` binary."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def harness() -> str:
    """The merger harness binary (built by interop/build_harness.sh if needed)."""
    out = subprocess.run(
        ["bash", str(ROOT / "interop/build_harness.sh")], check=True, capture_output=True, text=True
    ).stdout.strip().splitlines()[-1]
    return out


def tf_merge(prefix: str, out: str):
    """The SavedModel TensorFlow's C++ Merger reads from PREFIX(.cpb|.pb)."""
    from tensorflow.core.protobuf import saved_model_pb2

    subprocess.run([harness(), "read", "--type", "tensorflow.SavedModel", prefix, out], check=True)
    message = saved_model_pb2.SavedModel()
    message.ParseFromString(Path(out).read_bytes())
    return message


def unbound_bin() -> str:
    """The release CLI; the test is skipped when it has not been built."""
    path = ROOT / "target/release/unbound"
    if not path.is_file():
        pytest.skip("target/release/unbound not built (cargo build --release -p unbound-cli)")
    return str(path)


_UID = re.compile(r"(__inference_[A-Za-z0-9_]*?_)\d+\b")
# String attributes holding a bare number are such unique numbers too (e.g. the id a
# traced function keeps of its save counterpart).
_NUMBER_STRING = re.compile(r'(\bs: )"\d+"')


def normalized(saved_model) -> str:
    """The model as text with what legitimately differs between two saves of one object taken
    out: the unique numbers TensorFlow appends to traced function names, and so the order of
    the library's functions (sorted by their normalized text)."""
    from google.protobuf import text_format
    from tensorflow.core.protobuf import saved_model_pb2

    copy = saved_model_pb2.SavedModel()
    copy.CopyFrom(saved_model)
    for meta in copy.meta_graphs:
        functions = sorted(
            meta.graph_def.library.function,
            key=lambda f: _NUMBER_STRING.sub(
                r'\1"N"', _UID.sub(r"\1N", text_format.MessageToString(f))
            ),
        )
        del meta.graph_def.library.function[:]
        meta.graph_def.library.function.extend(functions)
    return _NUMBER_STRING.sub(r'\1"N"', _UID.sub(r"\1N", text_format.MessageToString(copy)))


def make_module():
    """A tf.Module with a variable and two signatures."""
    import tensorflow as tf

    class Model(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(tf.reshape(tf.range(1600, dtype=tf.float32) / 800.0, [40, 40]))
            self.b = tf.Variable(tf.ones([40]))

        @tf.function(input_signature=[tf.TensorSpec([None, 40], tf.float32)])
        def project(self, x):
            return {"y": tf.matmul(x, self.w) + self.b}

        @tf.function(input_signature=[tf.TensorSpec([None, 40], tf.float32)])
        def score(self, x):
            table = tf.constant([float(i) for i in range(300)])
            return {"s": tf.reduce_sum(x * self.b, axis=1) + table[7]}

    model = Model()
    return model, {"project": model.project, "score": model.score}


def inputs():
    """A batch of test inputs."""
    import numpy as np

    return np.linspace(-1.0, 1.0, 80, dtype=np.float32).reshape(2, 40)


os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

"""The examples of python/examples/ for checkpoints and DTensor run and say what they should."""

import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "python", "examples")


def _run(name, *args):
    return subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, name), *args], check=True, capture_output=True, text=True
    ).stdout


def test_write_then_read_examples(tmp_path):
    prefix = str(tmp_path / "ckpt")
    out = _run("checkpoint_write.py", prefix)
    assert "dense/kernel float32 (4, 3)" in out
    listing = _run("checkpoint_read.py", prefix)
    assert "vocab\tstring\t[2]" in listing and "step\tint64\t[]" in listing
    one = _run("checkpoint_read.py", prefix, "dense/kernel")
    assert "(view: True)" in one
    box = _run("checkpoint_read.py", prefix, "dense/kernel", "4 3 1,2:-")
    assert "float32 (2, 3) (view: False)" in box
    tf = pytest.importorskip("tensorflow")
    assert sorted(tf.train.load_checkpoint(prefix).get_variable_to_shape_map()) == [
        "dense/bias", "dense/kernel", "step", "vocab"]


def test_dtensor_example():
    out = _run("dtensor_pack.py")
    assert "8 components of shape (4, 3)" in out
    assert "sharding_specs:x,y, mesh:|x=2,y=4|" in out
    assert "each holds (8, 3)" in out

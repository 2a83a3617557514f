"""The Splitter example in python/examples runs, and TensorFlow's Merger reads what it wrote."""

import subprocess
import sys

from _toolkit_support import MODELS, ROOT, tf_read


def test_splitter_custom_example(tmp_path):
    from tensorflow.core.framework import graph_pb2

    result = subprocess.run(
        [sys.executable, str(ROOT / "python" / "examples" / "splitter_custom.py"), str(MODELS / "frozen_graph.pb"), str(tmp_path / "g")],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"wrote {tmp_path / 'g.cpb'} (")
    assert "read back equal to the original: True" in result.stdout
    original = graph_pb2.GraphDef.FromString((MODELS / "frozen_graph.pb").read_bytes())
    assert graph_pb2.GraphDef.FromString(tf_read("tensorflow.GraphDef", tmp_path / "g", tmp_path / "tf.pb")) == original

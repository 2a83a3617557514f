"""`unbound.read_message`: TensorFlow's `Merger::Read` from Python, bytes or a message."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import unbound
from _toolkit_support import MODELS, ROOT, cli, tf_read

FROZEN = MODELS / "frozen_graph"


def test_pb_reads_back_its_bytes():
    data = unbound.read_message(FROZEN, "tensorflow.GraphDef", as_bytes=True)
    assert data == (MODELS / "frozen_graph.pb").read_bytes()


def test_cpb_reads_as_tensorflow_reads_it(tmp_path):
    cli("proto", "split", "--type", "tensorflow.GraphDef", MODELS / "frozen_graph.pb", tmp_path / "g",
        "--max-size", "1000")
    assert (tmp_path / "g.cpb").exists()
    ours = unbound.read_message(tmp_path / "g", "tensorflow.GraphDef", as_bytes=True)
    assert ours == tf_read("tensorflow.GraphDef", tmp_path / "g", tmp_path / "tf.pb")
    from tensorflow.core.protobuf import saved_model_pb2

    for name in ("tf1_large_consts", "tf2_multi_sig"):
        cli("split", MODELS / name, tmp_path / name, "--max-size", "2000")
        prefix = tmp_path / name / "saved_model"
        ours = unbound.read_message(prefix, "tensorflow.SavedModel", as_bytes=True)
        # TensorFlow serializes maps in its own order: compare the messages.
        tf = tf_read("tensorflow.SavedModel", prefix, tmp_path / f"{name}.tf.pb")
        assert saved_model_pb2.SavedModel.FromString(ours) == saved_model_pb2.SavedModel.FromString(tf)
        # A model mostly not in canonical form (tf2_multi_sig: TensorFlow's Python leaves out
        # map entries' default keys) is split from its canonical form, and reads back as
        # protobuf C++'s deterministic serialization of the original; a model mostly
        # canonical (tf1_large_consts) is split as it is, and reads back as its own bytes.
        if name == "tf2_multi_sig":
            original = tf_read("tensorflow.SavedModel", MODELS / name / "saved_model",
                               tmp_path / f"{name}.orig.pb")
            assert ours == original
        else:
            assert ours == (MODELS / name / "saved_model.pb").read_bytes()


def run_python(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_bytes_without_tensorflow_and_never_imports_it():
    out = run_python(f"""
        import sys, unbound
        r = unbound.read_message({str(FROZEN)!r}, "tensorflow.GraphDef")
        print(type(r).__name__, 'tensorflow' in sys.modules)
    """)
    assert out.split() == ["bytes", "False"]


def test_a_message_once_tensorflow_is_imported():
    out = run_python(f"""
        import tensorflow as tf, unbound
        from tensorflow.core.framework import graph_pb2
        r = unbound.read_message({str(FROZEN)!r}, "tensorflow.GraphDef")
        assert isinstance(r, graph_pb2.GraphDef), type(r)
        expected = graph_pb2.GraphDef.FromString(open({str(MODELS / 'frozen_graph.pb')!r}, 'rb').read())
        print(r == expected, len(r.node))
        print(type(unbound.read_message({str(FROZEN)!r}, "tensorflow.GraphDef", as_bytes=True)).__name__)
    """)
    lines = out.split("\n")
    assert lines[0].split()[0] == "True" and int(lines[0].split()[1]) > 0
    assert lines[1] == "bytes"


def _mem_available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


@pytest.mark.skipif(_mem_available() < 8 << 30, reason="needs 8 GiB of free memory")
def test_past_two_gib_is_too_large():
    # Two chunks of a GraphDef, each one node named by 1.1 GiB of zeros, merged into one
    # GraphDef (empty field tags append): the result passes 2 GiB - 1, which Python's protobuf
    # cannot parse. The chunk is shared, not copied, on its way to Rust, and refused by size
    # before anything is serialized.
    from tensorflow.core.framework import graph_pb2

    from unbound._splitter import chunked_message_class

    cm = chunked_message_class()()
    for chunk in (0, 1):
        cm.chunked_fields.add().message.chunk_index = chunk
    node = b"\x0a" + _varint(1100 << 20) + bytes(1100 << 20)
    graph = b"\x0a" + _varint(len(node)) + node
    del node
    with pytest.raises(unbound.TooLargeError, match="2147483647"):
        unbound.Merger.merge([graph, graph], cm, graph_pb2.GraphDef())


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@pytest.mark.skipif(
    os.environ.get("UNBOUND_HUGE") != "1",
    reason="builds a 2.1 GiB model: set UNBOUND_HUGE=1 (interop/python_splitter_check.sh does)",
)
def test_a_cpb_past_two_gib_is_too_large_to_read(tmp_path):
    # A SavedModel of 2.11 GiB (18 constants of 120 MiB) in a .cpb, as TensorFlow would split
    # it: its metadata and size are read, its bytes never handed to Python. The constants are
    # one repeated byte, so the .cpb is 75 KB on disk: the test needs 2.3 GB of memory to build
    # the model, not 2.3 GB of free disk (a CI machine once lacked it).
    subprocess.run(
        ["cargo", "build", "--quiet", "--release", "-p", "unbound-savedmodel", "--example", "make_huge_model"],
        cwd=ROOT, check=True,
    )
    out = tmp_path / "huge"
    made = subprocess.run(
        [str(ROOT / "target/release/examples/make_huge_model"), str(out),
         "--consts", "18", "--mib", "120", "--fill", "0"],
        capture_output=True, text=True,
    )
    assert made.returncode == 0, f"make_huge_model failed: {made.stderr}"
    try:
        with pytest.raises(unbound.TooLargeError, match="2264930136 bytes"):
            unbound.read_message(out / "saved_model", "tensorflow.SavedModel")
        with pytest.raises(unbound.TooLargeError, match="2264930136 bytes"):
            unbound.read_message(out / "saved_model", "tensorflow.SavedModel", as_bytes=True)
        assert len(unbound.inspect(out / "saved_model.cpb").chunks) == 3
        with pytest.raises(unbound.TooLargeError, match="huge"):
            unbound.merge(out, tmp_path / "merged")
        assert not (tmp_path / "merged").exists()
    finally:
        shutil.rmtree(out, ignore_errors=True)

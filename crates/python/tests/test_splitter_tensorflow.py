"""`unbound.Splitter` / `unbound.Merger` against TensorFlow: every `.cpb` the Splitter writes is
read by TensorFlow's C++ Merger (interop/merger_harness) into the message split, and
`Merger.read` of `.cpb` files equals what TensorFlow's Merger reads. Messages are TensorFlow's
own generated classes."""

from __future__ import annotations

import pytest

import unbound
from _toolkit_support import MODELS, SAVED_MODELS, cli, tf_read


def graph_def():
    from tensorflow.core.framework import graph_pb2

    return graph_pb2.GraphDef.FromString((MODELS / "frozen_graph.pb").read_bytes())


def saved_model(name):
    from tensorflow.core.protobuf import saved_model_pb2

    return saved_model_pb2.SavedModel.FromString((MODELS / name / "saved_model.pb").read_bytes())


@pytest.mark.parametrize("max_size", [1000, 2000, unbound.DEFAULT_MAX_SIZE])
def test_graph_def_split_is_read_by_tensorflow(tmp_path, max_size):
    from tensorflow.core.framework import graph_pb2

    message = graph_def()
    before = message.SerializeToString(deterministic=True)
    path = unbound.Splitter(message, max_size=max_size).write(tmp_path / "g")
    ext = ".pb" if max_size >= len(before) else ".cpb"
    assert path == str(tmp_path / f"g{ext}")
    assert message.SerializeToString(deterministic=True) == before  # the default leaves it as it was
    assert graph_pb2.GraphDef.FromString(tf_read("tensorflow.GraphDef", tmp_path / "g", tmp_path / "tf.pb")) == message
    back = graph_pb2.GraphDef()
    unbound.Merger.read(tmp_path / "g", back)
    assert back == message
    # The default algorithm is `unbound proto split`'s, byte for byte.
    (tmp_path / "in.pb").write_bytes(before)
    cli("proto", "split", "--type", "tensorflow.GraphDef", tmp_path / "in.pb", tmp_path / "c", "--max-size", max_size)
    assert (tmp_path / f"c{ext}").read_bytes() == (tmp_path / f"g{ext}").read_bytes()


@pytest.mark.parametrize("name", SAVED_MODELS)
@pytest.mark.parametrize("max_size", [2000, 20000])
def test_saved_model_split_is_read_by_tensorflow(tmp_path, name, max_size):
    from tensorflow.core.protobuf import saved_model_pb2

    message = saved_model(name)
    splitter = unbound.Splitter(message, max_size=max_size, compression="brotli")
    chunks, chunked_message = splitter.split()
    assert len(chunks) > 2 and all(isinstance(c, bytes) for c in chunks)
    assert type(chunked_message).__name__ == "ChunkedMessage" and chunked_message.chunk_index == 0
    assert splitter.write(tmp_path / "m").endswith(".cpb")
    tf = saved_model_pb2.SavedModel.FromString(tf_read("tensorflow.SavedModel", tmp_path / "m", tmp_path / "tf.pb"))
    assert tf == message
    merged = saved_model_pb2.SavedModel()
    unbound.Merger.merge(chunks, chunked_message, merged)
    assert merged == message
    (tmp_path / "in.pb").write_bytes(message.SerializeToString(deterministic=True))
    cli("proto", "split", "--type", "tensorflow.SavedModel", tmp_path / "in.pb", tmp_path / "c",
        "--max-size", max_size, "--compression", "brotli")
    assert (tmp_path / "c.cpb").read_bytes() == (tmp_path / "m.cpb").read_bytes()


def test_generic_type_split_is_read_by_tensorflow(tmp_path):
    # A type with no splitter of its own: unbound's generic size-driven algorithm.
    from tensorflow.core.protobuf import meta_graph_pb2

    message = saved_model("tf2_multi_sig").meta_graphs[0]
    assert isinstance(message, meta_graph_pb2.MetaGraphDef)
    path = unbound.Splitter(message, max_size=3000).write(tmp_path / "mg")
    assert path.endswith(".cpb")
    assert len(unbound.inspect(path).chunks) > 3
    tf = meta_graph_pb2.MetaGraphDef.FromString(
        tf_read("tensorflow.MetaGraphDef", tmp_path / "mg", tmp_path / "tf.pb")
    )
    assert tf == message
    back = meta_graph_pb2.MetaGraphDef()
    unbound.Merger.read(tmp_path / "mg", back)
    assert back == message


@pytest.mark.parametrize("name", SAVED_MODELS)
def test_merger_read_of_cli_cpb_equals_tensorflow(tmp_path, name):
    from tensorflow.core.protobuf import saved_model_pb2

    for max_size in (800, 5000):
        out = tmp_path / f"{name}.{max_size}"
        cli("split", MODELS / name, out, "--max-size", max_size)
        ours = saved_model_pb2.SavedModel()
        unbound.Merger.read(out / "saved_model", ours)
        tf = saved_model_pb2.SavedModel.FromString(
            tf_read("tensorflow.SavedModel", out / "saved_model", tmp_path / "tf.pb")
        )
        assert ours == tf


def test_serialized_input(tmp_path):
    from tensorflow.core.framework import graph_pb2

    data = graph_def().SerializeToString(deterministic=True)
    path = unbound.Splitter((data, "tensorflow.GraphDef"), max_size=1000).write(tmp_path / "g")
    assert graph_pb2.GraphDef.FromString(tf_read("tensorflow.GraphDef", tmp_path / "g", tmp_path / "tf.pb")) == graph_def()
    assert path.endswith(".cpb")

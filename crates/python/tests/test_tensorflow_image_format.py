"""`unbound.tensorflow` with TensorFlow-made models: the image format in open-source
TensorFlow, checked against TensorFlow's own code (its C++ Merger, loaders, fingerprint)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import unbound
import unbound.tensorflow as ut
from unbound import _unbound
from unbound._parts import message_parts

from tf_helpers import ROOT, inputs, make_module, normalized, tf_merge, unbound_bin

tf = pytest.importorskip("tensorflow")

SMALL = 2000  # a maximum chunk size that splits these tiny models into many chunks


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """One model saved as .pb (plain TensorFlow) and as .cpb (enable_image_format)."""
    base = tmp_path_factory.mktemp("tf")
    model, signatures = make_module()
    tf.saved_model.save(model, str(base / "pb"), signatures=signatures)
    ut.set_max_size(SMALL)
    ut.enable_image_format()
    try:
        options = tf.saved_model.SaveOptions(experimental_image_format=True)
        tf.saved_model.save(model, str(base / "cpb"), signatures=signatures, options=options)
    finally:
        ut.disable_image_format()
        ut.set_max_size(None)
    return model, signatures, base


def test_parts_assemble_to_the_whole_deterministic_serialization(saved):
    _, _, base = saved
    model = ut.read_saved_model(base / "pb")
    whole = model.SerializeToString(deterministic=True)
    for limit in (50, 300, 2000, 1 << 30):
        parts = message_parts(model, limit)
        assert isinstance(parts, bytes) == (limit >= len(whole))
        assert _unbound._tf_assembled_bytes(parts) == whole


@pytest.mark.parametrize("step_limit", [1, 64, 1000, 10_000])
def test_merge_steps_rebuild_the_message(saved, step_limit):
    from tensorflow.core.protobuf import saved_model_pb2

    from unbound._parts import apply_steps

    _, _, base = saved
    for model_dir in ("pb", "cpb"):
        steps, path = _unbound._tf_read(str(base / model_dir), step_limit)
        count = len(steps)
        rebuilt = apply_steps(saved_model_pb2.SavedModel(), steps)
        assert rebuilt == ut.read_saved_model(base / model_dir)
        assert (count > 1) == (step_limit < rebuilt.ByteSize())


def test_image_format_save_writes_a_cpb_tensorflow_merges(saved, tmp_path):
    _, _, base = saved
    assert sorted(os.listdir(base / "cpb")) == ["assets", "fingerprint.pb", "saved_model.cpb", "variables"]
    by_tf = tf_merge(str(base / "cpb/saved_model"), str(tmp_path / "tf.pb"))
    ours = ut.read_saved_model(base / "cpb")
    assert ours == by_tf
    # What TensorFlow writes as .pb for the same object, up to function UIDs.
    plain = tf_merge(str(base / "pb/saved_model"), str(tmp_path / "plain.pb"))
    assert normalized(by_tf) == normalized(plain)


def test_tf2_loader_reads_the_cpb_and_signatures_give_the_outputs(saved):
    model, signatures, base = saved
    x = inputs()
    ut.enable_image_format()
    try:
        loaded = tf.saved_model.load(str(base / "cpb"))
    finally:
        ut.disable_image_format()
    for name, fn in signatures.items():
        want = fn(tf.constant(x))
        got = loaded.signatures[name](x=tf.constant(x))
        for key in want:
            np.testing.assert_array_equal(got[key].numpy(), want[key].numpy())


def test_tf1_loader_reads_the_cpb(saved):
    _, signatures, base = saved
    x = inputs()
    wants = {name: fn(tf.constant(x)) for name, fn in signatures.items()}
    ut.enable_image_format()
    try:
        with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
            meta = tf.compat.v1.saved_model.load(sess, ["serve"], str(base / "cpb"))
            for name, want in wants.items():
                sig = meta.signature_def[name]
                feed = {sig.inputs["x"].name: x}
                fetch = {k: v.name for k, v in sig.outputs.items()}
                got = sess.run(fetch, feed)
                for key in want:
                    np.testing.assert_array_equal(got[key], want[key].numpy())
    finally:
        ut.disable_image_format()


def test_fingerprint_is_tensorflows(saved):
    from tensorflow.core.protobuf import fingerprint_pb2
    from tensorflow.python.saved_model.pywrap_saved_model import fingerprinting

    _, _, base = saved
    fields = ["saved_model_checksum", "graph_def_program_hash", "signature_def_hash",
              "saved_object_graph_hash", "checkpoint_hash"]

    def parse(data):
        message = fingerprint_pb2.FingerprintDef()
        message.ParseFromString(data)
        return message

    written = parse((base / "cpb/fingerprint.pb").read_bytes())
    computed = parse(fingerprinting.CreateFingerprintDef(str(base / "cpb")))
    for field in fields:
        assert getattr(written, field) == getattr(computed, field), field
    assert written.version.producer == computed.version.producer == 2  # TensorFlow's .cpb path
    # TensorFlow's definition hashes a .cpb differently from a .pb (producer 2, no
    # regularization); only the checkpoint hash must agree with the .pb save's.
    plain = parse((base / "pb/fingerprint.pb").read_bytes())
    assert written.checkpoint_hash == plain.checkpoint_hash != 0


@pytest.mark.parametrize("max_size", [300, SMALL, 8000])
def test_cpb_equals_unbound_split_chunk_for_chunk(saved, tmp_path, max_size):
    _, _, base = saved
    cli = unbound_bin()
    out = tmp_path / "split"
    subprocess.run([cli, "split", str(base / "pb"), str(out), "--max-size", str(max_size)],
                   check=True, capture_output=True)
    model = ut.read_saved_model(base / "pb")
    written = ut.SavedModelSplitter(model, max_size=max_size).write(str(tmp_path / "ours"))
    assert written.endswith(".cpb")
    # Same splitter, same records, same compression: the very same file.
    assert Path(written).read_bytes() == (out / "saved_model.cpb").read_bytes()
    chunks, chunked = ut.SavedModelSplitter(model, max_size=max_size).split()
    report = json.loads(subprocess.run([cli, "inspect", "--json", written], check=True,
                                       capture_output=True, text=True).stdout)
    assert [c["size"] for c in report["chunks"]] == [len(c) for c in chunks]
    assert len(chunked.chunked_fields) > 0
    assert tf_merge(str(tmp_path / "ours"), str(tmp_path / "m.pb")) == model


def test_saved_cpb_is_what_unbound_split_writes_for_it(saved, tmp_path):
    _, _, base = saved
    out = tmp_path / "again"
    subprocess.run([unbound_bin(), "split", str(base / "cpb"), str(out), "--max-size", str(SMALL)],
                   check=True, capture_output=True)
    assert (out / "saved_model.cpb").read_bytes() == (base / "cpb/saved_model.cpb").read_bytes()


def test_below_max_size_writes_a_plain_pb(saved, tmp_path):
    _, _, base = saved
    model = ut.read_saved_model(base / "pb")
    written = ut.SavedModelSplitter(model).write(str(tmp_path / "whole"))
    assert written.endswith("whole.pb")
    assert Path(written).read_bytes() == model.SerializeToString(deterministic=True)


def test_keras_model(tmp_path):
    keras = tf.keras
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(4, activation="relu"),
                              keras.layers.Dense(2)])
    x = np.arange(18, dtype=np.float32).reshape(3, 6) / 10.0
    want = model(x).numpy()
    export = tmp_path / "keras"
    ut.set_max_size(1000)
    try:
        ut.save(model, export)
    finally:
        ut.set_max_size(None)
    assert (export / "saved_model.cpb").is_file() and not (export / "saved_model.pb").exists()
    loaded = ut.load(export)
    got = loaded.signatures["serving_default"](tf.constant(x))
    np.testing.assert_allclose(next(iter(got.values())).numpy(), want, rtol=1e-6)


def test_explicit_save_and_load_leave_tensorflow_unpatched(tmp_path):
    from tensorflow.python.saved_model import loader_impl, save_options

    model, signatures = make_module()
    original = loader_impl.parse_saved_model
    ut.set_max_size(SMALL)
    try:
        ut.save(model, tmp_path / "m", signatures=signatures)
    finally:
        ut.set_max_size(None)
    assert not ut.image_format_enabled()
    assert save_options.is_oss is True and loader_impl.parse_saved_model is original
    with pytest.raises(ValueError, match="disabled in OSS"):
        tf.saved_model.SaveOptions(experimental_image_format=True)
    with pytest.raises(OSError):  # plain TensorFlow cannot read a .cpb directory
        tf.saved_model.load(str(tmp_path / "m"))
    loaded = ut.load(tmp_path / "m")
    x = tf.constant(inputs())
    np.testing.assert_array_equal(loaded.signatures["project"](x=x)["y"].numpy(),
                                  model.project(x)["y"].numpy())


def test_enable_is_idempotent_and_disable_undoes_it():
    from tensorflow.python.saved_model import loader_impl, save, save_options

    original = loader_impl.parse_saved_model
    ut.enable_image_format()
    ut.enable_image_format()
    assert save_options.is_oss is False and hasattr(save, "proto_splitter")
    ut.disable_image_format()
    ut.disable_image_format()
    assert save_options.is_oss is True and not hasattr(save, "proto_splitter")
    assert loader_impl.parse_saved_model is original


def test_a_tensorflow_without_a_hook_is_refused(monkeypatch):
    from tensorflow.python.saved_model import save_options

    monkeypatch.delattr(save_options, "is_oss")
    with pytest.raises(unbound.TensorFlowVersionError, match="is_oss"):
        ut.enable_image_format()
    assert not ut.image_format_enabled()


def test_bad_input_names_the_fault(tmp_path):
    (tmp_path / "saved_model.cpb").write_bytes(b"not a riegeli file")
    with pytest.raises(unbound.FormatError, match="saved_model.cpb"):
        ut.read_saved_model(tmp_path)
    with pytest.raises(unbound.NotFoundError):
        ut.read_saved_model(tmp_path / "missing")
    with pytest.raises(unbound.InvalidArgumentError):
        _unbound._tf_assembled_bytes((b"", [(999, [b""])]))


def test_example_runs(tmp_path):
    script = ROOT / "python/examples/tensorflow_save_load.py"
    result = subprocess.run([sys.executable, str(script), str(tmp_path / "out")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "outputs equal: True" in result.stdout

"""Bad input raises the right `unbound.Error` subclass, naming the file and the fault."""

from __future__ import annotations

import shutil

import pytest

import unbound
from _toolkit_support import MODELS, cli


def test_missing_directory_is_not_found(tmp_path):
    missing = tmp_path / "nowhere"
    for call in (unbound.show, unbound.verify, unbound.fingerprint):
        if call is unbound.verify:
            assert not call(missing).ok
            continue
        with pytest.raises(unbound.NotFoundError, match="nowhere"):
            call(missing)
    with pytest.raises(unbound.NotFoundError, match="nowhere"):
        unbound.split(missing, tmp_path / "out")
    with pytest.raises(FileNotFoundError):
        unbound.merge(missing, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_damaged_model_is_a_format_error(tmp_path):
    model = tmp_path / "model"
    shutil.copytree(MODELS / "tf2_multi_sig", model)
    (model / "saved_model.pb").write_bytes(b"\x0a\xff\xff\xff\xff\x0f garbage")
    with pytest.raises(unbound.FormatError, match="saved_model.pb"):
        unbound.show(model)
    with pytest.raises(unbound.FormatError, match="saved_model.pb"):
        unbound.split(model, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_damaged_cpb_is_a_format_error(tmp_path):
    out = tmp_path / "split"
    cli("split", MODELS / "tf1_large_consts", out, "--max-size", "5000")
    cpb = out / "saved_model.cpb"
    cpb.write_bytes(cpb.read_bytes()[:100])
    with pytest.raises(unbound.FormatError, match="saved_model.cpb"):
        unbound.inspect(cpb)
    with pytest.raises(unbound.FormatError, match="saved_model.cpb"):
        unbound.read_message(out / "saved_model", "tensorflow.SavedModel")


def test_existing_output_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(unbound.OutputExistsError, match="out"):
        unbound.split(MODELS / "tf1_large_consts", out)
    with pytest.raises(FileExistsError):
        unbound.merge(MODELS / "tf1_large_consts", out)
    assert list(out.iterdir()) == []


def test_bad_arguments(tmp_path):
    with pytest.raises(unbound.InvalidArgumentError, match="compression"):
        unbound.split(MODELS / "tf1_large_consts", tmp_path / "a", compression="lzma")
    with pytest.raises(unbound.InvalidArgumentError, match="max_size"):
        unbound.split(MODELS / "tf1_large_consts", tmp_path / "b", max_size=0)
    with pytest.raises(unbound.InvalidArgumentError, match="tensorflow.NoSuchType"):
        unbound.read_message(MODELS / "frozen_graph", "tensorflow.NoSuchType")
    with pytest.raises(unbound.NotFoundError, match="absent"):
        unbound.read_message(tmp_path / "absent", "tensorflow.GraphDef")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()

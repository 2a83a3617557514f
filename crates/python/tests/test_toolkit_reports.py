"""The toolkit's reports equal what the CLI prints for the same input (``--json`` where the
command has it, the text lines otherwise), on the bundled TensorFlow-made models."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
from pathlib import Path

import pytest

import unbound
from _toolkit_support import MODELS, SAVED_MODELS, cli, cli_json, tf_read


@pytest.fixture(scope="module")
def split_dirs(tmp_path_factory):
    """Each bundled SavedModel split by the CLI small enough to make many chunks."""
    base = tmp_path_factory.mktemp("split")
    dirs = {}
    for name in SAVED_MODELS:
        out = base / name
        cli("split", MODELS / name, out, "--max-size", "2000")
        dirs[name] = out
    return dirs


@pytest.mark.parametrize("name", SAVED_MODELS)
def test_show_equals_cli_json(name, split_dirs):
    for model in (MODELS / name, split_dirs[name]):
        report = unbound.show(model)
        assert isinstance(report, unbound.SavedModelInfo)
        assert report.to_dict() == cli_json("show", model)


def test_show_reads_as_attributes():
    report = unbound.show(MODELS / "tf2_multi_sig")
    data = report.to_dict()
    assert report.format == data["format"] == "pb"
    assert report.model_file_bytes == data["model_file_bytes"] > 0
    assert report.chunks is None
    assert isinstance(report.meta_graphs[0], unbound.Report)
    assert report.meta_graphs[0].tags == data["meta_graphs"][0]["tags"]
    assert report.checkpoint.prefix == report["checkpoint"]["prefix"]
    assert report.meta_graphs[0].to_dict() == data["meta_graphs"][0]
    assert repr(report).startswith("SavedModelInfo({'dir': ")
    report.to_dict()["mutated"] = 1
    assert "mutated" not in report
    with pytest.raises(AttributeError, match="no field 'no_such_field'"):
        report.no_such_field
    with pytest.raises(AttributeError):
        report.format = "cpb"


@pytest.mark.parametrize("name", SAVED_MODELS)
def test_inspect_equals_cli_json(name, split_dirs):
    cpb = split_dirs[name] / "saved_model.cpb"
    report = unbound.inspect(cpb)
    assert report.to_dict() == cli_json("inspect", cpb)
    assert report.faults == []
    assert len(report.chunks) > 2
    assert report.chunks[0].index == 0


@pytest.mark.parametrize("name", SAVED_MODELS)
def test_fingerprint_equals_cli_json(name, split_dirs):
    for model in (MODELS / name, split_dirs[name]):
        report = unbound.fingerprint(model)
        expected = cli_json("fingerprint", model)
        got = report.to_dict()
        # uuid is random on every call, in TensorFlow and in unbound.
        assert isinstance(got.pop("uuid"), str) and isinstance(expected.pop("uuid"), str)
        assert got == expected
        text = cli("fingerprint", model).stdout
        assert f"singleprint: {report.singleprint}\n" in text
        assert f"model: {report.model_file}\n" in text


def test_fingerprint_warns_of_an_unreadable_index(tmp_path):
    """checkpoint_hash is 0 for an index that cannot be read, as in TensorFlow, which warns:
    so does unbound, naming the file (the CLI on stderr, Python as a UserWarning)."""
    model = tmp_path / "model"
    shutil.copytree(MODELS / "tf2_multi_sig", model)
    index = model / "variables" / "variables.index"
    index.unlink()
    os.mkfifo(index)
    with pytest.warns(UserWarning, match="variables.index: not a regular file"):
        report = unbound.fingerprint(model)
    assert report.to_dict()["checkpoint_hash"] == 0


@pytest.mark.parametrize("name", SAVED_MODELS)
def test_verify_equals_cli(name, split_dirs):
    for model in (MODELS / name, split_dirs[name]):
        report = unbound.verify(model)
        assert report.ok
        assert cli("verify", model).stdout == f"OK: {model}: {'; '.join(report.checked)}\n"


def test_verify_lists_the_faults_the_cli_prints(tmp_path, split_dirs):
    damaged = tmp_path / "damaged"
    cli("split", MODELS / "tf2_multi_sig", damaged, "--max-size", "2000", "--compression", "none")
    cpb = damaged / "saved_model.cpb"
    data = bytearray(cpb.read_bytes())
    data[len(data) // 2] ^= 0xFF
    cpb.write_bytes(bytes(data))
    report = unbound.verify(damaged)
    assert not report.ok
    result = cli("verify", damaged, check=False)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [f"{f.file}: {f.fault}" for f in report.faults]


@pytest.mark.parametrize("name", SAVED_MODELS)
@pytest.mark.parametrize("max_size", [None, 5000])
def test_split_writes_what_the_cli_writes(tmp_path, name, max_size):
    ours, theirs = tmp_path / "py", tmp_path / "cli"
    if max_size is None:  # the defaults are the CLI's
        report = unbound.split(MODELS / name, ours)
        cli("split", MODELS / name, theirs)
    else:
        report = unbound.split(MODELS / name, ours, max_size=max_size, compression="brotli")
        cli("split", MODELS / name, theirs, "--max-size", max_size, "--compression", "brotli")
    assert isinstance(report, unbound.SplitReport)
    model_file = "saved_model.cpb" if report.chunked else "saved_model.pb"
    assert Path(report.path) == ours / model_file
    assert filecmp.cmp(ours / model_file, theirs / model_file, shallow=False)
    if report.chunked:
        text = (
            f"wrote {ours / model_file} ({report.chunks} chunks, {report.model_bytes} bytes of "
            f"model data) and {report.copied_files} other files\n"
        )
    else:
        text = (
            f"wrote {ours / model_file} ({report.data_bytes} bytes; nothing needed splitting) "
            f"and {report.copied_files} other files\n"
        )
    assert cli("split", MODELS / name, tmp_path / "again", *(
        ["--max-size", max_size, "--compression", "brotli"] if max_size else []
    )).stdout == text.replace(str(ours), str(tmp_path / "again"))
    assert unbound.verify(ours).ok


@pytest.mark.parametrize("name", SAVED_MODELS)
def test_merge_writes_what_the_cli_writes(tmp_path, name, split_dirs):
    ours, theirs = tmp_path / "py", tmp_path / "cli"
    report = unbound.merge(split_dirs[name], ours)
    stdout = cli("merge", split_dirs[name], theirs).stdout
    assert filecmp.cmp(ours / "saved_model.pb", theirs / "saved_model.pb", shallow=False)
    # What TensorFlow's Merger writes for the split (its deterministic serialization): the
    # canonical form, which the original (written by TensorFlow's Python) need not be in.
    tf = tf_read("tensorflow.SavedModel", split_dirs[name] / "saved_model", tmp_path / "tf.pb")
    assert (ours / "saved_model.pb").read_bytes() == tf
    assert stdout == (
        f"wrote {theirs / 'saved_model.pb'} ({report.model_bytes} bytes) and "
        f"{report.copied_files} other files\n"
    )
    assert report.path == str(ours / "saved_model.pb")


def test_reports_to_json_round_trip():
    report = unbound.show(MODELS / "tf1_large_consts")
    assert json.loads(report.to_json()) == report.to_dict()


def test_reports_copy_and_pickle():
    import copy
    import pickle

    report = unbound.fingerprint(MODELS / "tf2_multi_sig")
    for other in (copy.copy(report), copy.deepcopy(report), pickle.loads(pickle.dumps(report))):
        assert other == report and other.model_file == report.model_file
        assert other.singleprint == report.singleprint

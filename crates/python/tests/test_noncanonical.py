"""Issue 29: the package's writers on non-canonical SavedModels (TensorFlow-made models
rewritten by crates/savedmodel/examples/scramble_model.rs: fields out of order, map entries
without default keys, unknown fields at every depth, split messages, empty and wrong-wire-type
fields, padded varints). The ``fingerprint.pb`` that ``unbound.split`` and ``unbound.merge``
write must be what TensorFlow's ``CreateFingerprintDef`` computes for the directory written,
and ``unbound.tensorflow.read_saved_model`` must read what TensorFlow's Python protobuf reads.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import List

import pytest

import unbound
import unbound.tensorflow as ut

from _toolkit_support import MODELS, ROOT, SAVED_MODELS

tf = pytest.importorskip("tensorflow")

CLASSES = ["reorder", "defaults", "unknown", "split", "empty", "wrongtype", "varint", "all"]
FIELDS = ["saved_model_checksum", "graph_def_program_hash", "signature_def_hash",
          "saved_object_graph_hash", "checkpoint_hash"]
SMALL = 2000  # a maximum chunk size that splits these models into many chunks


@pytest.fixture(scope="session")
def scramble_bin() -> Path:
    """The release ``scramble_model`` example, built on first use (``UNBOUND_SCRAMBLE_MODEL``
    names a built one instead)."""
    if "UNBOUND_SCRAMBLE_MODEL" in os.environ:
        return Path(os.environ["UNBOUND_SCRAMBLE_MODEL"])
    subprocess.run(
        ["cargo", "build", "--quiet", "--release", "-p", "unbound-savedmodel", "--example",
         "scramble_model"],
        cwd=ROOT,
        check=True,
    )
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "release" / "examples" / "scramble_model"


def scrambled(scramble_bin: Path, out: Path, model: str, classes: str, *extra: str) -> Path:
    """``model`` scrambled with ``classes`` (seed 1) into ``out``."""
    subprocess.run(
        [str(scramble_bin), str(MODELS / model), str(out), "--classes", classes, "--seed", "1",
         *extra],
        check=True,
        capture_output=True,
    )
    return out


def fingerprint_faults(out: Path) -> List[str]:
    """How ``out/fingerprint.pb`` differs from TensorFlow's ``CreateFingerprintDef(out)``."""
    from tensorflow.core.protobuf import fingerprint_pb2
    from tensorflow.python.saved_model.pywrap_saved_model import fingerprinting

    def parse(data: bytes):
        message = fingerprint_pb2.FingerprintDef()
        message.ParseFromString(data)
        return message

    if not (out / "fingerprint.pb").exists():
        return [f"{out.name}: no fingerprint.pb"]
    written = parse((out / "fingerprint.pb").read_bytes())
    computed = parse(fingerprinting.CreateFingerprintDef(str(out)))
    faults = [f"{out.name}: {f} {getattr(written, f)} != TensorFlow's {getattr(computed, f)}"
              for f in FIELDS if getattr(written, f) != getattr(computed, f)]
    if written.version.producer != computed.version.producer:
        faults.append(f"{out.name}: producer {written.version.producer} != TensorFlow's "
                      f"{computed.version.producer}")
    return faults


def writers_faults(src: Path, tmp_path: Path) -> List[str]:
    """Runs every writer on ``src``: ``split`` (small chunks, and the default), ``merge`` of the
    small split and of ``src`` itself; what each wrote that TensorFlow disagrees with, or how
    it failed."""
    faults: List[str] = []
    runs = [
        ("split_small", lambda out: unbound.split(src, out, max_size=SMALL)),
        ("split", lambda out: unbound.split(src, out)),
        ("merged_small", lambda out: unbound.merge(tmp_path / "split_small", out)),
        ("merged", lambda out: unbound.merge(src, out)),
    ]
    for name, write in runs:
        out = tmp_path / name
        try:
            write(out)
        except unbound.Error as e:
            faults.append(f"{name}: {type(e).__name__}: {e}")
            continue
        faults += fingerprint_faults(out)
        report = unbound.verify(out)
        if not report.ok:
            faults.append(f"{name}: verify: {report.faults}")
    return faults


@pytest.mark.parametrize("classes", CLASSES)
@pytest.mark.parametrize("model", SAVED_MODELS)
def test_writers_fingerprint_noncanonical_models_as_tensorflow(scramble_bin, tmp_path, model,
                                                               classes):
    src = scrambled(scramble_bin, tmp_path / "src", model, classes)
    faults = writers_faults(src, tmp_path)
    assert not faults, "\n".join(faults)


def test_writers_fingerprint_issue_29_case_as_tensorflow(tmp_path):
    """tf2_multi_sig with ``1a 00 0a 00`` appended: an empty unknown field 3, then field 1
    (an int64) as length-delimited, which protobuf keeps as an unknown field."""
    src = tmp_path / "src"
    shutil.copytree(MODELS / "tf2_multi_sig", src)
    (src / "fingerprint.pb").unlink()
    with open(src / "saved_model.pb", "ab") as f:
        f.write(bytes([0x1A, 0x00, 0x0A, 0x00]))
    faults = writers_faults(src, tmp_path)
    assert not faults, "\n".join(faults)


@pytest.mark.parametrize("classes", CLASSES)
@pytest.mark.parametrize("model", SAVED_MODELS)
def test_read_saved_model_reads_noncanonical_models_as_python_protobuf(scramble_bin, tmp_path,
                                                                       model, classes):
    """``read_saved_model`` gives the message TensorFlow's Python protobuf parses, unknown
    fields included (variants without unknown fields in map entries, which upb moves to the
    parent's unknown fields where protobuf C++ drops them)."""
    from tensorflow.core.protobuf import saved_model_pb2

    src = scrambled(scramble_bin, tmp_path / "src", model, classes, "--no-entry-unknowns")
    want = saved_model_pb2.SavedModel.FromString((src / "saved_model.pb").read_bytes())
    got = ut.read_saved_model(src)
    assert got == want
    assert unknown_field_faults(got, want, "SavedModel") == []


def unknown_field_faults(got, want, path: str) -> List[str]:
    """Where ``got`` and ``want`` hold different unknown fields (number, wire type, value, in
    order), at any depth. upb keeps an unknown field's bytes as read (a padded length varint
    stays padded) where ``read_saved_model`` hands over its value re-encoded, so the two
    serializations may differ in those bytes while the messages are equal: this compares the
    fields, not their encoding."""
    from google.protobuf.unknown_fields import UnknownFieldSet

    def fields(message):
        return [(f.field_number, f.wire_type, f.data) for f in UnknownFieldSet(message)]

    faults: List[str] = []
    if fields(got) != fields(want):
        faults.append(f"{path}: unknown fields {fields(got)} != {fields(want)}")
    for field in want.DESCRIPTOR.fields:
        if field.message_type is None:
            continue
        a, b = getattr(got, field.name), getattr(want, field.name)
        if not field.is_repeated:
            if want.HasField(field.name):
                faults += unknown_field_faults(a, b, f"{path}.{field.name}")
        elif field.message_type.GetOptions().map_entry:
            if field.message_type.fields_by_name["value"].message_type is not None:
                for key in b:
                    faults += unknown_field_faults(a[key], b[key], f"{path}.{field.name}[{key!r}]")
        else:
            for i, (x, y) in enumerate(zip(a, b)):
                faults += unknown_field_faults(x, y, f"{path}.{field.name}[{i}]")
    return faults

"""`unbound.convert`: a checkpoint to Hugging Face's safetensors layout and back, values
bit for bit; strings refused with nothing written."""

import json
import os

import numpy as np
import pytest

import unbound

ml_dtypes = pytest.importorskip("ml_dtypes")

ARRAYS = {
    "f32": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4),
    "bf16": np.array([1.5, -2.25, 3e38, 0.0], dtype=ml_dtypes.bfloat16),
    "f16": np.arange(6, dtype=np.float16).reshape(2, 3),
    "u64": np.array([2**64 - 1, 3], dtype=np.uint64),
    "bool": np.array([[True, False], [False, True]]),
    "scalar": np.float32(2.5),
}


def test_round_trip_keeps_every_value(tmp_path):
    prefix = str(tmp_path / "ck")
    with unbound.CheckpointWriter(prefix) as w:
        for k, v in ARRAYS.items():
            w.write(k, v)
    st = tmp_path / "st"
    report = unbound.convert(prefix, st, max_shard_size="40")
    assert report["to"] == "safetensors" and len(report["files"]) > 1
    index = json.loads((st / "model.safetensors.index.json").read_text())
    assert sorted(index["weight_map"]) == sorted(ARRAYS)
    assert index["metadata"]["total_size"] == sum(np.asarray(v).nbytes for v in ARRAYS.values())
    back = str(tmp_path / "back")
    assert unbound.convert(st, back)["to"] == "tf"
    ck = unbound.Checkpoint(back)
    for k, v in ARRAYS.items():
        got = ck.read(k)
        assert got.dtype == np.asarray(v).dtype and got.tobytes() == np.asarray(v).tobytes(), k


def test_strings_are_refused_and_nothing_is_written(tmp_path):
    prefix = str(tmp_path / "ck")
    with unbound.CheckpointWriter(prefix) as w:
        w.write("words", np.array([b"a", b"b"]))
    with pytest.raises(unbound.UnsupportedError, match="words"):
        unbound.convert(prefix, tmp_path / "st", to="safetensors")
    assert not os.path.exists(tmp_path / "st")

"""`unbound.CheckpointWriter`: what it writes, TensorFlow 2.21 reads back equal; outputs are
atomic and never overwrite."""

import os

import numpy as np
import pytest

import unbound

ml_dtypes = pytest.importorskip("ml_dtypes")

ARRAYS = {
    "f16": np.arange(6, dtype=np.float16).reshape(2, 3),
    "f32": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4),
    "f64": np.array([np.pi, -0.0, np.inf, np.nan]),
    "bf16": np.array([1.5, -2.25, 3e38, 0.0], dtype=ml_dtypes.bfloat16),
    "i8": np.array([-128, 0, 127], dtype=np.int8),
    "i16": np.array([-32768, 7], dtype=np.int16),
    "i32": np.arange(-5, 5, dtype=np.int32).reshape(2, 5),
    "i64": np.array([2**62, -(2**63)], dtype=np.int64),
    "u8": np.arange(256, dtype=np.uint8),
    "u16": np.array([65535, 1], dtype=np.uint16),
    "u32": np.array([2**32 - 1], dtype=np.uint32),
    "u64": np.array([2**64 - 1, 3], dtype=np.uint64),
    "bool": np.array([[True, False], [False, True]]),
    "c64": np.array([1 + 2j, -3j], dtype=np.complex64),
    "c128": np.array([[1e300 + 1j]], dtype=np.complex128),
    "scalar": np.float32(2.5),
    "empty": np.zeros((0, 3), dtype=np.int32),
    "big_endian": np.arange(4, dtype=">i4"),
    "transposed": np.arange(6, dtype=np.float64).reshape(2, 3).T,
    "strings": np.array([b"a", b"\x00b", b""], dtype=object),
    "str_scalar": np.array(b"hello\x00", dtype=object),
    "unicode": np.array(["h\u00e9", "x"]),
}


def test_tensorflow_reads_back_every_dtype(tmp_path):
    tf = pytest.importorskip("tensorflow")
    prefix = str(tmp_path / "sub" / "ckpt")
    with unbound.CheckpointWriter(prefix) as w:
        for key, value in ARRAYS.items():
            w.write(key, value)
    assert w.closed
    ref = tf.train.load_checkpoint(prefix)
    assert sorted(ref.get_variable_to_shape_map()) == sorted(ARRAYS)
    for key, value in ARRAYS.items():
        raw = ref.get_tensor(key)
        # A scalar string comes back as bytes (np.asarray would drop its trailing zero bytes).
        got = np.array(raw, dtype=object) if isinstance(raw, bytes) else np.asarray(raw)
        want = np.asarray(value)
        if want.dtype.kind in "SUO":
            want = np.array([v.encode() if isinstance(v, str) else v for v in want.reshape(-1).tolist()],
                            dtype=object).reshape(want.shape)
            assert got.dtype == object
            np.testing.assert_array_equal(got, want, err_msg=key)
            continue
        assert got.shape == want.shape, key
        assert got.dtype == want.dtype.newbyteorder("="), key
        assert got.tobytes() == np.ascontiguousarray(want, dtype=want.dtype.newbyteorder("<")).tobytes(), key
    # And unbound reads it back equal too.
    ck = unbound.Checkpoint(prefix)
    np.testing.assert_array_equal(ck["transposed"], ARRAYS["transposed"])
    np.testing.assert_array_equal(ck["big_endian"], ARRAYS["big_endian"])


def test_index_is_byte_for_byte_tensorflows(tmp_path):
    tf = pytest.importorskip("tensorflow")
    keys = ["a", "b/c", "z"]
    values = [np.arange(5, dtype=np.float32), np.array([b"x", b"yz"], dtype=object), np.int64(7)]
    ours = str(tmp_path / "ours")
    with unbound.CheckpointWriter(ours) as w:
        for k, v in zip(keys, values):
            w.write(k, v)
    theirs = str(tmp_path / "theirs")
    tf.raw_ops.SaveV2(prefix=theirs, tensor_names=keys, shape_and_slices=[""] * 3,
                      tensors=[tf.constant(v) for v in values])
    for suffix in (".index", ".data-00000-of-00001"):
        assert open(ours + suffix, "rb").read() == open(theirs + suffix, "rb").read(), suffix


def test_existing_prefix_is_refused(tmp_path):
    prefix = str(tmp_path / "ckpt")
    with unbound.CheckpointWriter(prefix) as w:
        w.write("x", np.zeros(3))
    with pytest.raises(unbound.OutputExistsError, match="ckpt.index"):
        unbound.CheckpointWriter(prefix)
    with pytest.raises(FileExistsError):
        unbound.CheckpointWriter(prefix)


def test_an_exception_in_the_block_writes_nothing(tmp_path):
    prefix = str(tmp_path / "ckpt")
    with pytest.raises(RuntimeError):
        with unbound.CheckpointWriter(prefix) as w:
            w.write("x", np.zeros(1000))
            raise RuntimeError("stop")
    assert os.listdir(tmp_path) == []


def test_bad_writes_are_clear_errors(tmp_path):
    w = unbound.CheckpointWriter(str(tmp_path / "ckpt"))
    w.write("x", np.zeros(2))
    with pytest.raises(unbound.InvalidArgumentError, match="duplicate"):
        w.write("x", np.zeros(2))
    with pytest.raises(unbound.UnsupportedError):
        w.write("d", np.array(["2020-01-01"], dtype="datetime64[D]"))
    with pytest.raises(unbound.InvalidArgumentError):
        w.write("o", np.array([1, "a"], dtype=object))
    with pytest.raises(unbound.InvalidArgumentError):
        w.write("", np.zeros(1))
    w.close()
    w.close()  # idempotent
    with pytest.raises(unbound.InvalidArgumentError, match="closed"):
        w.write("y", np.zeros(1))
    assert unbound.Checkpoint(str(tmp_path / "ckpt")).keys() == ["x"]

"""`unbound.Checkpoint` against TensorFlow 2.21's own checkpoints and reader: every dtype,
scalars, empty tensors, partitioned (sliced) variables, zero-copy views, damaged data."""

import os
import shutil
import sys

import numpy as np
import pytest

import unbound

ml_dtypes = pytest.importorskip("ml_dtypes")

# Every dtype TensorFlow checkpoints hold that has a NumPy form.
NUMERIC = [
    "float16", "float32", "float64", "bfloat16",
    "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "bool", "complex64", "complex128",
]


def _values(tf_dtype: str, shape, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape)) if shape else 1
    if tf_dtype == "bool":
        v = rng.integers(0, 2, n).astype(bool)
    elif tf_dtype.startswith("complex"):
        v = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(tf_dtype)
    elif tf_dtype == "bfloat16":
        v = rng.standard_normal(n).astype(ml_dtypes.bfloat16)
    elif tf_dtype.startswith("float"):
        v = rng.standard_normal(n).astype(tf_dtype)
    else:
        info = np.iinfo(tf_dtype)
        v = rng.integers(info.min, info.max, n, dtype=tf_dtype, endpoint=True)
    return v.reshape(shape)


@pytest.fixture(scope="module")
def tf():
    tf = pytest.importorskip("tensorflow")
    return tf


@pytest.fixture(scope="module")
def saved(tf, tmp_path_factory):
    """A checkpoint written by TensorFlow's SaveV2: every dtype (shaped, scalar, empty),
    strings, and a variable partitioned into slices; plus one by tf.train.Checkpoint."""
    d = tmp_path_factory.mktemp("tfckpt")
    names, specs, tensors = [], [], []
    for i, name in enumerate(NUMERIC):
        dt = tf.dtypes.as_dtype(name)
        for suffix, shape in (("mat", (3, 5)), ("scalar", ()), ("empty", (0, 4))):
            names.append(f"{name}/{suffix}")
            specs.append("")
            tensors.append(tf.constant(_values(name, shape, i), dtype=dt))
    names += ["str/vec", "str/scalar", "str/empty", "str/mat"]
    specs += ["", "", "", ""]
    tensors += [
        tf.constant([b"a", b"", b"\x00bin\xff", b"longer string " * 20]),
        tf.constant(b"one"),
        tf.constant(np.zeros((0,), dtype=object), dtype=tf.string),
        tf.constant([[b"x", b"y"], [b"z", b""]]),
    ]
    # A partitioned variable: shape (6, 4), stored as rows 0..2 and 2..6 (as
    # tf.compat.v1 partitioned variables store theirs), and a 2x2 grid of a float64.
    full = _values("float32", (6, 4), 99)
    names += ["part/w", "part/w"]
    specs += ["6 4 0,2:-", "6 4 2,4:-"]
    tensors += [tf.constant(full[:2]), tf.constant(full[2:])]
    grid = _values("float64", (4, 6), 98)
    for r in (0, 2):
        for c in (0, 3):
            names.append("part/grid")
            specs.append(f"4 6 {r},2:{c},3")
            tensors.append(tf.constant(grid[r:r + 2, c:c + 3]))
    strs = np.array([b"s%d" % i for i in range(8)], dtype=object).reshape(4, 2)
    names += ["part/str", "part/str"]
    specs += ["4 2 0,1:-", "4 2 1,3:-"]
    tensors += [tf.constant(strs[:1]), tf.constant(strs[1:])]
    prefix = str(d / "raw")
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=specs, tensors=tensors)

    ckpt = tf.train.Checkpoint(
        w=tf.Variable(_values("float32", (7, 3), 1)),
        b=tf.Variable(tf.constant(_values("bfloat16", (4,), 2), dtype=tf.bfloat16)),
        step=tf.Variable(3, dtype=tf.int64),
        vocab=tf.Variable([b"alpha", b"beta"]),
        flag=tf.Variable(True),
    )
    obj_prefix = ckpt.write(str(d / "obj"))
    return {"raw": prefix, "obj": obj_prefix, "full": full, "grid": grid, "strs": strs}


def _assert_equal_to_tf(tf, prefix):
    ref = tf.train.load_checkpoint(prefix)
    shapes = ref.get_variable_to_shape_map()
    ck = unbound.Checkpoint(prefix)
    assert sorted(ck.keys()) == sorted(shapes)
    assert len(ck) == len(shapes)
    compared = 0
    for key in shapes:
        try:
            value = ref.get_tensor(key)
        except ValueError as e:
            # TensorFlow's Python reader cannot assemble a partitioned string tensor
            # ("Dtype string not supported"); the tests compare that one with its source.
            assert "string" in str(e) and not ck.is_stored_whole(key), key
            continue
        compared += 1
        # A scalar string comes back as bytes (np.asarray would drop its trailing zero bytes).
        expected = np.array(value, dtype=object) if isinstance(value, bytes) else np.asarray(value)
        got = ck[key]
        assert isinstance(got, np.ndarray), key
        assert got.dtype == expected.dtype, (key, got.dtype, expected.dtype)
        assert got.shape == expected.shape == tuple(shapes[key]), key
        assert ck.shape(key) == expected.shape
        assert ck.dtype(key) == expected.dtype
        if expected.dtype.kind in "fcV":  # NaN-safe and bfloat16-safe: compare the bits
            assert got.tobytes() == np.ascontiguousarray(expected).tobytes(), key
        else:
            np.testing.assert_array_equal(got, expected, err_msg=key)
    assert compared >= len(shapes) - 1
    return ck


def test_every_key_equals_tensorflow_savev2(tf, saved):
    ck = _assert_equal_to_tf(tf, saved["raw"])
    np.testing.assert_array_equal(ck["part/w"], saved["full"])
    np.testing.assert_array_equal(ck["part/grid"], saved["grid"])
    np.testing.assert_array_equal(ck["part/str"], saved["strs"])
    assert not ck.is_stored_whole("part/w") and ck.is_stored_whole("float32/mat")


def test_every_key_equals_tensorflow_checkpoint(tf, saved):
    ck = _assert_equal_to_tf(tf, saved["obj"])
    assert "_CHECKPOINTABLE_OBJECT_GRAPH" in ck
    assert ck.dtype("b/.ATTRIBUTES/VARIABLE_VALUE") == np.dtype(ml_dtypes.bfloat16)


def test_a_saved_model_directory_reads_its_variables(tf):
    model = os.path.join(os.path.dirname(__file__), "..", "..", "..", "testdata", "models", "tf2_multi_sig")
    ck = _assert_equal_to_tf(tf, os.path.join(model, "variables", "variables"))
    assert unbound.Checkpoint(model).keys() == ck.keys()


def test_whole_fixed_size_tensors_are_read_only_views_of_the_mapping(saved):
    ck = unbound.Checkpoint(saved["raw"])
    for name in NUMERIC:
        a = ck[f"{name}/mat"]
        assert not a.flags.writeable, name
        assert np.shares_memory(a, ck[f"{name}/mat"]), name  # the same mapped pages
        with pytest.raises(ValueError):
            a.flags.writeable = True
        with pytest.raises(ValueError):
            a[0, 0] = a[0, 1]
    b = np.array(a)  # a copy is writeable
    b[0, 0] = 0
    # Views keep the mapping alive after the checkpoint object is gone.
    view = ck["float64/mat"]
    expected = view.copy()
    del ck
    np.testing.assert_array_equal(view, expected)
    # Copies: partitioned variables, strings, boxes.
    ck = unbound.Checkpoint(saved["raw"])
    for key in ("part/w", "part/grid", "str/vec"):
        assert ck[key].flags.writeable, key
    assert ck.read_box("float32/mat", "3 5 1,2:0,3").flags.writeable


def test_read_box_matches_numpy_slicing(saved):
    ck = unbound.Checkpoint(saved["raw"])
    grid = saved["grid"]
    np.testing.assert_array_equal(ck.read_box("part/grid", "4 6 1,2:2,3"), grid[1:3, 2:5])
    np.testing.assert_array_equal(ck.read_box("part/grid", "4 6 -:5,1"), grid[:, 5:6])
    np.testing.assert_array_equal(ck.read_box("part/grid", ""), grid)
    np.testing.assert_array_equal(ck.read_box("part/str", "4 2 1,2:1,1"), saved["strs"][1:3, 1:2])
    whole = ck["int16/mat"]
    np.testing.assert_array_equal(ck.read_box("int16/mat", "3 5 2,1:-"), whole[2:3])
    with pytest.raises(unbound.FormatError, match="shape"):
        ck.read_box("part/grid", "4 7 0,1:-")
    with pytest.raises(unbound.InvalidArgumentError):
        ck.read_box("part/grid", "4 6 nonsense")


def test_missing_key_is_key_not_found(saved):
    ck = unbound.Checkpoint(saved["raw"])
    with pytest.raises(unbound.KeyNotFoundError, match="no/such"):
        ck["no/such"]
    with pytest.raises(KeyError):
        ck.shape("no/such")
    assert "no/such" not in ck
    with pytest.raises(unbound.NotFoundError):
        unbound.Checkpoint(os.path.join(os.path.dirname(saved["raw"]), "absent"))


def test_flipped_data_byte_is_a_format_error_naming_the_file(tf, saved, tmp_path):
    src = os.path.dirname(saved["raw"])
    for f in os.listdir(src):
        if f.startswith("raw."):
            shutil.copy(os.path.join(src, f), tmp_path / f)
    prefix = str(tmp_path / "raw")
    ck = unbound.Checkpoint(prefix)
    good = np.array(ck["float32/mat"])
    data = str(tmp_path / "raw.data-00000-of-00001")
    # Find the tensor's bytes in the data file and flip one.
    blob = bytearray(open(data, "rb").read())
    at = bytes(blob).find(good.tobytes())
    assert at >= 0
    blob[at + 5] ^= 0x10
    with open(data, "r+b") as f:
        f.write(blob)
    ck = unbound.Checkpoint(prefix)
    with pytest.raises(unbound.FormatError) as err:
        ck["float32/mat"]
    assert data in str(err.value) and "checksum" in str(err.value)
    with pytest.raises(Exception):  # TensorFlow agrees that it is damaged
        tf.train.load_checkpoint(prefix).get_tensor("float32/mat")
    # Without verification the (damaged) bytes are returned as they are.
    assert not np.array_equal(ck.read("float32/mat", verify=False), good)
    # The other tensors still read.
    ck["float64/mat"]


def test_truncated_data_file_is_a_format_error(saved, tmp_path):
    src = os.path.dirname(saved["raw"])
    for f in os.listdir(src):
        if f.startswith("raw."):
            shutil.copy(os.path.join(src, f), tmp_path / f)
    data = tmp_path / "raw.data-00000-of-00001"
    size = data.stat().st_size
    with open(data, "r+b") as f:
        f.truncate(size // 2)
    ck = unbound.Checkpoint(str(tmp_path / "raw"))
    errors = 0
    for key in ck.keys():
        try:
            ck[key]
        except unbound.FormatError as e:
            assert str(data) in str(e)
            errors += 1
    assert errors > 0


def test_bfloat16_without_ml_dtypes_is_unsupported_naming_it(saved, monkeypatch):
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # makes `import ml_dtypes` fail
    ck = unbound.Checkpoint(saved["raw"])
    with pytest.raises(unbound.UnsupportedError, match="ml_dtypes"):
        ck["bfloat16/mat"]
    with pytest.raises(NotImplementedError):
        ck.dtype("bfloat16/mat")
    assert ck["float32/mat"].dtype == np.float32

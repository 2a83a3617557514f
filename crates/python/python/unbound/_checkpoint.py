"""TensorFlow checkpoints (tensor bundles) as NumPy arrays, and a checkpoint writer.

:class:`Checkpoint` reads any V2 checkpoint prefix (``PREFIX.index`` and
``PREFIX.data-*-of-*``), the ``variables/variables`` of a SavedModel included, without
TensorFlow. :class:`CheckpointWriter` writes one that ``tf.train.load_checkpoint`` reads.
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Any, Dict, Iterator, List, Optional, Tuple, Type, Union

import numpy as np

from unbound import _unbound
from unbound._errors import InvalidArgumentError, UnsupportedError

__all__ = ["Checkpoint", "CheckpointWriter", "convert"]

PathLike = Union[str, "os.PathLike[str]"]

# TensorFlow's dtype names with a NumPy dtype of the same bytes (little-endian, as stored).
_NUMPY_DTYPES: Dict[str, str] = {
    "float16": "<f2",
    "float32": "<f4",
    "float64": "<f8",
    "int8": "i1",
    "int16": "<i2",
    "int32": "<i4",
    "int64": "<i8",
    "uint8": "u1",
    "uint16": "<u2",
    "uint32": "<u4",
    "uint64": "<u8",
    "bool": "?",
    "complex64": "<c8",
    "complex128": "<c16",
}

# The reverse, for the writer: NumPy dtype kind and size to TensorFlow's name.
_TF_NAMES: Dict[Tuple[str, int], str] = {
    (np.dtype(v).kind, np.dtype(v).itemsize): k for k, v in _NUMPY_DTYPES.items()
}


def _bfloat16() -> np.dtype:
    try:
        import ml_dtypes
    except ImportError:
        raise UnsupportedError(
            "bfloat16 values need the ml_dtypes package (pip install ml_dtypes, "
            "or the unbound[bfloat16] extra)"
        ) from None
    return np.dtype(ml_dtypes.bfloat16)


def numpy_dtype(tf_name: str) -> np.dtype:
    """The NumPy dtype holding TensorFlow dtype ``tf_name`` (``"float32"``, ``"bfloat16"``,
    ``"string"``, ...): strings as ``object`` (elements are ``bytes``), bfloat16 as
    ``ml_dtypes.bfloat16``. Raises :class:`unbound.UnsupportedError` for dtypes with no NumPy
    form (quantized, float8, variant, resource)."""
    if tf_name == "string":
        return np.dtype(object)
    if tf_name == "bfloat16":
        return _bfloat16()
    code = _NUMPY_DTYPES.get(tf_name)
    if code is None:
        raise UnsupportedError(f"TensorFlow dtype {tf_name} has no NumPy equivalent in unbound")
    return np.dtype(code)


def _to_array(dtype_name: str, shape: List[int], kind: str, payload: Any) -> np.ndarray:
    """An array from what the native reader returned, without copying the payload."""
    dtype = numpy_dtype(dtype_name)
    if kind == "strings":
        values = np.empty(len(payload), dtype=object)
        values[:] = payload
        return values.reshape(shape)
    # `payload` is a uint8 array: a read-only view of the mapped file ("view"), or an owned
    # buffer ("copy"). Reinterpreting and reshaping it keeps it as the base, so no copy.
    return payload.view(dtype).reshape(shape)


class Checkpoint:
    """A TensorFlow checkpoint opened for reading, as a read-only mapping from keys to arrays.

    ``Checkpoint(prefix)`` opens ``prefix.index`` (for a SavedModel, pass its directory or
    ``DIR/variables/variables``); data files are memory-mapped when first read. Keys are
    TensorFlow's checkpoint keys (``dense/kernel/.ATTRIBUTES/VARIABLE_VALUE``), including
    ``_CHECKPOINTABLE_OBJECT_GRAPH``; a partitioned or DTensor-sharded variable appears once,
    under its own key, and reads whole.

    **Views and copies.** ``ckpt[key]`` returns a read-only *view* of the mapped data file (no
    copy; ``arr.flags.writeable`` is False and cannot be set) when the tensor is stored whole
    (not in slices) and has a fixed-size dtype with a NumPy form: every numeric dtype, bool,
    complex, float16, and bfloat16. The mapping stays open as long as any array viewing it
    lives. Everything else is a new, writeable array: string tensors (an ``object`` array of
    ``bytes``, as TensorFlow returns them), partitioned variables (assembled from their
    slices), empty tensors, and :meth:`read_box` results. Use ``np.array(arr)`` for a
    writeable copy of a view. A view reads the file lazily: if the file changes while mapped,
    the array changes with it.

    **Checksums.** Like TensorFlow's reader, every value is checked against its stored
    CRC32C. For a view, that means reading the tensor's bytes once when it is returned (at
    memory bandwidth, about 0.1 s per GiB in the page cache; on a cold cache it costs the disk
    read the view would trigger anyway); ``verify=False`` skips it, so that only the pages
    actually touched are read. Partitioned tensors, strings and boxes are always checked.

    Scalars are 0-d arrays (TensorFlow's ``get_tensor`` returns NumPy scalars, and ``bytes``
    for a scalar string); they compare equal.

    Errors: a missing key raises :class:`unbound.KeyNotFoundError` (a ``KeyError``); damaged
    data (a checksum mismatch, a truncated file, a bad entry) :class:`unbound.FormatError`
    naming the file and the key; a dtype with no NumPy form :class:`unbound.UnsupportedError`.
    Reads run with the GIL released and stop on Ctrl-C.
    """

    def __init__(self, prefix: PathLike, *, verify: bool = True) -> None:
        """Opens the checkpoint at ``prefix`` (a SavedModel directory stands for its
        ``variables/variables``, as in ``unbound vars``); ``verify`` is the default of
        :meth:`read`."""
        path = os.fspath(prefix)
        saved_model = os.path.join(path, "variables", "variables")
        if os.path.isdir(path) and os.path.exists(saved_model + ".index"):
            path = saved_model
        self._reader = _unbound.CheckpointReader(path)
        self._verify = verify

    @property
    def prefix(self) -> str:
        """The checkpoint prefix."""
        return os.fspath(self._reader.prefix)

    def keys(self) -> List[str]:
        """The tensor keys, sorted (each partitioned variable once)."""
        return self._reader.keys()

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        try:
            self._reader.describe(key)
        except KeyError:
            return False
        return True

    def __len__(self) -> int:
        return len(self._reader.keys())

    def __iter__(self) -> Iterator[str]:
        return iter(self._reader.keys())

    def shape(self, key: str) -> Tuple[int, ...]:
        """The full shape of tensor ``key``."""
        return tuple(self._reader.describe(key)[1])

    def dtype(self, key: str) -> np.dtype:
        """The NumPy dtype of tensor ``key`` (``object`` for strings)."""
        return numpy_dtype(self._reader.describe(key)[0])

    def tf_dtype(self, key: str) -> str:
        """TensorFlow's name of the dtype of tensor ``key`` (``"float32"``, ``"string"``)."""
        return self._reader.describe(key)[0]

    def is_stored_whole(self, key: str) -> bool:
        """Whether tensor ``key`` is stored in one piece (not partitioned into slices)."""
        return self._reader.describe(key)[2]

    def read(self, key: str, *, verify: Optional[bool] = None) -> np.ndarray:
        """Tensor ``key`` as an array (a read-only view where possible: see the class doc).
        ``verify=False`` skips the checksum of a view; ``None`` uses the checkpoint's
        default."""
        check = self._verify if verify is None else verify
        return _to_array(*self._reader.read(key, check))

    def __getitem__(self, key: str) -> np.ndarray:
        return self.read(key)

    def read_box(self, key: str, shape_and_slice: str) -> np.ndarray:
        """Part of tensor ``key``, in TensorFlow's ``shape_and_slice`` text: the full shape,
        then per dimension ``start,length`` or ``-`` separated by ``:``, e.g.
        ``"8 16 2,4:3,10"`` (as ``unbound vars --box``); the empty text is the whole tensor.
        Assembled from whichever stored slices hold the box (a box they do not cover is a
        :class:`unbound.FormatError`); always a new array. A shape that is not the tensor's
        raises :class:`unbound.FormatError`, bad text :class:`unbound.InvalidArgumentError`."""
        return _to_array(*self._reader.read_box(key, shape_and_slice))

    def items(self) -> Iterator[Tuple[str, np.ndarray]]:
        """``(key, array)`` for every tensor, read one at a time."""
        for key in self.keys():
            yield key, self.read(key)

    def __repr__(self) -> str:
        return f"unbound.Checkpoint({self.prefix!r}, {len(self)} tensors)"


class CheckpointWriter:
    """Writes a TensorFlow checkpoint (a tensor bundle ``PREFIX.index`` plus
    ``PREFIX.data-00000-of-00001``) that ``tf.train.load_checkpoint`` reads.

    Use it as a context manager: ``with unbound.CheckpointWriter(prefix) as w:
    w.write("w", array)``. :meth:`close` (on leaving the block without an exception) renames
    the data file into place and writes the index last, atomically; an exception in the block
    (or Ctrl-C during a write) abandons the checkpoint and leaves no file (Ctrl-C during
    :meth:`close` may leave the data file without an index: still no checkpoint). An existing
    prefix is refused (:class:`unbound.OutputExistsError`): unbound never overwrites. The
    index is what TensorFlow's own writer writes for the same tensors.

    :meth:`write` takes any array of the dtypes :class:`Checkpoint` reads (numeric, bool,
    complex, float16, ``ml_dtypes.bfloat16``; ``bytes``/``str`` arrays or ``object`` arrays of
    ``bytes`` as strings). Each call copies the array's bytes once and appends them to the
    data file with the GIL released, so memory holds one tensor at a time.
    """

    def __init__(self, prefix: PathLike) -> None:
        """Starts a checkpoint at ``prefix`` (its directory is created when missing)."""
        self._writer = _unbound.CheckpointWriter(os.fspath(prefix))

    @property
    def prefix(self) -> str:
        """The checkpoint prefix."""
        return os.fspath(self._writer.prefix)

    @property
    def closed(self) -> bool:
        """Whether the writer was closed or abandoned."""
        return self._writer.closed

    def write(self, key: str, array: Any) -> None:
        """Adds ``array`` (anything ``numpy.asarray`` accepts) under ``key``; keys must be
        unique and non-empty."""
        value = np.asarray(array)
        shape = [int(d) for d in value.shape]
        if value.dtype.kind in ("S", "U", "O"):
            self._writer.write_strings(key, shape, _as_bytes_list(key, value))
            return
        name = _tf_name(key, value.dtype)
        data = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<"))
        self._writer.write_raw(key, name, shape, data.reshape(-1).view(np.uint8))

    def close(self) -> None:
        """Finishes the checkpoint (data file into place, then the index). Idempotent."""
        self._writer.close()

    def abort(self) -> None:
        """Abandons the checkpoint: nothing is written, the temporary data file is removed."""
        self._writer.abort()

    def __enter__(self) -> "CheckpointWriter":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __repr__(self) -> str:
        return f"unbound.CheckpointWriter({self.prefix!r})"


def _tf_name(key: str, dtype: np.dtype) -> str:
    if dtype.names is None and dtype.name == "bfloat16":
        return "bfloat16"
    name = _TF_NAMES.get((dtype.kind, dtype.itemsize))
    if name is None:
        raise UnsupportedError(f"tensor {key}: NumPy dtype {dtype} has no TensorFlow dtype")
    return name


def _as_bytes_list(key: str, value: np.ndarray) -> List[bytes]:
    out: List[bytes] = []
    for item in value.reshape(-1).tolist():
        if isinstance(item, bytes):
            out.append(item)
        elif isinstance(item, str):
            out.append(item.encode("utf-8"))
        else:
            raise InvalidArgumentError(
                f"tensor {key}: a string tensor holds bytes or str, not {type(item).__name__}"
            )
    return out


def convert(
    src: Union[str, "os.PathLike[str]"],
    dst: Union[str, "os.PathLike[str]"],
    to: Optional[str] = None,
    *,
    max_shard_size: str = "5GB",
    names: str = "paths",
    jobs: int = 2,
    dry_run: bool = False,
) -> Dict[str, Any]:
    """Converts whole tensors between a TensorFlow checkpoint and Hugging Face's sharded
    safetensors layout, as ``unbound convert SRC DST [--to ...]`` does, streamed in bounded
    memory and written atomically.

    ``to="safetensors"``: ``src`` is a checkpoint prefix or a SavedModel directory; ``dst`` a
    new directory of ``model-0000i-of-0000N.safetensors`` files of at most
    ``max_shard_size`` (``"5GB"``, ``"500MB"``, ``"2GiB"``) with
    ``model.safetensors.index.json``, or one ``model.safetensors``; tensors named by object
    path (``names="paths"``) or checkpoint key (``names="keys"``). ``to="tf"``: ``src`` is a
    directory of safetensors files (PyTorch DCP's Hugging Face writer output included) or
    one file; ``dst`` a checkpoint prefix. ``to=None`` writes the other format than the
    source's. Strings and complex numbers raise :class:`unbound.UnsupportedError` naming the
    keys, with nothing written. Returns the report ``unbound convert --json`` prints
    (``bytes``, ``files``, ``tensors``, ``seconds``, ...).
    """
    import json

    out = _unbound.convert(os.fspath(src), os.fspath(dst), to, max_shard_size, names, jobs, dry_run)
    return json.loads(out)

"""The SavedModel image format (``saved_model.cpb``) in open-source TensorFlow, past 2 GiB.

TensorFlow's own code knows the image format but open-source builds switch it off:
``SaveOptions(experimental_image_format=True)`` raises "disabled in OSS", ``save.py`` calls a
``proto_splitter`` module the wheel does not ship, and ``loader_impl.parse_saved_model`` reads
only ``saved_model.pb`` / ``.pbtxt``. This module supplies the missing pieces, with unbound's
Rust splitter and merger:

- :func:`enable_image_format` patches TensorFlow in this process (undone by
  :func:`disable_image_format`); then ``tf.saved_model.save(..., options=
  tf.saved_model.SaveOptions(experimental_image_format=True))`` writes ``saved_model.cpb``
  with TensorFlow's SavedModel splitting algorithm, and ``tf.saved_model.load`` /
  ``tf.compat.v1.saved_model.load`` read ``.cpb`` directories. ``fingerprint.pb`` is written
  by TensorFlow itself (its C++ ``CreateFingerprintDef`` reads ``.cpb`` in open-source builds
  too).
- :func:`save` and :func:`load` do the same for one call, leaving TensorFlow unpatched.
- :class:`SavedModelSplitter` and :func:`read_saved_model` are the pieces underneath.

Messages are never serialized whole: a SavedModel past 2 GiB crosses to Rust and back by
parts (:mod:`unbound._parts`), each below the limit.

Decisions:

- Reading prefers ``saved_model.cpb`` when it exists, then TensorFlow's own order (``.pb``,
  then ``.pbtxt``): the ``.cpb`` is what TensorFlow's ``Merger::Read`` and its fingerprint
  pick when both exist.
- Only local paths go through unbound; a path with a scheme (``gs://``...) is left to
  TensorFlow.
- The maximum chunk size defaults to TensorFlow's (1 GiB); :func:`set_max_size` changes it,
  as TensorFlow's ``debug_set_max_size`` does. A model below it is written as a plain
  ``saved_model.pb``, as TensorFlow's splitter writes it.
- Records are compressed with zstd by default (what ``unbound split`` writes; TensorFlow's
  Merger reads it); :func:`set_compression` chooses ``"brotli"`` (what TensorFlow writes),
  ``"snappy"`` or ``"none"``.

TensorFlow is imported only when a function here needs it.
"""

from __future__ import annotations

import contextlib
import copy
import os
import threading
import types
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from unbound import _unbound
from unbound._errors import InvalidArgumentError, TensorFlowVersionError
from unbound._parts import PART_LIMIT, apply_steps, message_parts

__all__ = [
    "enable_image_format",
    "disable_image_format",
    "image_format_enabled",
    "save",
    "load",
    "SavedModelSplitter",
    "read_saved_model",
    "set_max_size",
    "get_max_size",
    "set_compression",
    "get_compression",
]

#: TensorFlow's default maximum chunk size (``constants.max_size()``): 1 GiB.
DEFAULT_MAX_SIZE = 1 << 30

#: The oldest TensorFlow whose hooks this module has been written against.
MIN_TENSORFLOW = (2, 15)

_COMPRESSIONS = ("zstd", "brotli", "snappy", "none")
_settings: Dict[str, Any] = {"max_size": DEFAULT_MAX_SIZE, "compression": "zstd"}
_lock = threading.RLock()
#: What enable_image_format replaced, to be put back; None while TensorFlow is unpatched.
_saved: Optional[Dict[str, Any]] = None


def set_max_size(max_size: Optional[int]) -> None:
    """Sets the maximum chunk size (bytes) for splitting; ``None`` restores TensorFlow's
    default of 1 GiB. Like TensorFlow's ``debug_set_max_size``, mostly for tests."""
    if max_size is None:
        max_size = DEFAULT_MAX_SIZE
    if int(max_size) < 1:
        raise InvalidArgumentError(f"max_size must be at least 1, not {max_size}")
    _settings["max_size"] = int(max_size)


def get_max_size() -> int:
    """The maximum chunk size (bytes) splitting uses."""
    return int(_settings["max_size"])


def set_compression(compression: str) -> None:
    """Sets the compression of the ``.cpb`` records written: ``"zstd"`` (the default),
    ``"brotli"`` (what TensorFlow writes), ``"snappy"`` or ``"none"``."""
    if compression not in _COMPRESSIONS:
        raise InvalidArgumentError(
            f"unknown compression {compression!r} (one of {', '.join(_COMPRESSIONS)})"
        )
    _settings["compression"] = compression


def get_compression() -> str:
    """The compression of the ``.cpb`` records written."""
    return str(_settings["compression"])


class SavedModelSplitter:
    """TensorFlow's SavedModel splitter (``proto_splitter.SavedModelSplitter``), in Rust.

    ``saved_model`` is a ``tensorflow.SavedModel`` message (``saved_model_pb2.SavedModel``)
    of any size; it is handed to Rust by parts, never serialized whole. The algorithm is
    TensorFlow's Python one, the code ``unbound split`` runs: when the model reaches
    ``max_size``, the first MetaGraph's GraphDef is split (large constants, functions, nodes),
    and if the model is still too large the GraphDef becomes a chunk of its own.
    """

    def __init__(self, saved_model: Any, max_size: Optional[int] = None) -> None:
        """Splits ``saved_model`` with chunks of at most ``max_size`` bytes (default:
        :func:`get_max_size`)."""
        self._message = saved_model
        self._max_size = get_max_size() if max_size is None else int(max_size)
        if self._max_size < 1:
            raise InvalidArgumentError(f"max_size must be at least 1, not {max_size}")
        self.warnings: List[str] = []
        """Where the split had to differ from TensorFlow's algorithm (filled by a split)."""

    def split(self) -> Tuple[List[bytes], Any]:
        """Splits the model: ``(chunks, chunked_message)``, each chunk serialized and
        ``chunked_message`` the ``ChunkedMessage`` placing them (a protobuf message)."""
        parts = message_parts(self._message, PART_LIMIT)
        chunks, chunked, warnings = _unbound._tf_split(parts, self._max_size)
        self.warnings = list(warnings)
        message = _chunked_message_class()()
        message.ParseFromString(chunked)
        return list(chunks), message

    def write(self, file_prefix: str, compression: Optional[str] = None) -> str:
        """Writes ``FILE_PREFIX.cpb`` (or ``FILE_PREFIX.pb`` when nothing needed splitting,
        as TensorFlow does) atomically and returns its path. ``compression`` defaults to
        :func:`get_compression`."""
        compression = get_compression() if compression is None else compression
        if compression not in _COMPRESSIONS:
            raise InvalidArgumentError(
                f"unknown compression {compression!r} (one of {', '.join(_COMPRESSIONS)})"
            )
        parts = message_parts(self._message, PART_LIMIT)
        path, _chunked, _count, _size, warnings = _unbound._tf_write(
            parts, os.fspath(file_prefix), self._max_size, compression
        )
        self.warnings = list(warnings)
        return os.fspath(path)


def read_saved_model(export_dir: "os.PathLike[str] | str") -> Any:
    """The ``saved_model_pb2.SavedModel`` of ``export_dir`` (``saved_model.cpb``, else
    ``.pb``, else ``.pbtxt``), merged in Rust and handed over by parts: a model past 2 GiB is
    never one serialization."""
    from tensorflow.core.protobuf import saved_model_pb2

    steps, _path = _unbound._tf_read(os.fspath(export_dir))
    return apply_steps(saved_model_pb2.SavedModel(), steps)


def _chunked_message_class() -> Any:
    """The ``tensorflow.proto_splitter.ChunkedMessage`` class, built from unbound's schemas
    (TensorFlow's wheel does not ship ``chunk_pb2``)."""
    global _CHUNKED_MESSAGE
    if _CHUNKED_MESSAGE is None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        files = descriptor_pb2.FileDescriptorSet()
        files.ParseFromString(_unbound._tf_file_descriptor_set())
        by_name = {f.name: f for f in files.file}
        pool = descriptor_pool.DescriptorPool()
        added: set = set()

        def add(name: str) -> None:
            if name in added:
                return
            for dependency in by_name[name].dependency:
                add(dependency)
            pool.Add(by_name[name])
            added.add(name)

        chunk_file = next(n for n, f in by_name.items() if any(
            m.name == "ChunkedMessage" for m in f.message_type))
        add(chunk_file)
        descriptor = pool.FindMessageTypeByName("tensorflow.proto_splitter.ChunkedMessage")
        _CHUNKED_MESSAGE = message_factory.GetMessageClass(descriptor)
    return _CHUNKED_MESSAGE


_CHUNKED_MESSAGE: Any = None


# --- the TensorFlow hooks ---------------------------------------------------------------


def _tensorflow_modules() -> types.SimpleNamespace:
    """TensorFlow and the modules holding the hooks, checked (TensorFlowVersionError names
    whatever is missing)."""
    try:
        import tensorflow as tf
        from tensorflow.python.saved_model import loader_impl, save, save_options
    except ImportError as e:
        raise TensorFlowVersionError(f"unbound.tensorflow needs TensorFlow: {e}") from e
    version = getattr(tf, "__version__", "unknown")
    missing = []
    try:
        major_minor = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        major_minor = (0, 0)
    if major_minor < MIN_TENSORFLOW:
        missing.append(
            f"TensorFlow {version} is older than {MIN_TENSORFLOW[0]}.{MIN_TENSORFLOW[1]}"
        )
    if not hasattr(save_options, "is_oss"):
        missing.append("tensorflow.python.saved_model.save_options.is_oss")
    saver = getattr(save, "save_and_return_nodes", None)
    if saver is None or "proto_splitter" not in saver.__code__.co_names:
        missing.append("save.save_and_return_nodes calling proto_splitter.SavedModelSplitter")
    parse = getattr(loader_impl, "parse_saved_model", None)
    if parse is None:
        missing.append("tensorflow.python.saved_model.loader_impl.parse_saved_model")
    with_debug = getattr(loader_impl, "parse_saved_model_with_debug_info", None)
    if with_debug is None or "parse_saved_model" not in with_debug.__code__.co_names:
        missing.append("loader_impl.parse_saved_model_with_debug_info calling parse_saved_model")
    loader_init = getattr(getattr(loader_impl, "SavedModelLoader", None), "__init__", None)
    if loader_init is None or "parse_saved_model" not in loader_init.__code__.co_names:
        missing.append("loader_impl.SavedModelLoader calling parse_saved_model")
    if missing:
        raise TensorFlowVersionError(
            f"TensorFlow {version} lacks what unbound.tensorflow relies on: "
            + "; ".join(missing)
        )
    return types.SimpleNamespace(
        tf=tf, save=save, save_options=save_options, loader_impl=loader_impl
    )


def _is_local(path: Any) -> bool:
    """Whether ``path`` names a local file (no ``scheme://``)."""
    if isinstance(path, bytes):
        path = path.decode("utf-8", "surrogateescape")
    return "://" not in os.fspath(path)


def _reading_parse(original: Any) -> Any:
    """``loader_impl.parse_saved_model`` reading ``saved_model.cpb`` through unbound."""

    def parse_saved_model(export_dir: Any) -> Any:
        if _is_local(export_dir):
            directory = os.fsdecode(os.fspath(export_dir))
            if os.path.isfile(os.path.join(directory, "saved_model.cpb")):
                return read_saved_model(directory)
        return original(export_dir)

    parse_saved_model.__doc__ = original.__doc__
    parse_saved_model.__wrapped__ = original  # type: ignore[attr-defined]
    return parse_saved_model


def enable_image_format() -> None:
    """Makes this process's TensorFlow write and read the image format (see the module
    documentation). Idempotent; :func:`disable_image_format` undoes it. Raises
    :class:`unbound.TensorFlowVersionError` when TensorFlow lacks a hook this relies on."""
    global _saved
    with _lock:
        if _saved is not None:
            return
        m = _tensorflow_modules()
        _saved = {
            "is_oss": m.save_options.is_oss,
            "proto_splitter": m.save.__dict__.get("proto_splitter", _MISSING),
            "parse_saved_model": m.loader_impl.parse_saved_model,
            "modules": m,
        }
        m.save_options.is_oss = False
        m.save.proto_splitter = types.SimpleNamespace(SavedModelSplitter=SavedModelSplitter)
        m.loader_impl.parse_saved_model = _reading_parse(m.loader_impl.parse_saved_model)


def disable_image_format() -> None:
    """Undoes :func:`enable_image_format` (nothing if it is not in effect)."""
    global _saved
    with _lock:
        if _saved is None:
            return
        m = _saved["modules"]
        m.save_options.is_oss = _saved["is_oss"]
        if _saved["proto_splitter"] is _MISSING:
            m.save.__dict__.pop("proto_splitter", None)
        else:
            m.save.proto_splitter = _saved["proto_splitter"]
        m.loader_impl.parse_saved_model = _saved["parse_saved_model"]
        _saved = None


def image_format_enabled() -> bool:
    """Whether :func:`enable_image_format` is in effect."""
    return _saved is not None


_MISSING = object()


@contextlib.contextmanager
def _image_format() -> Iterator[types.SimpleNamespace]:
    """The image format enabled for the ``with`` block (left as it was afterwards)."""
    with _lock:
        was_enabled = image_format_enabled()
        enable_image_format()
        try:
            assert _saved is not None
            yield _saved["modules"]
        finally:
            if not was_enabled:
                disable_image_format()


def save(
    obj: Any,
    export_dir: "os.PathLike[str] | str",
    signatures: Any = None,
    options: Any = None,
) -> None:
    """``tf.saved_model.save`` in the image format, without leaving TensorFlow patched.

    ``options`` is a ``tf.saved_model.SaveOptions`` (copied, with
    ``experimental_image_format`` set) or ``None``."""
    with _image_format() as m:
        if options is None:
            options = m.tf.saved_model.SaveOptions(experimental_image_format=True)
        else:
            options = copy.copy(options)
            options.experimental_image_format = True
        m.tf.saved_model.save(obj, os.fspath(export_dir), signatures=signatures, options=options)


def load(
    export_dir: "os.PathLike[str] | str",
    tags: Optional[Sequence[str]] = None,
    options: Any = None,
) -> Any:
    """``tf.saved_model.load`` reading ``saved_model.cpb`` too, without leaving TensorFlow
    patched."""
    with _image_format() as m:
        return m.tf.saved_model.load(os.fspath(export_dir), tags=tags, options=options)

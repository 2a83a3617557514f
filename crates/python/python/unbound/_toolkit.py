"""The `unbound` CLI's toolkit as functions: ``split``, ``merge``, ``show``, ``inspect``,
``verify``, ``fingerprint`` and ``read_message``.

Each makes the library call its CLI command makes and returns the report the command prints
(see :mod:`unbound._reports`); TensorFlow is never needed. Long calls run with the GIL
released and honour Ctrl-C: ``KeyboardInterrupt`` is raised at once and no partial output or
temporary file is left behind. Failures raise :class:`unbound.Error` subclasses naming the
file and the fault (a missing directory :class:`unbound.NotFoundError`, a damaged file
:class:`unbound.FormatError`, an existing output :class:`unbound.OutputExistsError`).
"""

from __future__ import annotations

import os
from typing import Any, Union

from unbound import _unbound
from unbound._reports import *  # noqa: F401,F403
from unbound._reports import __all__ as _reports_all
from unbound._reports import (
    ExternalizeReport,
    FingerprintReport,
    InspectReport,
    MergeReport,
    SavedModelInfo,
    SplitReport,
    VerifyReport,
)
from unbound._splitter import (
    DEFAULT_MAX_SIZE,
    ComposableSplitter,
    Merger,
    Splitter,
    TensorFlowCompatibilityWarning,
    message_class,
)

__all__ = [
    "DEFAULT_MAX_SIZE",
    "split",
    "merge",
    "externalize",
    "DEFAULT_EXTERNALIZE_MIN_SIZE",
    "show",
    "inspect",
    "verify",
    "fingerprint",
    "read_message",
    "Splitter",
    "ComposableSplitter",
    "Merger",
    "TensorFlowCompatibilityWarning",
    *_reports_all,
]

PathLike = Union[str, "os.PathLike[str]"]


def split(
    src_dir: PathLike,
    out_dir: PathLike,
    max_size: int = DEFAULT_MAX_SIZE,
    compression: str = "zstd",
) -> SplitReport:
    """Writes `out_dir` as an image-format copy of the SavedModel in `src_dir`
    (``unbound split``).

    The model becomes ``out_dir/saved_model.cpb`` with TensorFlow's SavedModel splitting
    algorithm (or ``saved_model.pb`` when nothing needs splitting); variables, assets and every
    other file are carried over and a fresh ``fingerprint.pb`` is written. The directory
    appears atomically. A source that ``verify`` rejects is refused.

    Args:
      src_dir: the SavedModel directory to read (``saved_model.cpb``, ``.pb`` or ``.pbtxt``).
      out_dir: the directory to create; it must not exist.
      max_size: the largest chunk, in bytes (default 1 GiB, TensorFlow's).
      compression: record compression: ``"zstd"`` (default), ``"brotli"`` (what TensorFlow
        writes), ``"snappy"`` or ``"none"``.

    Returns:
      What was written.
    """
    return SplitReport.from_json(_unbound.split(src_dir, out_dir, max_size, compression))


def merge(src_dir: PathLike, out_dir: PathLike) -> MergeReport:
    """Writes `out_dir` as a copy of the SavedModel in `src_dir` with its model as one
    ``saved_model.pb`` (``unbound merge``); refuses with :class:`unbound.TooLargeError` when the
    model would pass protobuf's 2 GiB - 1.
    """
    return MergeReport.from_json(_unbound.merge(src_dir, out_dir))


DEFAULT_EXTERNALIZE_MIN_SIZE: int = _unbound.DEFAULT_EXTERNALIZE_MIN_SIZE


def externalize(
    src_dir: PathLike,
    out_dir: PathLike,
    min_size: int = DEFAULT_EXTERNALIZE_MIN_SIZE,
    dry_run: bool = False,
    inline: bool = False,
) -> ExternalizeReport:
    """Writes `out_dir` as the SavedModel in `src_dir` with every constant of at least
    `min_size` bytes moved into a new variable (``unbound externalize``): the model becomes a
    small ``saved_model.pb`` that every TensorFlow loader reads (C++ ``LoadSavedModel`` and
    TensorFlow Serving, ``tf.saved_model.load``, the TF1 loader), the values go to
    ``out_dir/variables/`` beside the model's own variables.

    Args:
      src_dir: the SavedModel directory to read (``.pb`` or ``.cpb``; TF1 or TF2).
      out_dir: the directory to create; it must not exist (not created with `dry_run`).
      min_size: a constant moves when its value is at least this many bytes (default 1 MiB).
      dry_run: only report what would move and the resulting ``saved_model.pb`` size.
      inline: the reverse (``unbound externalize --inline``): the variables the signatures
        only read become constants; the report then lists ``inlined`` and ``kept`` variables,
        ``model_bytes_before``, ``model_bytes_after``, ``chunked`` and ``written``. `min_size`
        does not apply.

    Returns:
      What was moved (or would be), and the model sizes.

    Raises:
      unbound.TooLargeError: the result would still pass protobuf's 2 GiB.
    """
    if inline and min_size != DEFAULT_EXTERNALIZE_MIN_SIZE:
        raise ValueError("min_size does not apply with inline=True")
    return ExternalizeReport.from_json(
        _unbound.externalize(src_dir, out_dir, min_size, dry_run, inline)
    )


def show(dir: PathLike) -> SavedModelInfo:
    """What the SavedModel in `dir` holds (``unbound show --json``): format, sizes, tag-sets,
    signatures with their inputs and outputs, functions, variables, assets."""
    return SavedModelInfo.from_json(_unbound.show(dir))


def inspect(path: PathLike) -> InspectReport:
    """The chunk metadata of the ``.cpb`` file `path` (``unbound inspect --json``), without
    merging it. Damaged chunk data is listed in ``faults`` (the CLI then exits with 1); a file
    whose metadata cannot be read at all raises :class:`unbound.FormatError`."""
    return InspectReport.from_json(_unbound.inspect(path))


def verify(dir: PathLike) -> VerifyReport:
    """Checks the whole SavedModel directory `dir` (``unbound verify``): record hashes, chunk
    metadata, the merge, the variables' CRCs. Problems are returned in ``faults`` (check
    ``report.ok``), not raised."""
    return VerifyReport.from_json(_unbound.verify(dir))


def fingerprint(dir: PathLike) -> FingerprintReport:
    """The ``FingerprintDef`` TensorFlow computes for the SavedModel in `dir`
    (``unbound fingerprint --json``), with a fresh random ``uuid``."""
    text, model_file = _unbound.fingerprint(dir)
    report = FingerprintReport.from_json(text)
    return FingerprintReport(report.to_dict(), model_file)


def read_message(prefix: PathLike, type_name: str, *, as_bytes: bool = False) -> Any:
    """Reads the message of type `type_name` stored under `prefix`, as TensorFlow's
    ``Merger::Read``: ``PREFIX.cpb`` merged if it exists, else ``PREFIX.pb``.

    Returns a parsed protobuf message when the ``protobuf`` package is importable and a
    generated class for `type_name` is registered (any ``*_pb2`` module imported; TensorFlow's
    own modules are tried only when TensorFlow is imported already, never imported here), else
    the serialized bytes. ``as_bytes=True`` always returns bytes.

    Raises:
      TooLargeError: the message is past 2 GiB - 1, which Python's protobuf cannot parse (and
        bytes of it could not be handed to protobuf either).
      InvalidArgumentError: `type_name` is not a type unbound knows (TensorFlow's schemas).
      NotFoundError: neither ``PREFIX.cpb`` nor ``PREFIX.pb`` exists.
      FormatError: the file is damaged.
    """
    data, _ = _unbound.read_message(prefix, type_name)
    if as_bytes:
        return data
    cls = message_class(type_name)
    if cls is None:
        return data
    return cls.FromString(data)

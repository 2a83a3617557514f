"""The exceptions of the `unbound` package.

Every failure raises a subclass of :class:`unbound.Error`, chosen by the kind of fault, with
the message the `unbound` CLI prints (it names the file and the fault). Where a built-in
exception means the same thing, the class derives from it too, so ``except FileNotFoundError``
or ``except KeyError`` keep working.
"""

from __future__ import annotations

__all__ = [
    "Error",
    "FormatError",
    "NotFoundError",
    "OutputExistsError",
    "FileError",
    "TooLargeError",
    "UnsupportedError",
    "InvalidArgumentError",
    "KeyNotFoundError",
    "LayoutError",
    "TensorFlowVersionError",
]


class Error(Exception):
    """Base class of every error `unbound` raises."""


class FormatError(Error, ValueError):
    """An input file is malformed, damaged, or inconsistent (bad protobuf, bad chunk metadata,
    a CRC that does not match, a model that fails `verify`)."""


class NotFoundError(Error, FileNotFoundError):
    """A file or directory the operation needs does not exist (no model file, no index)."""


class OutputExistsError(Error, FileExistsError):
    """The output path exists already: unbound never overwrites an output."""


class FileError(Error, OSError):
    """The operating system refused an operation (permissions, a full disk, a special file)."""


class TooLargeError(Error):
    """The result would pass a hard limit (a merged protobuf past 2 GiB - 1, a decompression
    past its declared size)."""


class UnsupportedError(Error, NotImplementedError):
    """Valid input that unbound does not handle (a dtype with no NumPy equivalent, say)."""


class InvalidArgumentError(Error, ValueError):
    """An argument does not make sense (an unknown message type, an output inside its input)."""


class KeyNotFoundError(Error, KeyError):
    """A checkpoint has no tensor or variable under the key asked for."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable.
        return str(self.args[0]) if self.args else ""


class LayoutError(Error, ValueError):
    """A DTensor mesh, layout or sharding is invalid or does not fit the array."""


class TensorFlowVersionError(Error):
    """The installed TensorFlow lacks the hooks `unbound.tensorflow` relies on."""

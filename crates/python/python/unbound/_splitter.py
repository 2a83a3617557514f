"""The seed's Python Splitter / Merger API, for any protobuf message type.

:class:`Splitter` is TensorFlow's ``ComposableSplitter`` (``tensorflow/tools/proto_splitter/
split.py``): ``split()`` gives ``(chunks, chunked_message)``, ``write(prefix)`` writes
``PREFIX.pb`` (nothing split) or ``PREFIX.cpb`` (a Riegeli file of the chunks and their
``ChunkMetadata``, read by TensorFlow's own C++ ``Merger``). Subclasses override
:meth:`Splitter.build_chunks` and call :meth:`Splitter.add_chunk`; without an override, the
split is made in Rust by the algorithm ``unbound proto split`` uses for the type (TensorFlow's
for ``tensorflow.SavedModel`` and ``tensorflow.GraphDef``, unbound's generic size-driven one for
any other type). :class:`Merger` puts a message back together from chunks in memory or from
``PREFIX.cpb`` / ``PREFIX.pb``, with TensorFlow's merge semantics.

Python holds the messages; Rust does the chunk metadata (field tags from the schema), the
splitting algorithm, the encoding and the writing. Types TensorFlow defines are known to unbound;
for other types the message's own schema (its ``DESCRIPTOR.file`` and dependencies) is sent
along. ``protobuf`` is needed only to pass messages; ``(bytes, "full.type.Name")`` works without.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import warnings
from typing import Any, List, Optional, Sequence, Tuple, Union

from unbound import _unbound
from unbound._errors import InvalidArgumentError, TooLargeError

__all__ = ["Splitter", "ComposableSplitter", "Merger", "TensorFlowCompatibilityWarning"]

DEFAULT_MAX_SIZE: int = _unbound.DEFAULT_MAX_SIZE
"""The largest chunk by default: 1 GiB, as ``unbound split`` and TensorFlow."""

# TensorFlow's generated modules for the message types people read; imported (to find a class
# by name) only when TensorFlow itself is imported already.
_TENSORFLOW_MODULES = (
    "tensorflow.core.framework.graph_pb2",
    "tensorflow.core.framework.function_pb2",
    "tensorflow.core.framework.node_def_pb2",
    "tensorflow.core.framework.tensor_pb2",
    "tensorflow.core.protobuf.saved_model_pb2",
    "tensorflow.core.protobuf.meta_graph_pb2",
    "tensorflow.core.protobuf.saved_object_graph_pb2",
    "tensorflow.core.protobuf.fingerprint_pb2",
    "tensorflow.core.protobuf.struct_pb2",
)


FieldTag = Union[str, int, bool]
"""One element of a path into a message: a field name or number, a repeated-field index, or a
map key (TensorFlow's ``util.FieldTypes``)."""

Chunk = Union[Any, bytes]
"""A chunk: a protobuf message, or bytes (for a string or bytes field)."""

_schemas: dict = {}


class TensorFlowCompatibilityWarning(UserWarning):
    """A split that unbound writes and reads, but that TensorFlow's C++ Merger cannot read."""


def _schema(message: Any) -> Optional[bytes]:
    """The serialized ``FileDescriptorSet`` of `message`'s file and its dependencies (cached per
    file), or None for serialized input."""
    if isinstance(message, tuple):
        return None
    file = message.DESCRIPTOR.file
    cached = _schemas.get(file)  # by the descriptor itself: files of other pools may share a name
    if cached is not None:
        return cached
    from google.protobuf import descriptor_pb2

    files: List[Any] = []
    seen: set = set()

    def visit(f: Any) -> None:
        if f.name in seen:
            return
        seen.add(f.name)
        for dependency in f.dependencies:
            visit(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        f.CopyToProto(proto)
        files.append(proto)

    visit(file)
    data = descriptor_pb2.FileDescriptorSet(file=files).SerializeToString()
    _schemas[file] = data
    return data


def _type_name(message: Any) -> str:
    """The full type name of a message or of a ``(bytes, "full.type.Name")`` pair."""
    if isinstance(message, tuple):
        if len(message) != 2 or not isinstance(message[1], str):
            raise InvalidArgumentError('a serialized message is given as (bytes, "full.type.Name")')
        return message[1]
    try:
        return message.DESCRIPTOR.full_name
    except AttributeError:
        raise InvalidArgumentError(
            f'expected a protobuf message or (bytes, "full.type.Name"), not {type(message).__name__}'
        ) from None


def _serialize(chunk: Any, what: str) -> Tuple[bytes, bool]:
    """A chunk's bytes and whether it is a message (messages serialized deterministically)."""
    if isinstance(chunk, (bytes, bytearray, memoryview)):
        return bytes(chunk), False
    if isinstance(chunk, tuple):
        return bytes(chunk[0]), True
    try:
        return chunk.SerializeToString(deterministic=True), True
    except AttributeError:
        raise InvalidArgumentError(
            f"{what} is neither bytes nor a protobuf message: {type(chunk).__name__}"
        ) from None
    except Exception as error:  # protobuf refuses messages past 2 GiB.
        raise TooLargeError(
            f"{what} ({chunk.DESCRIPTOR.full_name}) cannot be serialized by protobuf "
            f"(past 2 GiB - 1?): {error}; split it into smaller chunks"
        ) from error


def message_class(full_name: str) -> Optional[type]:
    """The generated protobuf class of `full_name`, or None (no ``protobuf``, or no module
    registered the type). TensorFlow's modules are imported to find it only when TensorFlow is
    imported already."""
    try:
        from google.protobuf import descriptor_pool
    except ImportError:
        return None
    pool = descriptor_pool.Default()

    def find() -> Any:
        try:
            return pool.FindMessageTypeByName(full_name)
        except KeyError:
            return None

    desc = find()
    if desc is None and "tensorflow" in sys.modules:
        for name in _TENSORFLOW_MODULES:
            try:
                importlib.import_module(name)
            except ImportError:
                continue
        desc = find()
    if desc is None:
        return None
    return class_of(desc)


def class_of(desc: Any) -> type:
    """The message class of the protobuf descriptor `desc` (every protobuf release since 3)."""
    from google.protobuf import message_factory

    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(desc.file.pool).GetPrototype(desc)  # pragma: no cover


@functools.lru_cache(maxsize=None)
def chunked_message_class() -> Optional[type]:
    """The class of ``tensorflow.proto_splitter.ChunkedMessage``: a registered one if any
    module provides it, else one built from unbound's own copy of the schema in a private
    descriptor pool (TensorFlow's wheel ships no ``chunk_pb2``); None without ``protobuf``."""
    name = "tensorflow.proto_splitter.ChunkedMessage"
    cls = message_class(name)
    if cls is not None:
        return cls
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool
    except ImportError:
        return None
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(_unbound.chunk_schema()).file:
        pool.Add(file)
    return class_of(pool.FindMessageTypeByName(name))


class Splitter:
    """Splits one protobuf message into chunks and writes them (TensorFlow's
    ``ComposableSplitter``).

    Args:
      proto: the message to split: a protobuf message, or ``(bytes, "full.type.Name")``.
      proto_as_initial_chunk: whether the message itself is chunk 0 (the root of the chunked
        message); without it the root has no chunk and every part comes from ``add_chunk``.
      parent_splitter: the splitter this one works for: its chunks go to the parent, at
        `fields_in_parent` (a child's ``split``/``write`` may not be called).
      fields_in_parent: the path of `proto` inside the parent's message, e.g.
        ``["meta_graphs", 0, "graph_def"]``.
      max_size: the largest chunk the default :meth:`build_chunks` makes (default 1 GiB).
      compression: record compression of ``write``: ``"zstd"`` (default), ``"brotli"`` (what
        TensorFlow writes), ``"snappy"`` or ``"none"``; TensorFlow's Merger reads each.

    To split your own way, override :meth:`build_chunks` and call :meth:`add_chunk` for each
    piece you take out of the message (clearing it there), as TensorFlow's splitters do::

        class NodeSplitter(unbound.Splitter):
            def build_chunks(self):
                for i, node in enumerate(self._proto.node):
                    self.add_chunk(node.attr["value"].tensor.tensor_content,
                                   ["node", i, "attr", "value", "tensor", "tensor_content"])
                    node.attr["value"].tensor.ClearField("tensor_content")
    """

    def __init__(
        self,
        proto: Any,
        *,
        proto_as_initial_chunk: bool = True,
        parent_splitter: Optional["Splitter"] = None,
        fields_in_parent: Optional[Sequence[FieldTag]] = None,
        max_size: int = DEFAULT_MAX_SIZE,
        compression: str = "zstd",
    ) -> None:
        self._proto = proto
        self._type = _type_name(proto)
        self._parent_splitter = parent_splitter
        self._fields_in_parent: List[FieldTag] = list(fields_in_parent or [])
        self._proto_as_initial_chunk = proto_as_initial_chunk
        self._max_size = max_size
        self._compression = compression
        self._built = False
        self._chunked_message: Optional[bytes] = None
        self._kinds: Optional[List[bool]] = None
        self.warnings: List[str] = []
        """Where the default algorithm's split differs from TensorFlow's (filled by it)."""
        if parent_splitter is not None:
            self._chunks: Optional[List[Chunk]] = None
            self._sink = None
        else:
            self._chunks = [proto] if proto_as_initial_chunk else []
            self._sink = _unbound.ChunkSink(self._type, proto_as_initial_chunk, _schema(proto))

    def build_chunks(self) -> None:
        """Fills the chunks from the message; :meth:`split` and :meth:`write` call it once.

        Subclasses override it and call :meth:`add_chunk`. The default splits in Rust until
        every chunk fits `max_size`, with the algorithm ``unbound proto split`` uses for the
        type; its chunks are bytes (chunk 0 is the reduced message, serialized), and the
        message passed in is left as it was. It always makes the message chunk 0.
        """
        if self._parent_splitter is not None:
            raise NotImplementedError(
                "the default build_chunks splits a whole message; a child splitter "
                "(parent_splitter=...) must override build_chunks"
            )
        data, _ = _serialize(self._proto, "the message")
        chunks, chunked_message, self.warnings = _unbound.split_message(
            self._type, data, self._max_size, _schema(self._proto)
        )
        self._chunks = [chunk for chunk, _ in chunks]
        self._kinds = [is_message for _, is_message in chunks]
        self._chunked_message = chunked_message

    def add_chunk(self, chunk: Chunk, field_tags: Sequence[FieldTag], index: Optional[int] = None) -> None:
        """Adds a chunk and records where it goes.

        Args:
          chunk: a protobuf message or bytes. It is serialized when the split is written, so it
            may still be filled after it is added.
          field_tags: where the chunk goes, relative to this splitter's message: field names or
            numbers, indices after repeated fields, keys after map fields. ``[]`` means the
            chunk is of the message's own type and is merged into it (appending repeated
            fields).
          index: the chunk's position in the chunk list (inserted there), instead of last.
            Chunk order is merge order among chunks with equal paths.
        """
        if self._parent_splitter is not None:
            self._parent_splitter.add_chunk(chunk, self._fields_in_parent + list(field_tags), index)
            return
        if self._built or self._sink is None or self._chunks is None:
            raise InvalidArgumentError("add_chunk after the split was made")
        if index is not None and index < 0:  # as list.insert counts from the end
            index = max(0, len(self._chunks) + index)
        at_element = self._sink.add_chunk(list(field_tags), index)
        if at_element and isinstance(chunk, (bytes, bytearray, memoryview)):
            warnings.warn(
                f"a bytes chunk at {list(field_tags)!r}, a repeated element or map value: "
                "TensorFlow's C++ Merger aborts on such a file (it takes bytes chunks only for "
                "singular fields); unbound's Merger reads it",
                TensorFlowCompatibilityWarning,
                stacklevel=2,
            )
        if index is None:
            self._chunks.append(chunk)
        else:
            self._chunks.insert(index, chunk)

    def _build(self) -> None:
        if self._parent_splitter is not None:
            raise InvalidArgumentError(
                "a child splitter's chunks belong to its parent: call the parent's split() or write()"
            )
        if not self._built:
            self.build_chunks()
            if self._chunked_message is None:
                assert self._sink is not None
                self._chunked_message = self._sink.finish()
            elif not isinstance(self._chunked_message, bytes):  # set as a message by a subclass
                self._chunked_message = self._chunked_message.SerializeToString()
            self._built = True

    def split(self) -> Tuple[List[Chunk], Any]:
        """The chunks and the ``ChunkedMessage`` placing them.

        Returns:
          ``(chunks, chunked_message)``: chunks as messages or bytes, in file order;
          `chunked_message` as a ``tensorflow.proto_splitter.ChunkedMessage`` message when
          ``protobuf`` is importable (a registered class, else one unbound builds from its
          schema), else its serialized bytes.
        """
        self._build()
        assert self._chunks is not None and self._chunked_message is not None
        cls = chunked_message_class()
        message = self._chunked_message if cls is None else cls.FromString(self._chunked_message)
        return self._chunks, message

    def write(self, file_prefix: Union[str, "os.PathLike[str]"]) -> str:
        """Writes the split: ``file_prefix.pb`` (the message, serialized deterministically)
        when nothing was chunked, else ``file_prefix.cpb``. The file is written to a
        temporary name and renamed into place, replacing one of the same name as TensorFlow's
        ``write`` does; Ctrl-C leaves nothing behind.

        Returns:
          The path written.
        """
        if not self._built and self._parent_splitter is None and type(self).build_chunks is Splitter.build_chunks:
            # The default algorithm, chunks never asked for: split and write in one go in Rust,
            # without copying every chunk into Python bytes.
            data, _ = _serialize(self._proto, "the message")
            path, self.warnings = _unbound.split_and_write(
                self._type, data, os.fspath(file_prefix), self._max_size, self._compression, _schema(self._proto)
            )
            return path
        self._build()
        assert self._chunks is not None and self._chunked_message is not None
        chunks = []
        for i, chunk in enumerate(self._chunks):
            data, is_message = _serialize(chunk, f"chunk {i}")
            if self._kinds is not None:
                is_message = self._kinds[i]
            chunks.append((data, is_message))
        return _unbound.write_chunks(os.fspath(file_prefix), chunks, self._chunked_message, self._compression)


ComposableSplitter = Splitter
"""TensorFlow's name for :class:`Splitter`."""


class Merger:
    """Puts a split message back together, with TensorFlow's merge semantics
    (``tensorflow/tools/proto_splitter/merge.cc``)."""

    @staticmethod
    def merge(chunks: Sequence[Chunk], chunked_message: Any, message: Any) -> None:
        """Merges `chunks` as `chunked_message` places them into `message`
        (TensorFlow's ``Merger::Merge``).

        Args:
          chunks: the chunks, messages or bytes, as :meth:`Splitter.split` gives them.
          chunked_message: a ``ChunkedMessage`` message, or its serialized bytes.
          message: the message to fill (merged into, as ``MergeFromString``).

        Raises:
          TooLargeError: the merged message would pass 2 GiB - 1, which protobuf cannot parse.
          FormatError: the chunks do not fit the metadata.
        """
        data = [_serialize(chunk, f"chunk {i}")[0] for i, chunk in enumerate(chunks)]
        if not isinstance(chunked_message, (bytes, bytearray, memoryview)):
            chunked_message = chunked_message.SerializeToString()
        merged = _unbound.merge_chunks(_type_name(message), data, bytes(chunked_message), _schema(message))
        message.MergeFromString(merged)

    @staticmethod
    def read(prefix: Union[str, "os.PathLike[str]"], message: Any) -> None:
        """Reads ``prefix.cpb`` (merged, if it exists) or else ``prefix.pb`` into `message`
        (TensorFlow's ``Merger::Read``: a ``.pb`` replaces the message's contents, a ``.cpb``
        is merged into it).

        Raises:
          NotFoundError: neither file exists.
          TooLargeError: the message would pass 2 GiB - 1.
          FormatError: the file is damaged.
        """
        data, format = _unbound.read_into_bytes(os.fspath(prefix), _type_name(message), _schema(message))
        if format == "pb":
            message.ParseFromString(data)
        else:
            message.MergeFromString(data)

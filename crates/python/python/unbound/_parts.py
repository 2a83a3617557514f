"""Protobuf messages of any size handed between Python and Rust by parts.

Python's protobuf runtime (upb) holds a message past 2 GiB in memory, but cannot compute its
``ByteSize()`` or ``SerializeToString()`` it, nor parse one serialization past 2 GiB. Each
part of such a message stays below the limit, so it crosses by parts:

- to Rust, :func:`message_parts` turns a message into a *node*: ``bytes`` (the message
  serialized whole, deterministically) when protobuf can serialize it (at most ``limit``
  bytes, 2 GiB - 1 by default), otherwise a tuple
  ``(shell, children)``: ``shell`` is the message without its message-typed fields (maps stay
  in the shell), serialized, and ``children`` lists ``(field_number, [node, ...])`` for those
  fields, elements in order. Rust inserts each child field where its number goes, which gives
  exactly the bytes of a whole deterministic serialization (deterministic serialization writes
  fields in field-number order);
- from Rust, :func:`apply_steps` merges ``(path, bytes)`` steps into a message: ``path`` is a
  list of ``(field_number, index)`` from the root (index ``-1`` for a singular field) and
  ``bytes`` a serialization of at most 16 MiB (unless one value is larger) merged
  there with ``MergeFromString``.

Neither side ever serializes the whole message.
"""

from __future__ import annotations

from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union

__all__: List[str] = []

#: Largest part handed over whole: protobuf's own limit, 2 GiB - 1. Whatever protobuf can
#: serialize goes in one piece (splitting it further would only cost time).
PART_LIMIT = (1 << 31) - 1

#: A message by parts: its serialization, or ``(shell, [(field_number, [node, ...]), ...])``.
Node = Union[bytes, Tuple[bytes, List[Tuple[int, List[Any]]]]]


def _serialized(message: Any) -> Optional[bytes]:
    """``message`` serialized deterministically, or ``None`` when protobuf refuses (past
    2 GiB). ``ByteSize()`` would cost as much as serializing: upb computes it by encoding."""
    try:
        return message.SerializeToString(deterministic=True)
    except Exception:  # upb's EncodeError; the type is not part of protobuf's API.
        return None


def _is_message_field(field: Any) -> bool:
    """Whether ``field`` is a message-typed field that is not a map."""
    message_type = field.message_type
    return message_type is not None and not message_type.GetOptions().map_entry


def _copy_field(target: Any, field: Any, value: Any) -> None:
    """Sets ``field`` of ``target`` to ``value`` (a scalar, repeated scalar or map field)."""
    if field.message_type is not None:  # a map
        container = getattr(target, field.name)
        value_field = field.message_type.fields_by_name["value"]
        for key in value:
            if value_field.message_type is not None:
                container[key].CopyFrom(value[key])
            else:
                container[key] = value[key]
    elif field.is_repeated:
        getattr(target, field.name).extend(value)
    else:
        setattr(target, field.name, value)


def message_parts(message: Any, limit: int = PART_LIMIT) -> Node:
    """The node of ``message`` (see the module documentation): parts of at most ``limit``
    bytes are serialized whole, larger ones (and any protobuf cannot serialize) are cut at
    their message-typed fields."""
    data = _serialized(message)
    if data is not None and len(data) <= limit:
        return data
    del data
    shell = type(message)()
    children: List[Tuple[int, List[Any]]] = []
    for field, value in message.ListFields():
        if _is_message_field(field):
            elements: Sequence[Any] = value if field.is_repeated else [value]
            children.append((field.number, [message_parts(e, limit) for e in elements]))
        else:
            _copy_field(shell, field, value)
    return (shell.SerializeToString(deterministic=True), children)


def apply_steps(message: Any, steps: Iterable[Tuple[Sequence[Tuple[int, int]], bytes]]) -> Any:
    """Merges each ``(path, bytes)`` step into ``message`` (see the module documentation) and
    returns ``message``."""
    for path, data in steps:
        target = message
        for number, index in path:
            field = target.DESCRIPTOR.fields_by_number[number]
            value = getattr(target, field.name)
            target = value[index] if index >= 0 else value
        target.MergeFromString(data)
        del data
    return message

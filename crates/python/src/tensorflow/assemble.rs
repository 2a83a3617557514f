//! A message handed over by parts, assembled into one [`WireMessage`].
//!
//! Python's protobuf runtime cannot serialize a message past 2 GiB, but it can serialize each
//! of its parts. `unbound/_parts.py` walks the message and hands over a *node*: either `bytes`
//! (a part serialized whole, deterministically) or a tuple `(shell, children)`, where `shell`
//! is the message with its message-typed fields cleared, serialized, and `children` is a list
//! of `(field_number, [node, ...])` holding those fields' values in order.
//!
//! Deterministic serialization writes known fields in field-number order, so inserting each
//! child field at the place its number gives makes the assembled message encode to exactly the
//! bytes a whole `SerializeToString(deterministic=True)` would give (tested in
//! `tests/test_tensorflow_parts.py`). A `bytes` child is kept as the Python object itself
//! (no copy): it becomes a length-delimited value that is parsed only if a splitter needs to
//! look inside it.

use bytes::Bytes;
use prost_reflect::MessageDescriptor;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyList, PyTuple};
use unbound_wire::{Payload, WireField, WireMessage, WireValue};

use crate::errors::{raise, Kind};

/// How deep nodes may nest: far beyond any real message, low enough to never exhaust the
/// stack on a hostile argument.
const MAX_DEPTH: usize = 100;

/// Assembles `node` (see the module documentation) as a message of type `desc`.
pub fn assemble(node: &Bound<'_, PyAny>, desc: &MessageDescriptor) -> PyResult<WireMessage> {
    assemble_at(node, desc, 0)
}

fn assemble_at(
    node: &Bound<'_, PyAny>,
    desc: &MessageDescriptor,
    depth: usize,
) -> PyResult<WireMessage> {
    if depth > MAX_DEPTH {
        return Err(raise(
            Kind::InvalidArgument,
            format!("message parts nest deeper than {MAX_DEPTH} levels"),
        ));
    }
    if let Ok(bytes) = node.cast::<PyBytes>() {
        return parse(&owned(bytes), desc);
    }
    let tuple = node.cast::<PyTuple>().map_err(|_| bad_node(desc))?;
    if tuple.len() != 2 {
        return Err(bad_node(desc));
    }
    let shell = tuple
        .get_item(0)?
        .cast_into::<PyBytes>()
        .map_err(|_| bad_node(desc))?;
    let mut message = parse(&owned(&shell), desc)?;
    let children = tuple
        .get_item(1)?
        .cast_into::<PyList>()
        .map_err(|_| bad_node(desc))?;
    for entry in children.iter() {
        let (number, values): (u32, Bound<'_, PyList>) =
            entry.extract().map_err(|_| bad_node(desc))?;
        let field = desc.get_field(number).ok_or_else(|| {
            raise(
                Kind::InvalidArgument,
                format!("{} has no field number {number}", desc.full_name()),
            )
        })?;
        let prost_reflect::Kind::Message(child_desc) = field.kind() else {
            return Err(raise(
                Kind::InvalidArgument,
                format!(
                    "field {} of {} is not a message field",
                    field.name(),
                    desc.full_name()
                ),
            ));
        };
        for value in values.iter() {
            let value = match value.cast::<PyBytes>() {
                Ok(bytes) => WireValue::Bytes(Payload::Inline(owned(bytes))),
                Err(_) => WireValue::Message(assemble_at(&value, &child_desc, depth + 1)?),
            };
            message.fields.push(WireField { number, value });
        }
    }
    // Known fields by number, then unknown ones, each group keeping its order: the order
    // deterministic serialization writes (a stable sort keeps repeated elements in order).
    message
        .fields
        .sort_by_key(|f| (desc.get_field(f.number).is_none(), f.number));
    Ok(message)
}

/// The Python `bytes` object's contents, shared (not copied) for as long as Rust holds them.
fn owned(bytes: &Bound<'_, PyBytes>) -> Bytes {
    Bytes::from_owner(PyBackedBytes::from(bytes.clone()))
}

/// Parses one level of `bytes` as a `desc` message.
fn parse(bytes: &Bytes, desc: &MessageDescriptor) -> PyResult<WireMessage> {
    WireMessage::parse(bytes, Some(desc.clone())).map_err(|e| {
        raise(
            Kind::Format,
            format!(
                "a serialized part of {} is malformed: {e}",
                desc.full_name()
            ),
        )
    })
}

/// The error for a node of the wrong shape.
fn bad_node(desc: &MessageDescriptor) -> PyErr {
    raise(
        Kind::InvalidArgument,
        format!(
            "a part of {} is neither bytes nor (bytes, [(field_number, [part, ...]), ...])",
            desc.full_name()
        ),
    )
}

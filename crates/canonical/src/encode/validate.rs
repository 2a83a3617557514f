//! What protobuf C++ checks when it parses, for the occurrences the canonical form leaves out.
//!
//! The validating encoder ([`crate::encode_to_vec_validated`]) refuses what protobuf C++
//! refuses to parse, so that its output can be taken as the canonical form of a model
//! TensorFlow reads, with no second check of it. Most of that it checks on the way, as it
//! writes each occurrence; but C++ parses every occurrence, also one the canonical form leaves
//! out: a singular string or number overridden by a later occurrence, a oneof member replaced
//! by another, a map entry replaced by a later one of the same key. Those are checked here,
//! read and not written: each field read as C++ reads it (a known number with another wire
//! type is an unknown field, not looked into), strings UTF-8, packed runs whole, nested
//! messages likewise, each map entry one more level of nesting (C++ parses an entry as a
//! message of its own), at most [`MAX_DEPTH`] levels.

use unbound_wire::codec::{is_utf8, read_field, read_varint};
use unbound_wire::DecodeError;

use super::MAX_DEPTH;
use crate::error::{CanonicalError, Result};
use crate::schema::{Class, Field, MapField, MessageType, Schema, TypeId};

/// Checks `bytes`, a serialized message of type `ty` at nesting `depth` (the root at 0).
pub(super) fn message(schema: &Schema, ty: TypeId, bytes: &[u8], depth: usize) -> Result<()> {
    let t = schema.get(ty);
    if depth > MAX_DEPTH {
        return Err(too_deep(t));
    }
    let mut pos = 0;
    while pos < bytes.len() {
        let raw = read_field(bytes, &mut pos).map_err(|error| malformed(t, error))?;
        let wire = raw.wire_type.bits() as u8;
        let Some(i) = t.index(raw.number) else {
            continue;
        };
        let f = &t.fields[i as usize];
        if wire == 2 && f.class.takes(wire, f.list) {
            occurrence(schema, t, f, &bytes[raw.start..raw.end], depth)?;
        }
    }
    Ok(())
}

/// Checks one length-delimited occurrence `data` of known field `f` of a message of type `t`
/// at nesting `depth` (a scalar read with its own wire type has nothing to check).
pub(super) fn occurrence(
    schema: &Schema,
    t: &MessageType,
    f: &Field,
    data: &[u8],
    depth: usize,
) -> Result<()> {
    if let Some(map) = &f.map {
        return entry(schema, t, f, map, data, depth);
    }
    match f.class {
        Class::Message => {
            let child = f.child.expect("a message field has a type");
            message(schema, child, data, depth + 1)
        }
        Class::Bytes => utf8(f.utf8, t, f.number, data),
        Class::Fixed32 | Class::Fixed64 => {
            let width = if f.class == Class::Fixed32 { 4 } else { 8 };
            if data.len() % width == 0 {
                Ok(())
            } else {
                Err(packed_fault(
                    t,
                    f.number,
                    "run is not a whole number of values",
                ))
            }
        }
        Class::Varint(_) => {
            let mut pos = 0;
            while pos < data.len() {
                read_varint(data, &mut pos).map_err(|e| packed_fault(t, f.number, &e.fault))?;
            }
            Ok(())
        }
        Class::Group => Ok(()),
    }
}

/// Checks one entry `data` of map field `f` of a message of type `t` at nesting `depth`: the
/// entry one level below that message, its value message one more.
fn entry(
    schema: &Schema,
    t: &MessageType,
    f: &Field,
    map: &MapField,
    data: &[u8],
    depth: usize,
) -> Result<()> {
    if depth + 1 > MAX_DEPTH {
        return Err(too_deep(t));
    }
    let mut pos = 0;
    while pos < data.len() {
        let raw = read_field(data, &mut pos).map_err(|error| malformed(t, error))?;
        let wire = raw.wire_type.bits() as u8;
        let value = &data[raw.start..raw.end];
        match raw.number {
            1 if wire == 2 && map.key.takes(wire, false) => {
                utf8(map.key_utf8, t, f.number, value)?;
            }
            2 if wire == 2 && map.value.takes(wire, false) => match map.value {
                Class::Message => {
                    let child = f.child.expect("a message-valued map has a value type");
                    message(schema, child, value, depth + 2)?;
                }
                _ => utf8(map.value_utf8, t, f.number, value)?,
            },
            _ => {}
        }
    }
    Ok(())
}

/// `Ok` unless `string` is set and `data` is not UTF-8 (field `number` of `t`).
#[inline]
pub(super) fn utf8(string: bool, t: &MessageType, number: u32, data: &[u8]) -> Result<()> {
    if !string || is_utf8(data) {
        Ok(())
    } else {
        Err(not_utf8(t, number))
    }
}

#[cold]
pub(super) fn not_utf8(t: &MessageType, number: u32) -> CanonicalError {
    CanonicalError::NotUtf8 {
        type_name: t.name.clone(),
        number,
    }
}

#[cold]
pub(super) fn too_deep(t: &MessageType) -> CanonicalError {
    CanonicalError::TooDeep {
        type_name: t.name.clone(),
        limit: MAX_DEPTH,
    }
}

#[cold]
fn malformed(t: &MessageType, error: DecodeError) -> CanonicalError {
    CanonicalError::Malformed {
        type_name: t.name.clone(),
        error,
    }
}

#[cold]
fn packed_fault(t: &MessageType, number: u32, fault: &str) -> CanonicalError {
    malformed(
        t,
        DecodeError::new(0, format!("packed field {number}: {fault}")),
    )
}

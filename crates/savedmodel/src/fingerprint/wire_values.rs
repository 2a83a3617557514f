//! Scalar values at the wire level: which wire type a field takes, how C++ normalizes what it
//! reads (varints by type, packed runs), and how it writes scalars and unknown fields.

use prost_reflect::{FieldDescriptor, Kind};
use unbound_chunked::{ChunkedError, Result, WireField, WireValue};

use super::rope::Rope;

pub(super) const VARINT: u8 = 0;
pub(super) const FIXED64: u8 = 1;
pub(super) const LEN: u8 = 2;
pub(super) const START_GROUP: u8 = 3;
pub(super) const END_GROUP: u8 = 4;
pub(super) const FIXED32: u8 = 5;

/// How a field's values are read and written.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    /// Varint with its normalization.
    Varint(VarintKind),
    Fixed32,
    Fixed64,
    /// String or bytes.
    Bytes,
    Message,
    /// Groups: kept as unknown fields.
    Group,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum VarintKind {
    /// `int32` and enums: truncated to 32 bits, written sign-extended.
    Int32,
    /// `uint32` and `sint32`: truncated to 32 bits.
    Uint32,
    /// 64-bit kinds: as read.
    Int64,
    Bool,
}

impl VarintKind {
    pub(super) fn normalize(self, v: u64) -> u64 {
        match self {
            VarintKind::Int32 => v as u32 as i32 as i64 as u64,
            VarintKind::Uint32 => u64::from(v as u32),
            VarintKind::Int64 => v,
            VarintKind::Bool => u64::from(v != 0),
        }
    }
}

pub(super) fn class_of(fd: &FieldDescriptor) -> Class {
    match fd.kind() {
        Kind::Int32 | Kind::Enum(_) => Class::Varint(VarintKind::Int32),
        Kind::Uint32 | Kind::Sint32 => Class::Varint(VarintKind::Uint32),
        Kind::Int64 | Kind::Uint64 | Kind::Sint64 => Class::Varint(VarintKind::Int64),
        Kind::Bool => Class::Varint(VarintKind::Bool),
        Kind::Fixed32 | Kind::Sfixed32 | Kind::Float => Class::Fixed32,
        Kind::Fixed64 | Kind::Sfixed64 | Kind::Double => Class::Fixed64,
        Kind::String | Kind::Bytes => Class::Bytes,
        Kind::Message(_) if fd.is_group() => Class::Group,
        Kind::Message(_) => Class::Message,
    }
}

/// Whether a value read for a field of `class` fits it; otherwise C++ keeps it as unknown.
pub(super) fn fits(class: Class, list: bool, value: &WireValue) -> bool {
    match (class, value) {
        (Class::Varint(_), WireValue::Varint(_))
        | (Class::Fixed32, WireValue::Fixed32(_))
        | (Class::Fixed64, WireValue::Fixed64(_))
        | (Class::Bytes, WireValue::Bytes(_) | WireValue::Message(_))
        | (Class::Message, WireValue::Bytes(_) | WireValue::Message(_)) => true,
        // A packed run of a repeated numeric field.
        (Class::Varint(_) | Class::Fixed32 | Class::Fixed64, WireValue::Bytes(_)) => list,
        _ => false,
    }
}

/// The numbers a value holds: one, or a packed run.
pub(super) fn numbers(class: Class, value: &WireValue, out: &mut Vec<u64>) -> Result<()> {
    match (class, value) {
        (Class::Varint(k), WireValue::Varint(v)) => out.push(k.normalize(*v)),
        (Class::Fixed32, WireValue::Fixed32(v)) => out.push(u64::from(*v)),
        (Class::Fixed64, WireValue::Fixed64(v)) => out.push(*v),
        (_, WireValue::Bytes(p)) => {
            let bytes = p.bytes()?;
            let bad = |fault: &str| ChunkedError::Wire {
                source_name: "packed field being fingerprinted".to_string(),
                error: unbound_chunked::WireError::new(0, fault),
            };
            match class {
                Class::Varint(k) => {
                    let mut pos = 0;
                    while pos < bytes.len() {
                        let v = unbound_chunked::wire::read_varint(&bytes, &mut pos).map_err(
                            |error| ChunkedError::Wire {
                                source_name: "packed field being fingerprinted".to_string(),
                                error,
                            },
                        )?;
                        out.push(k.normalize(v));
                    }
                }
                Class::Fixed32 => {
                    if bytes.len() % 4 != 0 {
                        return Err(bad("packed fixed32 run is not a multiple of 4 bytes"));
                    }
                    out.extend(
                        bytes
                            .chunks_exact(4)
                            .map(|c| u64::from(u32::from_le_bytes(c.try_into().expect("4")))),
                    );
                }
                _ => {
                    if bytes.len() % 8 != 0 {
                        return Err(bad("packed fixed64 run is not a multiple of 8 bytes"));
                    }
                    out.extend(
                        bytes
                            .chunks_exact(8)
                            .map(|c| u64::from_le_bytes(c.try_into().expect("8"))),
                    );
                }
            }
        }
        _ => {}
    }
    Ok(())
}

pub(super) fn put_number(number: u32, class: Class, v: u64, out: &mut Rope) {
    match class {
        Class::Fixed32 => {
            out.put_key(number, FIXED32);
            out.put(&(v as u32).to_le_bytes());
        }
        Class::Fixed64 => {
            out.put_key(number, FIXED64);
            out.put(&v.to_le_bytes());
        }
        _ => {
            out.put_key(number, VARINT);
            out.put_varint(v);
        }
    }
}

pub(super) fn put_numbers(number: u32, class: Class, packed: bool, items: &[u64], out: &mut Rope) {
    if items.is_empty() {
        return;
    }
    if !packed {
        for &v in items {
            put_number(number, class, v, out);
        }
        return;
    }
    let mut body = Rope::new();
    for &v in items {
        match class {
            Class::Fixed32 => body.put(&(v as u32).to_le_bytes()),
            Class::Fixed64 => body.put(&v.to_le_bytes()),
            _ => body.put_varint(v),
        }
    }
    out.put_key(number, LEN);
    out.put_varint(body.len());
    out.append(body);
}

/// An unknown field, re-encoded as C++'s `UnknownFieldSet` writes it.
pub(super) fn put_unknown(field: &WireField, out: &mut Rope) -> Result<()> {
    match &field.value {
        WireValue::Varint(v) => {
            out.put_key(field.number, VARINT);
            out.put_varint(*v);
        }
        WireValue::Fixed64(v) => {
            out.put_key(field.number, FIXED64);
            out.put(&v.to_le_bytes());
        }
        WireValue::Fixed32(v) => {
            out.put_key(field.number, FIXED32);
            out.put(&v.to_le_bytes());
        }
        WireValue::Bytes(p) => {
            out.put_key(field.number, LEN);
            out.put_varint(p.len());
            out.put_payload(p);
        }
        WireValue::Message(m) => {
            let bytes = m.to_vec()?;
            out.put_key(field.number, LEN);
            out.put_varint(bytes.len() as u64);
            out.put(&bytes);
        }
        WireValue::Group(g) => {
            out.put_key(field.number, START_GROUP);
            out.put(g);
            out.put_key(field.number, END_GROUP);
        }
    }
    Ok(())
}

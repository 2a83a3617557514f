//! Scalar values at the wire level: which wire type a field takes, how C++ normalizes what it
//! reads (varints by type, packed runs), and how it writes scalars and unknown fields.

use crate::{Result, SavedModelError};
use prost_reflect::{FieldDescriptor, Kind};
use unbound_wire::codec::read_varint;

use super::fields::Val;
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
pub(super) fn fits(class: Class, list: bool, value: Val<'_>) -> bool {
    match (class, value) {
        (Class::Varint(_), Val::Varint(_))
        | (Class::Fixed32, Val::Fixed32(_))
        | (Class::Fixed64, Val::Fixed64(_)) => true,
        (Class::Bytes | Class::Message, v) => v.is_len(),
        // A packed run of a repeated numeric field.
        (Class::Varint(_) | Class::Fixed32 | Class::Fixed64, v) => list && v.is_len(),
        _ => false,
    }
}

fn packed_error(fault: impl Into<String>) -> SavedModelError {
    SavedModelError::malformed(
        "packed field being fingerprinted",
        unbound_wire::DecodeError::new(0, fault),
    )
}

/// The one number a scalar value holds (normalized); 0 for a value that holds none.
pub(super) fn number(class: Class, value: Val<'_>) -> u64 {
    match (class, value) {
        (Class::Varint(k), Val::Varint(v)) => k.normalize(v),
        (Class::Fixed32, Val::Fixed32(v)) => u64::from(v),
        (Class::Fixed64, Val::Fixed64(v)) => v,
        _ => 0,
    }
}

/// Calls `f` with each number of a packed run (normalized).
fn for_each_packed(class: Class, run: &[u8], mut f: impl FnMut(u64)) -> Result<()> {
    match class {
        Class::Varint(k) => {
            let mut pos = 0;
            while pos < run.len() {
                let v = read_varint(run, &mut pos).map_err(|error| {
                    SavedModelError::malformed("packed field being fingerprinted", error)
                })?;
                f(k.normalize(v));
            }
        }
        Class::Fixed32 => {
            if run.len() % 4 != 0 {
                return Err(packed_error(
                    "packed fixed32 run is not a multiple of 4 bytes",
                ));
            }
            for c in run.chunks_exact(4) {
                f(u64::from(u32::from_le_bytes(
                    c.try_into().expect("4 bytes"),
                )));
            }
        }
        _ => {
            if run.len() % 8 != 0 {
                return Err(packed_error(
                    "packed fixed64 run is not a multiple of 8 bytes",
                ));
            }
            for c in run.chunks_exact(8) {
                f(u64::from_le_bytes(c.try_into().expect("8 bytes")));
            }
        }
    }
    Ok(())
}

fn put_value(class: Class, v: u64, out: &mut Rope) {
    match class {
        Class::Fixed32 => out.put(&(v as u32).to_le_bytes()),
        Class::Fixed64 => out.put(&v.to_le_bytes()),
        _ => out.put_varint(v),
    }
}

/// Writes one scalar field.
pub(super) fn put_number(number: u32, class: Class, v: u64, out: &mut Rope) {
    let wire_type = match class {
        Class::Fixed32 => FIXED32,
        Class::Fixed64 => FIXED64,
        _ => VARINT,
    };
    out.put_key(number, wire_type);
    put_value(class, v, out);
}

/// Writes a repeated numeric field from its occurrences (single values and packed runs):
/// packed when the schema says so, one key per value otherwise. Packed fixed-width runs are
/// carried over as they are (shared when large).
pub(super) fn put_repeated(
    number: u32,
    class: Class,
    packed: bool,
    values: &[Val<'_>],
    out: &mut Rope,
) -> Result<()> {
    let mut body = Rope::new();
    for &v in values {
        if !v.is_len() {
            let n = self::number(class, v);
            if packed {
                put_value(class, n, &mut body);
            } else {
                put_number(number, class, n, out);
            }
            continue;
        }
        let bytes;
        let (buf, start, end) = match v {
            Val::Slice(b, s, e) => (b, s, e),
            other => {
                bytes = other.bytes()?.unwrap_or_default();
                (&bytes, 0, bytes.len())
            }
        };
        let run = &buf[start..end];
        if packed && matches!(class, Class::Fixed32 | Class::Fixed64) {
            let width = if class == Class::Fixed32 { 4 } else { 8 };
            if run.len() % width != 0 {
                return Err(packed_error(format!(
                    "packed run of {} bytes is not a multiple of {width}",
                    run.len()
                )));
            }
            body.put_shared(buf, start, end);
            continue;
        }
        for_each_packed(class, run, |n| {
            if packed {
                put_value(class, n, &mut body);
            } else {
                put_number(number, class, n, out);
            }
        })?;
    }
    if packed && !body.is_empty() {
        out.put_key(number, LEN);
        out.put_varint(body.len());
        out.append(body);
    }
    Ok(())
}

/// An unknown field, re-encoded as C++'s `UnknownFieldSet` writes it.
pub(super) fn put_unknown(number: u32, value: Val<'_>, out: &mut Rope) -> Result<()> {
    match value {
        Val::Varint(v) => {
            out.put_key(number, VARINT);
            out.put_varint(v);
        }
        Val::Fixed64(v) => {
            out.put_key(number, FIXED64);
            out.put(&v.to_le_bytes());
        }
        Val::Fixed32(v) => {
            out.put_key(number, FIXED32);
            out.put(&v.to_le_bytes());
        }
        Val::Group(g) => {
            out.put_key(number, START_GROUP);
            out.put(g);
            out.put_key(number, END_GROUP);
        }
        len => {
            out.put_key(number, LEN);
            len.put_len(out)?;
        }
    }
    Ok(())
}

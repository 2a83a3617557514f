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

#[cfg(test)]
mod tests {
    //! Each case is a message protobuf C++ refuses to parse (`interop/noncanonical_check.sh`
    //! checks the same faults against TensorFlow), whose fault lies where the canonical form
    //! leaves it out: the plain encoder accepts it, the validating one refuses it, by the fast
    //! walk and by the general one alike.

    use super::super::{encode_to_vec, Encoder, BUFFER};
    use crate::error::CanonicalError;
    use crate::schema::Schema;
    use crate::sink::Count;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    /// Length-delimited field `number` holding `payload`.
    fn ld(number: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        varint(u64::from(number) << 3 | 2, &mut out);
        varint(payload.len() as u64, &mut out);
        out.extend_from_slice(payload);
        out
    }

    /// Varint field `number` holding `value`.
    fn vi(number: u32, value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        varint(u64::from(number) << 3, &mut out);
        varint(value, &mut out);
        out
    }

    const BAD: &[u8] = b"\xff\xfe";

    fn schema(name: &str) -> Schema {
        let desc = unbound_proto::descriptor_pool()
            .get_message_by_name(name)
            .expect("a known type");
        Schema::new(&desc)
    }

    /// `bytes` (a message of `schema`'s root) encoded validating, by the fast walk or, with
    /// `fast` unset, by the general walk only.
    fn validated(schema: &Schema, bytes: &[u8], fast: bool) -> Result<Vec<u8>, CanonicalError> {
        let mut sink = Count::default();
        let mut enc = Encoder::new(schema, &mut sink);
        enc.validate = true;
        enc.fast_budget = if fast { bytes.len() } else { 0 };
        enc.message::<BUFFER>(&[bytes], schema.root(), 0, true)?;
        Ok(enc.tmp)
    }

    /// `bytes` encodes, and validating refuses it with a fault of string field `number` of
    /// `type_name` on both walks.
    fn refused_as_not_utf8(root: &str, bytes: &[u8], type_name: &str, number: u32) {
        let schema = schema(root);
        assert!(encode_to_vec(&schema, schema.root(), &[bytes]).is_ok());
        for fast in [true, false] {
            match validated(&schema, bytes, fast) {
                Err(CanonicalError::NotUtf8 {
                    type_name: t,
                    number: n,
                }) => assert_eq!((t.as_str(), n), (type_name, number), "fast: {fast}"),
                other => panic!("fast: {fast}: {:?}", other.map(|b| b.len())),
            }
        }
    }

    fn attr_entry(key: &[u8], value: &[u8]) -> Vec<u8> {
        [ld(1, key), ld(2, value)].concat()
    }

    #[test]
    fn a_string_overridden_by_a_later_occurrence_is_checked_too() {
        // In order (the general walk's in-order path) and after another field (collected).
        let node = [ld(1, BAD), ld(1, b"a"), ld(2, b"NoOp")].concat();
        refused_as_not_utf8("tensorflow.NodeDef", &node, "tensorflow.NodeDef", 1);
        let node = [ld(1, BAD), ld(2, b"NoOp"), ld(1, b"a")].concat();
        refused_as_not_utf8("tensorflow.NodeDef", &node, "tensorflow.NodeDef", 1);
    }

    #[test]
    fn a_oneof_member_replaced_by_another_is_checked_too() {
        // `placeholder` (9, a string) then `i` (3): out of order, and the oneof set twice.
        let value = [ld(9, BAD), vi(3, 1)].concat();
        refused_as_not_utf8("tensorflow.AttrValue", &value, "tensorflow.AttrValue", 9);
    }

    #[test]
    fn a_map_entry_replaced_by_a_later_one_of_its_key_is_checked_too() {
        let first = attr_entry(b"x", &ld(9, BAD));
        let second = attr_entry(b"x", &vi(3, 1));
        let node = [ld(1, b"n"), ld(5, &first), ld(5, &second)].concat();
        refused_as_not_utf8("tensorflow.NodeDef", &node, "tensorflow.AttrValue", 9);
        // A key that is not UTF-8.
        let node = [ld(1, b"n"), ld(5, &attr_entry(BAD, &vi(3, 1)))].concat();
        refused_as_not_utf8("tensorflow.NodeDef", &node, "tensorflow.NodeDef", 5);
        // A string value sent twice in one entry (`FunctionDef.ret`: map<string, string>).
        let ret = [ld(1, b"out"), ld(2, BAD), ld(2, b"ok")].concat();
        refused_as_not_utf8(
            "tensorflow.FunctionDef",
            &ld(4, &ret),
            "tensorflow.FunctionDef",
            4,
        );
    }

    #[test]
    fn bytes_need_not_be_utf8() {
        // `AttrValue.s` is `bytes`.
        let schema = schema("tensorflow.AttrValue");
        let value = [ld(2, BAD), ld(2, b"s")].concat();
        for fast in [true, false] {
            assert_eq!(validated(&schema, &value, fast).unwrap(), ld(2, b"s"));
        }
    }

    /// An `AttrValue` nested `levels` times through `func.attr` below one of its own.
    fn nested(levels: usize) -> Vec<u8> {
        let mut value = vi(3, 1);
        for _ in 0..levels {
            let name_attr_list = [ld(1, b"f"), ld(2, &attr_entry(b"a", &value))].concat();
            value = ld(10, &name_attr_list);
        }
        value
    }

    #[test]
    fn each_map_entry_is_a_level_of_nesting() {
        // Each level is an AttrValue, a NameAttrList and (to protobuf C++) a map entry: at
        // 33 levels the deepest value is at 99 counting entries, 66 not; at 34, 102 and 68.
        let schema = schema("tensorflow.AttrValue");
        for fast in [true, false] {
            let within = nested(33);
            assert_eq!(
                validated(&schema, &within, fast).unwrap(),
                encode_to_vec(&schema, schema.root(), &[&within]).unwrap()
            );
            let past = nested(34);
            assert!(encode_to_vec(&schema, schema.root(), &[&past]).is_ok());
            assert!(matches!(
                validated(&schema, &past, fast),
                Err(CanonicalError::TooDeep { limit: 100, .. })
            ));
        }
    }
}

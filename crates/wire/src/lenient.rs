//! Decoding into generated (`prost`) types as protobuf C++ parses: a field whose wire type its
//! declared type cannot take is an unknown field.
//!
//! Protobuf C++ keeps such an occurrence with the unknown fields and parses the rest of the
//! message; `prost` refuses the whole message ("invalid wire type"). TensorFlow loads,
//! fingerprints and serves such a model, so unbound must read it too (issue 29: `show`,
//! `verify`, `split`, `export-tpu` refused models of this kind that TensorFlow reads).
//! [`decode_lenient`] decodes as usual and, only when `prost` refuses, drops the fields of
//! the wrong wire type at every depth ([`without_mismatched_fields`]) and decodes again: the
//! common case pays nothing.

use bytes::Bytes;
use prost_reflect::{DescriptorPool, FieldDescriptor, Kind, MessageDescriptor};

use crate::codec::{put_key, put_varint, read_field, WireType};
use crate::error::DecodeError;

/// Deepest nesting [`without_mismatched_fields`] descends to (protobuf's recursion limit);
/// deeper messages are copied as they are.
const MAX_DEPTH: usize = 100;

/// Decodes `bytes` as `M` as protobuf C++ would: fields of another wire type than their
/// declared type takes are left out (C++ keeps them as unknown fields, which `prost` drops
/// anyway). `M`'s schema is looked up in `pool` by its full name, only when `prost` refuses
/// the bytes. The error is `prost`'s first one when the bytes fail for another reason.
pub fn decode_lenient<M: prost::Message + prost::Name + Default>(
    bytes: impl Into<Bytes>,
    pool: &DescriptorPool,
) -> Result<M, prost::DecodeError> {
    let bytes: Bytes = bytes.into();
    match M::decode(bytes.clone()) {
        Ok(message) => Ok(message),
        Err(first) => {
            let Some(desc) = pool.get_message_by_name(&M::full_name()) else {
                return Err(first);
            };
            match without_mismatched_fields(&bytes, &desc) {
                Ok(Some(cleaned)) => M::decode(Bytes::from(cleaned)).map_err(|_| first),
                _ => Err(first),
            }
        }
    }
}

/// Whether protobuf parses a field occurrence of wire type `wire` as `field` (rather than
/// keeping it as an unknown field): the field's own wire type, or a length-delimited packed
/// run for a repeated numeric field (accepted whether or not the field is declared packed).
pub fn wire_type_takes(field: &FieldDescriptor, wire: WireType) -> bool {
    let len = wire == WireType::Len;
    let own = match field.kind() {
        Kind::Message(_) if field.is_group() => return wire == WireType::StartGroup,
        Kind::Message(_) | Kind::String | Kind::Bytes => return len,
        Kind::Double | Kind::Fixed64 | Kind::Sfixed64 => wire == WireType::Fixed64,
        Kind::Float | Kind::Fixed32 | Kind::Sfixed32 => wire == WireType::Fixed32,
        _ => wire == WireType::Varint,
    };
    own || (len && field.is_list())
}

/// `buf`, a message of type `desc`, without the occurrences of known fields of a wire type
/// their type cannot take ([`wire_type_takes`]), at every depth; `None` when it has none.
pub fn without_mismatched_fields(
    buf: &[u8],
    desc: &MessageDescriptor,
) -> Result<Option<Vec<u8>>, DecodeError> {
    let mut out = Vec::with_capacity(buf.len());
    let changed = strip(buf, desc, &mut out, 0)?;
    Ok(changed.then_some(out))
}

/// Appends `buf` without its mismatched fields to `out`; whether any was left out.
fn strip(
    buf: &[u8],
    desc: &MessageDescriptor,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<bool, DecodeError> {
    let mut changed = false;
    let mut pos = 0;
    while pos < buf.len() {
        let begin = pos;
        let field = read_field(buf, &mut pos)?;
        let raw = &buf[begin..pos];
        let Some(fd) = desc.get_field(field.number) else {
            out.extend_from_slice(raw);
            continue;
        };
        if !wire_type_takes(&fd, field.wire_type) {
            changed = true;
            continue;
        }
        let child = match fd.kind() {
            Kind::Message(child) if field.wire_type == WireType::Len && depth < MAX_DEPTH => child,
            _ => {
                out.extend_from_slice(raw);
                continue;
            }
        };
        let mut inner = Vec::new();
        if strip(&buf[field.start..field.end], &child, &mut inner, depth + 1)? {
            changed = true;
            put_key(field.number, WireType::Len, out);
            put_varint(inner.len() as u64, out);
            out.extend_from_slice(&inner);
        } else {
            out.extend_from_slice(raw);
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    fn descriptor(name: &str) -> MessageDescriptor {
        unbound_proto::descriptor_pool()
            .get_message_by_name(name)
            .unwrap()
    }

    /// A NodeDef with `op` sent as a varint (field 2 is a string) and, inside its attr
    /// entry's AttrValue, `type` (field 6, an enum) as fixed64: protobuf C++ keeps both as
    /// unknown fields and reads the rest; so does `decode_lenient`, where `prost` refuses.
    #[test]
    fn fields_of_another_wire_type_are_left_out_at_every_depth() {
        use unbound_proto::tensorflow::NodeDef;
        let attr_value = [0x31, 1, 2, 3, 4, 5, 6, 7, 8, 0x12, 0x01, b's']; // type: fixed64; s: "s"
        let mut entry = vec![0x0a, 0x01, b'k', 0x12, attr_value.len() as u8];
        entry.extend_from_slice(&attr_value);
        let mut node = vec![0x0a, 0x01, b'n', 0x10, 0x07]; // name "n"; op as varint 7
        node.extend_from_slice(&[0x2a, entry.len() as u8]);
        node.extend_from_slice(&entry);
        let bytes = Bytes::from(node);
        assert!(NodeDef::decode(bytes.clone()).is_err());
        let desc = descriptor("tensorflow.NodeDef");
        let pool = unbound_proto::descriptor_pool();
        let decoded: NodeDef = decode_lenient(bytes.clone(), pool).unwrap();
        assert_eq!(decoded.name, "n");
        assert_eq!(decoded.op, "");
        assert_eq!(
            decoded.attr["k"].value,
            Some(unbound_proto::tensorflow::attr_value::Value::S(
                Bytes::from_static(b"s")
            ))
        );
        // Nothing to leave out: the bytes as they are.
        let clean = NodeDef {
            name: "n".into(),
            ..Default::default()
        };
        assert_eq!(
            without_mismatched_fields(&clean.encode_to_vec(), &desc).unwrap(),
            None
        );
        // Bytes broken otherwise keep prost's error.
        assert!(decode_lenient::<NodeDef>(Bytes::from_static(&[0x0a, 0x05]), pool).is_err());
    }

    #[test]
    fn packed_runs_of_repeated_numbers_are_taken() {
        let tensor = descriptor("tensorflow.TensorProto");
        let int_val = tensor.get_field(7).unwrap();
        assert!(wire_type_takes(&int_val, WireType::Len));
        assert!(wire_type_takes(&int_val, WireType::Varint));
        assert!(!wire_type_takes(&int_val, WireType::Fixed32));
        let dtype = tensor.get_field(1).unwrap();
        assert!(!wire_type_takes(&dtype, WireType::Len));
    }
}

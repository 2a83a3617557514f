//! Typed, mutable access into a [`WireMessage`]: the operations protobuf reflection offers
//! (`MutableMessage`, `MutableRepeatedMessage`, map entries by key, `SetX`, `SetRepeatedX`),
//! carried out on wire-level fields with protobuf's parsing semantics preserved:
//!
//! - several occurrences of a singular message field merge; they are coalesced before a change;
//! - of a oneof, the member that occurs last wins; changing one member drops the others;
//! - of several map entries with one key, the last wins; that one is the one changed;
//! - repeated scalars may be packed or not; an element change re-encodes them as the schema says.

use bytes::Bytes;
use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};

use crate::codec::{self, put_varint};
use crate::error::{Result, WireError};
use crate::message::{Payload, WireField, WireMessage, WireValue};
use crate::scalar::{scalar_wire, ScalarWire};

/// Most missing repeated elements one navigation step creates. TensorFlow's splitters leave
/// placeholders, so a file they wrote never needs more than one; a large number can only come
/// from damaged or hostile metadata and must not become an allocation of that size.
pub const MAX_CREATED_ELEMENTS: u64 = 1 << 16;

impl WireMessage {
    /// Positions of the occurrences of field `number`, in wire order.
    pub fn positions(&self, number: u32) -> Vec<usize> {
        self.fields
            .iter()
            .enumerate()
            .filter(|(_, f)| f.number == number)
            .map(|(i, _)| i)
            .collect()
    }

    /// Positions of the length-delimited occurrences of field `number`, in wire order: the
    /// occurrences of a message field. One of another wire type is an unknown field to
    /// protobuf C++, left where it is.
    pub fn message_positions(&self, number: u32) -> Vec<usize> {
        self.fields
            .iter()
            .enumerate()
            .filter(|(_, f)| f.number == number && is_len(&f.value))
            .map(|(i, _)| i)
            .collect()
    }

    /// Turns the value at `pos` into an expanded message of type `desc` (parsing it if needed)
    /// and returns it.
    pub fn expand_at(&mut self, pos: usize, desc: &MessageDescriptor) -> Result<&mut WireMessage> {
        let field = &mut self.fields[pos];
        let number = field.number;
        let replacement = match &field.value {
            WireValue::Message(_) => None,
            WireValue::Bytes(payload) => Some(parse_payload(payload, desc, number)?),
            _ => {
                return Err(WireError::Schema {
                    message: desc.full_name().to_string(),
                    fault: format!("field {number} holds a scalar where a message was expected"),
                })
            }
        };
        if let Some(m) = replacement {
            field.value = WireValue::Message(m);
        }
        match &mut field.value {
            WireValue::Message(m) => {
                if m.descriptor.is_none() {
                    m.descriptor = Some(desc.clone());
                }
                Ok(m)
            }
            _ => unreachable!("just expanded"),
        }
    }

    /// `MutableMessage`: the (singular) message field `fd`, created if absent, with all its
    /// occurrences merged into one.
    pub fn singular_message_mut(&mut self, fd: &FieldDescriptor) -> Result<&mut WireMessage> {
        let desc = message_type(fd)?;
        self.drop_superseded_oneof_members(fd);
        let positions = self.message_positions(fd.number());
        let pos = match positions.as_slice() {
            [] => {
                self.fields.push(WireField {
                    number: fd.number(),
                    value: WireValue::Message(WireMessage::new(Some(desc.clone()))),
                });
                self.fields.len() - 1
            }
            [one] => *one,
            [first, ..] => {
                let mut merged = WireMessage::new(Some(desc.clone()));
                for &p in &positions {
                    let part = std::mem::replace(&mut self.fields[p].value, WireValue::Varint(0));
                    match part {
                        WireValue::Message(m) => merged.append(m),
                        WireValue::Bytes(payload) => {
                            merged.append(parse_payload(&payload, &desc, fd.number())?)
                        }
                        _ => return Err(scalar_where_message(&desc, fd)),
                    }
                }
                let first = *first;
                self.fields[first].value = WireValue::Message(merged);
                let mut i = 0;
                // The other parts, merged into the first (occurrences of another wire type,
                // unknown fields to protobuf C++, stay).
                let merged_away: std::collections::HashSet<usize> =
                    positions.iter().copied().filter(|&p| p != first).collect();
                self.fields.retain(|_| {
                    let keep = !merged_away.contains(&i);
                    i += 1;
                    keep
                });
                first
            }
        };
        self.expand_at(pos, &desc)
    }

    /// `MutableRepeatedMessage`: element `index` of repeated message field `fd`, appending empty
    /// elements until it exists.
    pub fn repeated_message_mut(
        &mut self,
        fd: &FieldDescriptor,
        index: u64,
    ) -> Result<&mut WireMessage> {
        let desc = message_type(fd)?;
        let positions = self.message_positions(fd.number());
        let count = positions.len() as u64;
        let pos = if index < count {
            positions[index as usize]
        } else {
            if index - count >= MAX_CREATED_ELEMENTS {
                return Err(WireError::Schema {
                    message: fd.parent_message().full_name().to_string(),
                    fault: format!(
                        "index {index} of repeated field {} would create {} missing elements \
                         (it has {count}; at most {MAX_CREATED_ELEMENTS} are created)",
                        fd.name(),
                        index + 1 - count
                    ),
                });
            }
            for _ in count..=index {
                self.fields.push(WireField {
                    number: fd.number(),
                    value: WireValue::Message(WireMessage::new(Some(desc.clone()))),
                });
            }
            self.fields.len() - 1
        };
        self.expand_at(pos, &desc)
    }

    /// Appends a new, empty element to repeated message field `fd`.
    pub fn push_message(&mut self, fd: &FieldDescriptor) -> Result<&mut WireMessage> {
        let desc = message_type(fd)?;
        self.fields.push(WireField {
            number: fd.number(),
            value: WireValue::Message(WireMessage::new(Some(desc))),
        });
        match &mut self.fields.last_mut().expect("just pushed").value {
            WireValue::Message(m) => Ok(m),
            _ => unreachable!("just pushed a message"),
        }
    }

    /// The entry of map field `fd` whose key encodes as `key` (the last such entry, as parsing
    /// keeps the last), created with that key if absent.
    pub fn map_entry_mut(
        &mut self,
        fd: &FieldDescriptor,
        key: &WireValue,
    ) -> Result<&mut WireMessage> {
        let entry_desc = message_type(fd)?;
        let positions = self.message_positions(fd.number());
        let mut found = None;
        for &pos in positions.iter().rev() {
            let entry = self.expand_at(pos, &entry_desc)?;
            if entry_key(entry, &entry_desc)
                .map(|k| same_scalar(&k, key))
                .unwrap_or_else(|| is_default(key))
            {
                found = Some(pos);
                break;
            }
        }
        let pos = match found {
            Some(pos) => pos,
            None => {
                let mut entry = WireMessage::new(Some(entry_desc.clone()));
                entry.fields.push(WireField {
                    number: 1,
                    value: key.clone(),
                });
                self.fields.push(WireField {
                    number: fd.number(),
                    value: WireValue::Message(entry),
                });
                self.fields.len() - 1
            }
        };
        self.expand_at(pos, &entry_desc)
    }

    /// `SetX` for a singular scalar field: replaces every occurrence of its wire type with
    /// `value`.
    pub fn set_scalar(&mut self, fd: &FieldDescriptor, value: WireValue) {
        self.drop_superseded_oneof_members(fd);
        let number = fd.number();
        // Occurrences of another wire type are unknown fields to protobuf C++: kept.
        let replaced =
            |f: &WireField| f.number == number && crate::message::wire_type_fits(fd, &f.value);
        let first = self.fields.iter().position(replaced);
        self.fields.retain(|f| !replaced(f));
        let field = WireField { number, value };
        match first {
            Some(p) => self.fields.insert(p.min(self.fields.len()), field),
            None => self.fields.push(field),
        }
    }

    /// `SetRepeatedX`: replaces element `index` of repeated scalar field `fd`. The element must
    /// exist (TensorFlow's Merger reports an out-of-range index too).
    pub fn set_repeated_scalar(
        &mut self,
        fd: &FieldDescriptor,
        index: u64,
        value: WireValue,
    ) -> Result<()> {
        let number = fd.number();
        let kind = fd.kind();
        let layout =
            scalar_wire(&kind).ok_or_else(|| scalar_where_message(fd.parent_message(), fd))?;
        let mut elements = Vec::new();
        for f in self.fields.iter().filter(|f| f.number == number) {
            match (&f.value, layout) {
                (
                    WireValue::Bytes(p),
                    ScalarWire::Varint | ScalarWire::Fixed32 | ScalarWire::Fixed64,
                ) => unpack(&p.bytes()?, layout, &mut elements).map_err(|e| {
                    WireError::Malformed {
                        source_name: format!("packed field {}", fd.full_name()),
                        error: e,
                    }
                })?,
                (v, _) => elements.push(v.clone()),
            }
        }
        let count = elements.len() as u64;
        if index >= count {
            return Err(WireError::Schema {
                message: fd.parent_message().full_name().to_string(),
                fault: format!(
                    "index {index} is out of range for repeated field {} with {count} elements",
                    fd.name()
                ),
            });
        }
        elements[index as usize] = value;
        let first = self
            .fields
            .iter()
            .position(|f| f.number == number)
            .unwrap_or(self.fields.len());
        self.fields.retain(|f| f.number != number);
        let packed = fd.is_packed() && layout != ScalarWire::Len;
        let new_fields: Vec<WireField> = if packed {
            vec![WireField {
                number,
                value: WireValue::Bytes(Payload::Inline(pack(&elements))),
            }]
        } else {
            elements
                .into_iter()
                .map(|value| WireField { number, value })
                .collect()
        };
        let at = first.min(self.fields.len());
        self.fields.splice(at..at, new_fields);
        Ok(())
    }

    /// If `fd` belongs to a oneof, removes what setting `fd` makes dead: every other member,
    /// and occurrences of `fd` itself that an other member superseded.
    fn drop_superseded_oneof_members(&mut self, fd: &FieldDescriptor) {
        let Some(oneof) = fd.containing_oneof().filter(|o| !o.is_synthetic()) else {
            return;
        };
        let members: Vec<FieldDescriptor> = oneof.fields().collect();
        // An occurrence of a member with another wire type than the member's is an unknown
        // field to protobuf C++: it neither sets the oneof nor is dropped with it.
        let is_member = |f: &WireField| {
            members
                .iter()
                .any(|m| m.number() == f.number && crate::message::wire_type_fits(m, &f.value))
        };
        let last_other = self
            .fields
            .iter()
            .rposition(|f| f.number != fd.number() && is_member(f));
        let Some(last_other) = last_other else {
            return;
        };
        let mut i = 0;
        self.fields.retain(|f| {
            let keep = !is_member(f) || (f.number == fd.number() && i > last_other);
            i += 1;
            keep
        });
    }
}

/// Whether `value` is length-delimited (a message field's own wire type).
fn is_len(value: &WireValue) -> bool {
    matches!(value, WireValue::Bytes(_) | WireValue::Message(_))
}

/// The message type of a message-typed field, or a schema error.
pub fn message_type(fd: &FieldDescriptor) -> Result<MessageDescriptor> {
    match fd.kind() {
        Kind::Message(m) => Ok(m),
        _ => Err(scalar_where_message(fd.parent_message(), fd)),
    }
}

fn scalar_where_message(parent: &MessageDescriptor, fd: &FieldDescriptor) -> WireError {
    WireError::Schema {
        message: parent.full_name().to_string(),
        fault: format!("field {} ({}) is not a message", fd.number(), fd.name()),
    }
}

fn parse_payload(payload: &Payload, desc: &MessageDescriptor, number: u32) -> Result<WireMessage> {
    let bytes = payload.bytes()?;
    WireMessage::parse(&bytes, Some(desc.clone())).map_err(|error| WireError::Malformed {
        source_name: format!("field {number} of type {}", desc.full_name()),
        error,
    })
}

/// The key of map entry `entry` (of type `entry_desc`): its last occurrence of field 1 of the
/// key's wire type (one of another wire type is an unknown field to protobuf C++, which drops
/// it with the entry's other unknown fields).
fn entry_key(entry: &WireMessage, entry_desc: &MessageDescriptor) -> Option<WireValue> {
    let key_fd = entry_desc.map_entry_key_field();
    entry
        .fields
        .iter()
        .rev()
        .find(|f| f.number == 1 && crate::message::wire_type_fits(&key_fd, &f.value))
        .map(|f| f.value.clone())
}

/// Whether a map key equals the type's default (an entry without a key field has it).
fn is_default(key: &WireValue) -> bool {
    match key {
        WireValue::Varint(v) => *v == 0,
        WireValue::Fixed32(v) => *v == 0,
        WireValue::Fixed64(v) => *v == 0,
        WireValue::Bytes(p) => p.is_empty(),
        _ => false,
    }
}

/// Equality of two scalar wire values (map keys).
fn same_scalar(a: &WireValue, b: &WireValue) -> bool {
    match (a, b) {
        (WireValue::Varint(x), WireValue::Varint(y)) => x == y,
        (WireValue::Fixed32(x), WireValue::Fixed32(y)) => x == y,
        (WireValue::Fixed64(x), WireValue::Fixed64(y)) => x == y,
        (WireValue::Bytes(x), WireValue::Bytes(y)) => match (x.bytes(), y.bytes()) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        },
        _ => false,
    }
}

/// Decodes a packed run of scalars.
fn unpack(
    bytes: &Bytes,
    layout: ScalarWire,
    out: &mut Vec<WireValue>,
) -> Result<(), crate::error::DecodeError> {
    let mut pos = 0;
    while pos < bytes.len() {
        match layout {
            ScalarWire::Varint => out.push(WireValue::Varint(codec::read_varint(bytes, &mut pos)?)),
            ScalarWire::Fixed32 | ScalarWire::Fixed64 => {
                let width = if layout == ScalarWire::Fixed32 { 4 } else { 8 };
                let Some(chunk) = bytes.get(pos..pos + width) else {
                    return Err(crate::error::DecodeError::new(
                        pos,
                        "truncated packed fixed value",
                    ));
                };
                let mut le = [0u8; 8];
                le[..width].copy_from_slice(chunk);
                let v = u64::from_le_bytes(le);
                out.push(if width == 4 {
                    WireValue::Fixed32(v as u32)
                } else {
                    WireValue::Fixed64(v)
                });
                pos += width;
            }
            ScalarWire::Len => unreachable!("strings are never packed"),
        }
    }
    Ok(())
}

/// Encodes scalars as one packed payload.
fn pack(values: &[WireValue]) -> Bytes {
    let mut out = Vec::new();
    for v in values {
        match v {
            WireValue::Varint(x) => put_varint(*x, &mut out),
            WireValue::Fixed32(x) => out.extend_from_slice(&x.to_le_bytes()),
            WireValue::Fixed64(x) => out.extend_from_slice(&x.to_le_bytes()),
            _ => {}
        }
    }
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    /// `MetaGraphDef.meta_info_def` sent in two parts with, between them, an occurrence of
    /// field 1 as a varint (an unknown field to protobuf C++): the parts merge into the first
    /// one, the varint stays where it was, and nothing else is left behind.
    #[test]
    fn a_message_in_two_parts_merges_and_leaves_other_wire_types_alone() {
        let desc = unbound_proto::descriptor_pool()
            .get_message_by_name("tensorflow.MetaGraphDef")
            .unwrap();
        let info_fd = desc.get_field(1).unwrap();
        // meta_info_def { meta_graph_version: "a" }, 1: 5 (varint), meta_info_def { tags: "t" }
        let bytes = Bytes::from_static(&[
            0x0a, 0x03, 0x0a, 0x01, b'a', 0x08, 0x05, 0x0a, 0x03, 0x22, 0x01, b't',
        ]);
        let mut meta = WireMessage::parse(&bytes, Some(desc)).unwrap();
        let info = meta.singular_message_mut(&info_fd).unwrap();
        assert_eq!(info.fields.len(), 2);
        assert_eq!(
            meta.to_vec().unwrap(),
            [0x0a, 0x06, 0x0a, 0x01, b'a', 0x22, 0x01, b't', 0x08, 0x05]
        );
    }

    /// `AttrValue { tensor { dtype: DT_FLOAT } }` followed by field 6 (`type`, an enum of the
    /// same oneof) sent length-delimited: protobuf C++ keeps that as an unknown field, so the
    /// oneof still holds the tensor. Reaching into the tensor (as the Merger does to put a
    /// chunk's `tensor_content` there) keeps it and the unknown field; setting a scalar of the
    /// tensor replaces only the occurrences of its own wire type.
    #[test]
    fn a_oneof_member_of_another_wire_type_does_not_supersede_the_member_set() {
        let pool = unbound_proto::descriptor_pool();
        let attr = pool.get_message_by_name("tensorflow.AttrValue").unwrap();
        let tensor_fd = attr.get_field(8).unwrap();
        let bytes = Bytes::from_static(&[0x42, 0x02, 0x08, 0x01, 0x32, 0x01, b'x']);
        let mut value = WireMessage::parse(&bytes, Some(attr)).unwrap();
        let tensor = value.singular_message_mut(&tensor_fd).unwrap();
        // tensor_content (field 4, bytes) beside a dtype... and an unknown varint field 4.
        let content_fd = tensor_fd.kind().as_message().unwrap().get_field(4).unwrap();
        tensor.fields.push(WireField {
            number: 4,
            value: WireValue::Varint(7),
        });
        tensor.set_scalar(
            &content_fd,
            WireValue::Bytes(Payload::Inline(Bytes::from_static(b"ab"))),
        );
        assert_eq!(
            value.to_vec().unwrap(),
            [0x42, 0x08, 0x08, 0x01, 0x22, 0x02, b'a', b'b', 0x20, 0x07, 0x32, 0x01, b'x']
        );
    }

    /// A map entry `{ key: "k", value: 5, 1: fixed64 8 }`: the last field 1 has another wire
    /// type than the key's (an unknown field to protobuf C++), so the entry's key is still
    /// "k" and a change reaches that entry rather than a new one that would supersede it.
    #[test]
    fn a_map_key_of_another_wire_type_is_not_the_key() {
        let pool = unbound_proto::descriptor_pool();
        let node = pool.get_message_by_name("tensorflow.NodeDef").unwrap();
        let attr_fd = node.get_field(5).unwrap();
        let entry: &[u8] = &[
            0x0a, 0x01, b'k', 0x12, 0x02, 0x18, 0x05, 0x09, 8, 0, 0, 0, 0, 0, 0, 0,
        ];
        let mut bytes = vec![0x2a, entry.len() as u8];
        bytes.extend_from_slice(entry);
        let mut message = WireMessage::parse(&Bytes::from(bytes), Some(node)).unwrap();
        let key = WireValue::Bytes(Payload::Inline(Bytes::from_static(b"k")));
        let found = message.map_entry_mut(&attr_fd, &key).unwrap();
        assert_eq!(found.fields.len(), 3, "the entry that was there");
        assert_eq!(message.fields.len(), 1, "no entry added");
    }
}

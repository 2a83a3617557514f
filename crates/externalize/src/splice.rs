//! The rewritten model written over the one read, so that what the rewrite does not touch is
//! written as it was read: the project's rule that a rewrite passes through what it does not
//! understand (fields of a newer TensorFlow's schema, unknown to ours).
//!
//! The rewrite works on decoded (prost) messages, which keep no unknown fields; [`splice`]
//! takes its result, serialized, and the source as read ([`crate::strip::Source`]), and
//! builds the model to write message by message:
//!
//! - a message whose serialization equals the source's (as decoded: with its markers) is the
//!   source's field as read, bytes (or lazy record) and all;
//! - a changed message is the new one's fields, each message field spliced over its
//!   counterpart in the source (map entries by key; `NodeDef`s, `FunctionDef`s and `ArgDef`s
//!   by name; other repeated messages by position; a singular one over all its occurrences),
//!   followed by the source message's unknown fields (numbers the schema does not know, or
//!   known numbers of a wire type protobuf keeps as unknown);
//! - a marker ([`crate::strip::Values`]) is the value it stands for.
//!
//! A message the rewrite removes takes its unknown fields with it; one it adds has none.

use std::borrow::Cow;
use std::collections::HashMap;

use bytes::Bytes;
use prost_reflect::{Kind, MessageDescriptor};
use unbound_wire::{wire_type_fits, Payload, WireField, WireMessage, WireValue};

use crate::error::malformed;
use crate::strip::Values;

/// Deepest nesting spliced; TensorFlow's messages nest far less.
const MAX_DEPTH: usize = 100;

/// The source's message at one place: as read, and as decoded (field for field).
#[derive(Clone, Copy)]
pub(crate) struct Original<'a> {
    /// As read.
    pub root: &'a WireMessage,
    /// As decoded (its large values markers).
    pub stripped: &'a WireMessage,
}

/// The message `new` (a serialization of type `desc`) written over `original`, as the module
/// doc says.
pub(crate) fn splice(
    original: Original<'_>,
    new: &Bytes,
    desc: &MessageDescriptor,
    values: &Values,
) -> unbound_wire::Result<WireMessage> {
    splice_at(original, new, desc, values, 0)
}

fn splice_at(
    original: Original<'_>,
    new: &Bytes,
    desc: &MessageDescriptor,
    values: &Values,
    depth: usize,
) -> unbound_wire::Result<WireMessage> {
    if depth > MAX_DEPTH {
        return Err(unbound_wire::WireError::Schema {
            message: desc.full_name().to_string(),
            fault: format!("nested deeper than {MAX_DEPTH} messages"),
        });
    }
    let parsed = WireMessage::parse(new, Some(desc.clone())).map_err(malformed)?;
    let mut out = WireMessage::new(Some(desc.clone()));
    let mut counterparts = Counterparts::default();
    for field in parsed.fields {
        let fd = desc.get_field(field.number);
        let (Some(fd), WireValue::Bytes(Payload::Inline(bytes))) = (&fd, &field.value) else {
            out.fields.push(field);
            continue;
        };
        match fd.kind() {
            Kind::Message(sub) if !fd.is_group() => {
                let found = counterparts.find(original.stripped, fd, &sub, bytes)?;
                match found.as_slice() {
                    [] => out.fields.push(field),
                    [p] if same_bytes(&original.stripped.fields[*p], bytes)? => {
                        out.fields.push(original.root.fields[*p].clone());
                    }
                    positions => {
                        let root = combined(original.root, positions, &sub)?;
                        let stripped = combined(original.stripped, positions, &sub)?;
                        let inner = Original {
                            root: &root,
                            stripped: &stripped,
                        };
                        let message = splice_at(inner, bytes, &sub, values, depth + 1)?;
                        out.fields.push(WireField {
                            number: field.number,
                            value: WireValue::Message(message),
                        });
                    }
                }
            }
            Kind::Bytes | Kind::String => match values.resolve(bytes) {
                Some(value) => out.fields.push(WireField {
                    number: field.number,
                    value: WireValue::Bytes(value.clone()),
                }),
                None => out.fields.push(field),
            },
            _ => out.fields.push(field),
        }
    }
    for field in &original.root.fields {
        let known = desc
            .get_field(field.number)
            .is_some_and(|fd| wire_type_fits(&fd, &field.value));
        if !known {
            out.fields.push(field.clone());
        }
    }
    Ok(out)
}

/// Whether the field `field` (of the source, as decoded) serializes to `bytes`.
fn same_bytes(field: &WireField, bytes: &Bytes) -> unbound_wire::Result<bool> {
    Ok(match &field.value {
        WireValue::Bytes(p) => p.len() == bytes.len() as u64 && p.bytes()? == *bytes,
        WireValue::Message(m) => m.encoded_len() == bytes.len() as u64 && m.to_vec()? == *bytes,
        _ => false,
    })
}

/// The occurrences at `positions` of `message` as one message of type `desc` (protobuf
/// merges the occurrences of a singular message field).
fn combined(
    message: &WireMessage,
    positions: &[usize],
    desc: &MessageDescriptor,
) -> unbound_wire::Result<WireMessage> {
    let mut out = WireMessage::new(Some(desc.clone()));
    for &p in positions {
        match &message.fields[p].value {
            WireValue::Message(m) => out.fields.extend(m.fields.iter().cloned()),
            WireValue::Bytes(payload) => out.append_bytes(&payload.bytes()?).map_err(malformed)?,
            _ => {}
        }
    }
    Ok(out)
}

/// How an element of a repeated message field is matched with the source's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Identity {
    /// By a key (a map entry's key, a name).
    Key(Vec<u8>),
    /// By position among the field's occurrences.
    Position(usize),
}

/// The source's elements of each repeated field, by identity, built as first needed.
#[derive(Default)]
struct Counterparts {
    /// Per field number: identity -> position in the source message.
    by_field: HashMap<u32, HashMap<Identity, usize>>,
    /// Per field number: occurrences of the new message seen so far.
    seen: HashMap<u32, usize>,
}

impl Counterparts {
    /// The positions in `original` of the counterpart of the new occurrence `bytes` of field
    /// `fd`: all occurrences of a singular field, the matching element of a repeated one.
    fn find(
        &mut self,
        original: &WireMessage,
        fd: &prost_reflect::FieldDescriptor,
        desc: &MessageDescriptor,
        bytes: &Bytes,
    ) -> unbound_wire::Result<Vec<usize>> {
        let number = fd.number();
        let positions = original.message_positions(number);
        if !fd.is_list() && !fd.is_map() {
            return Ok(positions);
        }
        let ordinal = self.seen.entry(number).or_insert(0);
        let new_identity = identity(
            &Cow::Owned(WireMessage::parse(bytes, None).map_err(malformed)?),
            desc,
            *ordinal,
        )?;
        *ordinal += 1;
        if let std::collections::hash_map::Entry::Vacant(vacant) = self.by_field.entry(number) {
            let mut map = HashMap::new();
            for (k, &p) in positions.iter().enumerate() {
                let message = as_message(&original.fields[p])?;
                // The last of several with one key wins, as protobuf's maps do.
                map.insert(identity(&message, desc, k)?, p);
            }
            vacant.insert(map);
        }
        Ok(self
            .by_field
            .get(&number)
            .and_then(|m| m.get(&new_identity))
            .map(|&p| vec![p])
            .unwrap_or_default())
    }
}

/// A field's value as a message (parsed one level if not expanded).
fn as_message(field: &WireField) -> unbound_wire::Result<Cow<'_, WireMessage>> {
    Ok(match &field.value {
        WireValue::Message(m) => Cow::Borrowed(m),
        WireValue::Bytes(p) => {
            Cow::Owned(WireMessage::parse(&p.bytes()?, None).map_err(malformed)?)
        }
        _ => Cow::Owned(WireMessage::new(None)),
    })
}

/// The identity of an element (`k`-th of its field) of type `desc`.
fn identity(
    message: &WireMessage,
    desc: &MessageDescriptor,
    k: usize,
) -> unbound_wire::Result<Identity> {
    let key = if desc.is_map_entry() {
        Some(scalar_key(message, desc, 1))
    } else {
        match desc.full_name() {
            "tensorflow.NodeDef" | "tensorflow.OpDef.ArgDef" => Some(scalar_key(message, desc, 1)),
            // A function by its signature's name.
            "tensorflow.FunctionDef" => {
                let signature_fd = desc.get_field(1);
                let mut signature = WireMessage::new(None);
                for f in message.fields.iter().filter(|f| f.number == 1) {
                    if !signature_fd
                        .as_ref()
                        .is_some_and(|fd| wire_type_fits(fd, &f.value))
                    {
                        continue;
                    }
                    if let WireValue::Bytes(p) = &f.value {
                        signature.append_bytes(&p.bytes()?).map_err(malformed)?;
                    } else if let WireValue::Message(m) = &f.value {
                        signature.fields.extend(m.fields.iter().cloned());
                    }
                }
                signature_fd
                    .and_then(|fd| fd.kind().as_message().cloned())
                    .map(|op_def| scalar_key(&signature, &op_def, 1))
            }
            _ => None,
        }
    };
    Ok(match key {
        Some(key) => Identity::Key(key),
        None => Identity::Position(k),
    })
}

/// The value of field `number` of `message` (of type `desc`; its last occurrence of a wire
/// type protobuf parses as that field, the others being unknown fields) as bytes: a string's
/// bytes, a number's decimal digits; empty when absent or zero, as protobuf reads a missing
/// field.
fn scalar_key(message: &WireMessage, desc: &MessageDescriptor, number: u32) -> Vec<u8> {
    let Some(fd) = desc.get_field(number) else {
        return Vec::new();
    };
    let Some(field) = message
        .fields
        .iter()
        .rev()
        .find(|f| f.number == number && wire_type_fits(&fd, &f.value))
    else {
        return Vec::new();
    };
    match &field.value {
        WireValue::Bytes(Payload::Inline(b)) => b.to_vec(),
        WireValue::Varint(0) | WireValue::Fixed32(0) | WireValue::Fixed64(0) => Vec::new(),
        WireValue::Varint(v) | WireValue::Fixed64(v) => v.to_string().into_bytes(),
        WireValue::Fixed32(v) => v.to_string().into_bytes(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;
    use unbound_proto::tensorflow::{GraphDef, NodeDef};

    use super::*;

    fn desc(name: &str) -> MessageDescriptor {
        unbound_proto::descriptor_pool()
            .get_message_by_name(name)
            .unwrap()
    }

    /// `new` (a rewrite of `source`, which holds no constant values) written over `source`.
    fn spliced_over(source: &WireMessage, new: &Bytes, desc: &MessageDescriptor) -> Vec<u8> {
        let original = Original {
            root: source,
            stripped: source,
        };
        splice(original, new, desc, &Values::none())
            .unwrap()
            .to_vec()
            .unwrap()
    }

    /// `bytes` with an unknown length-delimited field 999 appended.
    fn with_unknown(mut bytes: Vec<u8>, value: &[u8]) -> Vec<u8> {
        bytes.extend_from_slice(&[0xba, 0x3e, value.len() as u8]);
        bytes.extend_from_slice(value);
        bytes
    }

    fn node(name: &str, op: &str) -> NodeDef {
        NodeDef {
            name: name.into(),
            op: op.into(),
            ..NodeDef::default()
        }
    }

    #[test]
    fn unchanged_messages_are_kept_as_read_and_changed_ones_keep_unknown_fields() {
        // A graph of two nodes, each with an unknown field, and one at the graph's level.
        let a = with_unknown(node("a", "Const").encode_to_vec(), b"in a");
        let b = with_unknown(node("b", "Add").encode_to_vec(), b"in b");
        let mut graph = Vec::new();
        for n in [&a, &b] {
            graph.push(0x0a);
            graph.push(n.len() as u8);
            graph.extend_from_slice(n);
        }
        let graph = with_unknown(graph, b"in graph");
        let g = desc("tensorflow.GraphDef");
        let source = WireMessage::parse(&Bytes::from(graph.clone()), Some(g.clone())).unwrap();
        // The rewrite: `a` becomes an Identity, a node is added.
        let mut decoded = GraphDef::decode(&graph[..]).unwrap();
        decoded.node[0].op = "Identity".into();
        decoded.node.push(node("c", "NoOp"));
        let new = Bytes::from(decoded.encode_to_vec());
        let out = spliced_over(&source, &new, &g);
        let back = GraphDef::decode(&out[..]).unwrap();
        assert_eq!(back, decoded);
        for unknown in [&b"in a"[..], b"in b", b"in graph"] {
            assert!(
                out.windows(unknown.len()).any(|w| w == unknown),
                "{:?} lost",
                String::from_utf8_lossy(unknown)
            );
        }
        // `b`, unchanged, is written as read.
        assert!(out.windows(b.len()).any(|w| w == &b[..]));
    }

    #[test]
    fn a_name_of_the_wrong_wire_type_is_an_unknown_field_not_the_name() {
        // Node `a` with, after its name, field 1 as a varint (protobuf keeps it as an
        // unknown field; the name is still "a"), and another unknown field.
        let mut a = node("a", "Const").encode_to_vec();
        a.extend_from_slice(&[0x08, 0x2a]);
        let a = with_unknown(a, b"in a");
        let mut graph = vec![0x0a, a.len() as u8];
        graph.extend_from_slice(&a);
        let g = desc("tensorflow.GraphDef");
        let source = WireMessage::parse(&Bytes::from(graph.clone()), Some(g.clone())).unwrap();
        let lenient = |b: &[u8]| {
            unbound_wire::decode_lenient::<GraphDef>(
                Bytes::copy_from_slice(b),
                unbound_proto::descriptor_pool(),
            )
            .unwrap()
        };
        let mut decoded = lenient(&graph);
        assert_eq!(decoded.node[0].name, "a");
        decoded.node[0].op = "Identity".into();
        let new = Bytes::from(decoded.encode_to_vec());
        let out = spliced_over(&source, &new, &g);
        assert_eq!(lenient(&out), decoded);
        assert!(
            out.windows(4).any(|w| w == b"in a"),
            "the node's unknown field lost"
        );
        assert!(
            out.windows(2).any(|w| w == [0x08, 0x2a]),
            "the wrong-typed name lost"
        );
    }
}

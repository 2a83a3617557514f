//! The canonical form of a model holding large values it has not read (lazy references into
//! a `.cpb`'s records), made without reading them (issue 29).
//!
//! `merge` writes the canonical form of the model it merged (what TensorFlow's Merger and
//! protobuf C++ write). A model not mostly canonical was encoded whole in memory: its
//! serialization with every value read, then its canonical form, then the write. Of a
//! 1.2 GB `.cpb` of constants whose small messages another writer put out of order, that
//! was 9.7 s and 1.2 GB of heap, most of it copying values that canonical form never
//! changes: a `bytes` value is written as it is; only where its field goes and the lengths
//! around it depend on the rest.
//!
//! So each large value is replaced by a placeholder (a nonce of this process and the value's
//! index), the small model left is encoded, and in its canonical bytes each placeholder
//! becomes its value again, still a lazy reference: the messages on the path to it are
//! parsed (their lengths are then written anew, counting the value), everything else stays
//! as encoded. Written, the values stream from their records. A placeholder found other
//! than once where a value goes (the nonce occurring in the model's own bytes, a value
//! dropped by a later occurrence of its field) gives up: the caller encodes the model whole.
//! What is written is checked canonical again when it is fingerprinted.

use std::hash::{BuildHasher, Hasher};

use bytes::Bytes;
use unbound_wire::codec::{read_field, WireType};
use unbound_wire::{Payload, WireField, WireMessage, WireValue};

use super::streamed;

/// Values of at least this many bytes are kept out of the encoding.
const OPAQUE_AT: u64 = 1 << 20;
/// Below this many bytes of such values in all, the model is encoded whole as before.
const WORTH_IT: u64 = 64 << 20;
/// A placeholder: the nonce, then the value's index (little-endian).
const PLACEHOLDER_LEN: usize = 24;

/// The canonical form of `model` with its large lazy values left where they are (see the
/// module docs), as a message to write; `None` when it holds too few such values to be
/// worth it, or when a placeholder is not found exactly where a value goes.
pub(crate) fn canonical_keeping_values(model: &WireMessage) -> super::Result<Option<WireMessage>> {
    if lazy_bytes(model) < WORTH_IT {
        return Ok(None);
    }
    let nonce = nonce();
    let mut stubbed = model.clone();
    let mut values = Vec::new();
    stub(&mut stubbed, &nonce, &mut values);
    let serialized = stubbed
        .to_vec()
        .map_err(|e| super::model_fault(e.to_string()))?;
    drop(stubbed);
    let canonical = Bytes::from(streamed::canonical_model(&serialized)?);
    drop(serialized);
    let Some(targets) = placeholders(&canonical, &nonce, values.len()) else {
        return Ok(None);
    };
    Ok(rebuild(&canonical, 0, &targets, &values))
}

/// The bytes of the lazy values of at least [`OPAQUE_AT`] bytes `message` holds.
fn lazy_bytes(message: &WireMessage) -> u64 {
    message
        .fields
        .iter()
        .map(|field| match &field.value {
            WireValue::Message(inner) => lazy_bytes(inner),
            WireValue::Bytes(payload @ Payload::Record(_)) if payload.len() >= OPAQUE_AT => {
                payload.len()
            }
            _ => 0,
        })
        .fold(0u64, u64::saturating_add)
}

/// 16 bytes no model holds by chance: from the process's random hash keys.
fn nonce() -> [u8; 16] {
    let mut out = [0u8; 16];
    for (i, half) in out.chunks_mut(8).enumerate() {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(i);
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    out
}

/// Replaces each lazy value of at least [`OPAQUE_AT`] bytes in `message` by a placeholder,
/// the value pushed to `values` (its index in the placeholder).
fn stub(message: &mut WireMessage, nonce: &[u8; 16], values: &mut Vec<Payload>) {
    for field in &mut message.fields {
        match &mut field.value {
            WireValue::Message(inner) => stub(inner, nonce, values),
            WireValue::Bytes(payload @ Payload::Record(_)) if payload.len() >= OPAQUE_AT => {
                let mut placeholder = Vec::with_capacity(PLACEHOLDER_LEN);
                placeholder.extend_from_slice(nonce);
                placeholder.extend_from_slice(&(values.len() as u64).to_le_bytes());
                let value = std::mem::replace(payload, Payload::Inline(placeholder.into()));
                values.push(value);
            }
            _ => {}
        }
    }
}

/// Where each placeholder lies in `canonical` (the start of its bytes) and its index, in
/// order; `None` unless each of the `count` is found at most once (a value whose field a
/// later occurrence overrode is gone from the canonical form: fine).
fn placeholders(canonical: &[u8], nonce: &[u8; 16], count: usize) -> Option<Vec<(usize, usize)>> {
    let mut seen = vec![false; count];
    let mut found = Vec::new();
    for at in memchr::memmem::find_iter(canonical, nonce) {
        let index = canonical.get(at + 16..at + PLACEHOLDER_LEN)?;
        let index = usize::try_from(u64::from_le_bytes(index.try_into().ok()?)).ok()?;
        if std::mem::replace(seen.get_mut(index)?, true) {
            return None;
        }
        found.push((at, index));
    }
    Some(found)
}

/// The message serialized in `bytes` (found at `base` of the canonical form) with the
/// placeholders `targets` (absolute positions, in order, all inside it) replaced by their
/// `values`: the fields on the way to a placeholder parsed, the others kept as encoded.
/// `None` when a placeholder is not exactly the bytes of a field.
fn rebuild(
    bytes: &Bytes,
    base: usize,
    targets: &[(usize, usize)],
    values: &[Payload],
) -> Option<WireMessage> {
    let mut message = WireMessage::new(None);
    let (mut pos, mut run, mut next) = (0, 0, 0);
    while pos < bytes.len() && next < targets.len() {
        let start = pos;
        let raw = read_field(bytes, &mut pos).ok()?;
        let (from, to) = (base + raw.start, base + raw.end);
        let inside = targets[next..]
            .iter()
            .take_while(|(at, _)| *at < to)
            .count();
        if raw.wire_type != WireType::Len || inside == 0 {
            continue;
        }
        if targets[next].0 < from {
            return None; // a placeholder between fields, or in a key
        }
        message.append_bytes(&bytes.slice(run..start)).ok()?;
        let mine = &targets[next..next + inside];
        let value = match mine {
            [(at, index)] if *at == from && to - from == PLACEHOLDER_LEN => {
                WireValue::Bytes(values.get(*index)?.clone())
            }
            _ => WireValue::Message(rebuild(
                &bytes.slice(raw.start..raw.end),
                from,
                mine,
                values,
            )?),
        };
        message.fields.push(WireField {
            number: raw.number,
            value,
        });
        next += inside;
        run = pos;
    }
    if next < targets.len() {
        return None;
    }
    message.append_bytes(&bytes.slice(run..)).ok()?;
    Some(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source of one record, the value of `len` bytes of `byte`.
    #[derive(Debug)]
    struct Value(u8, u64);

    impl unbound_wire::RecordSource for Value {
        fn name(&self) -> &str {
            "value"
        }
        fn read_record(&self, _: u64) -> Result<Bytes, unbound_wire::SourceError> {
            Ok(vec![self.0; self.1 as usize].into())
        }
        fn copy_record_to(
            &self,
            _: u64,
            out: &mut dyn std::io::Write,
        ) -> Result<u64, unbound_wire::SourceError> {
            out.write_all(&vec![self.0; self.1 as usize])?;
            Ok(self.1)
        }
        fn decoding_is_costly(&self, _: u64) -> bool {
            true
        }
    }

    fn lazy(byte: u8, len: u64) -> WireValue {
        WireValue::Bytes(Payload::Record(unbound_wire::RecordRef {
            reader: std::sync::Arc::new(Box::new(Value(byte, len))),
            position: 0,
            len,
        }))
    }

    #[test]
    fn the_canonical_form_keeping_values_is_the_canonical_form() {
        use prost::Message as _;
        use unbound_proto::tensorflow::{
            attr_value, AttrValue, GraphDef, MetaGraphDef, NodeDef, SavedModel, TensorProto,
        };
        // A model of two large constants, its small messages out of order: each node's
        // fields reversed, `versions` before the nodes.
        let node = |name: &str| NodeDef {
            name: name.into(),
            op: "Const".into(),
            attr: [(
                "value".to_string(),
                AttrValue {
                    value: Some(attr_value::Value::Tensor(TensorProto {
                        dtype: 1,
                        ..Default::default()
                    })),
                },
            )]
            .into(),
            ..Default::default()
        };
        let model = SavedModel {
            saved_model_schema_version: 1,
            meta_graphs: vec![MetaGraphDef {
                graph_def: Some(GraphDef {
                    node: vec![node("a"), node("b")],
                    ..Default::default()
                }),
                ..Default::default()
            }],
        };
        let desc = crate::dir::saved_model_descriptor().unwrap();
        let mut wire = WireMessage::parse(&Bytes::from(model.encode_to_vec()), Some(desc)).unwrap();
        // Each node's tensor gets a lazy tensor_content (field 4) of 40 MiB.
        let meta = message_at(&mut wire, 2);
        let graph = message_at(meta, 2);
        graph.fields.insert(
            0,
            WireField {
                number: 4,
                value: WireValue::Bytes(Payload::Inline(Bytes::from_static(&[0x08, 0x1b]))),
            },
        );
        for (i, node) in graph
            .fields
            .iter_mut()
            .filter(|f| f.number == 1)
            .enumerate()
        {
            let WireValue::Bytes(bytes) = &node.value else {
                panic!("a node is bytes")
            };
            let mut parsed = WireMessage::parse(&bytes.bytes().unwrap(), None).unwrap();
            let attr = message_at(&mut parsed, 5);
            let value = message_at(attr, 2);
            let tensor = message_at(value, 8);
            tensor.fields.push(WireField {
                number: 4,
                value: lazy(b'a' + i as u8, 40 << 20),
            });
            parsed.fields.reverse();
            node.value = WireValue::Message(parsed);
        }
        let whole = streamed::canonical_model(&wire.to_vec().unwrap()).unwrap();
        let kept = canonical_keeping_values(&wire)
            .unwrap()
            .expect("80 MiB of values: kept out");
        assert!(kept.to_vec().unwrap() == whole, "not the canonical form");
        assert_ne!(
            wire.to_vec().unwrap(),
            whole,
            "the model was canonical already"
        );
    }

    /// The first field `number` of `message`, parsed in place as a message.
    fn message_at(message: &mut WireMessage, number: u32) -> &mut WireMessage {
        let field = message
            .fields
            .iter_mut()
            .find(|f| f.number == number)
            .unwrap();
        if let WireValue::Bytes(bytes) = &field.value {
            field.value =
                WireValue::Message(WireMessage::parse(&bytes.bytes().unwrap(), None).unwrap());
        }
        match &mut field.value {
            WireValue::Message(m) => m,
            _ => unreachable!(),
        }
    }
}

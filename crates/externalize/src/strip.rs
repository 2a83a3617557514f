//! The source model as read, and a copy of it small enough to decode: a rewrite decodes the
//! model to decide what changes, but writes what it does not change as it was read
//! ([`crate::splice`]), so it reads the model once, at the wire level ([`Source`]).
//!
//! The large values of `Const` nodes (their `tensor_content`, in the graph and in every
//! library function) are what makes a model big; in the copy decoded each is replaced by a
//! short marker, and the value itself stays where it was read: a slice of the mapped `.pb`,
//! or a lazy reference into a record of the `.cpb` ([`Payload`]), never copied into memory.
//! [`Values::resolve`] turns a marker back into its value. The markers carry a nonce drawn
//! for this run, so no value of the model can pass for one.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

use bytes::{BufMut, Bytes, BytesMut};
use prost_reflect::MessageDescriptor;
use unbound_proto::fields::tensorflow::{
    attr_value, function_def, function_def_library, graph_def, meta_graph_def, node_def,
    saved_model, tensor_proto,
};
use unbound_wire::{Payload, WireMessage, WireValue};

use crate::error::{malformed, ExternalizeError, Result};

/// Values shorter than this stay in the decoded copy (a marker would not make it smaller).
const STRIP_AT: u64 = 64;

/// What a marker starts with, before its nonce and number.
const MARKER_TAG: &[u8] = b"\0unbound:value\0";

/// The values taken out of the decoded copy, each behind its marker.
#[derive(Debug, Clone)]
pub(crate) struct Values {
    /// Drawn per run: part of every marker.
    nonce: u64,
    /// The values, by marker number.
    payloads: Vec<Payload>,
}

impl Values {
    /// No values: nothing was stripped.
    pub(crate) fn none() -> Self {
        Self {
            nonce: RandomState::new().build_hasher().finish(),
            payloads: Vec::new(),
        }
    }

    /// The marker of value `i`.
    fn marker(&self, i: usize) -> Bytes {
        let mut b = BytesMut::with_capacity(MARKER_TAG.len() + 16);
        b.put_slice(MARKER_TAG);
        b.put_u64_le(self.nonce);
        b.put_u64_le(i as u64);
        b.freeze()
    }

    /// The value `bytes` is the marker of, if it is one.
    pub(crate) fn resolve(&self, bytes: &[u8]) -> Option<&Payload> {
        let rest = bytes.strip_prefix(MARKER_TAG)?;
        if rest.len() != 16 || rest[..8] != self.nonce.to_le_bytes() {
            return None;
        }
        let mut i = [0u8; 8];
        i.copy_from_slice(&rest[8..]);
        self.payloads
            .get(usize::try_from(u64::from_le_bytes(i)).ok()?)
    }

    /// Keeps `payload`, returning its marker.
    fn keep(&mut self, payload: Payload) -> Bytes {
        self.payloads.push(payload);
        self.marker(self.payloads.len() - 1)
    }
}

/// A SavedModel read for a rewrite: see the module doc.
pub(crate) struct Source {
    /// The model as read, with the messages leading to `Const` values expanded.
    pub root: WireMessage,
    /// `root` field for field, with the `Const` values of at least `STRIP_AT` bytes replaced
    /// by their markers.
    pub stripped: WireMessage,
    /// The values replaced.
    pub values: Values,
}

/// The descriptors of the messages walked.
struct Types {
    meta_graph: MessageDescriptor,
    graph: MessageDescriptor,
    library: MessageDescriptor,
    function: MessageDescriptor,
    node: MessageDescriptor,
    attr_entry: MessageDescriptor,
    attr_value: MessageDescriptor,
    tensor: MessageDescriptor,
}

impl Types {
    fn load() -> Result<Self> {
        let get = |name: &str| -> Result<MessageDescriptor> {
            Ok(unbound_savedmodel::dir::message_descriptor(name)?)
        };
        let node = get("tensorflow.NodeDef")?;
        let attr_entry = node
            .get_field(node_def::ATTR)
            .and_then(|f| f.kind().as_message().cloned())
            .ok_or_else(|| ExternalizeError::invalid("schema", "NodeDef.attr is not a map"))?;
        Ok(Self {
            meta_graph: get("tensorflow.MetaGraphDef")?,
            graph: get("tensorflow.GraphDef")?,
            library: get("tensorflow.FunctionDefLibrary")?,
            function: get("tensorflow.FunctionDef")?,
            node,
            attr_entry,
            attr_value: get("tensorflow.AttrValue")?,
            tensor: get("tensorflow.TensorProto")?,
        })
    }
}

/// A path of field positions from the root to one value.
type Path = Vec<usize>;

/// Reads `root` (a SavedModel) as the module doc says; `source_name` names it in errors.
pub(crate) fn strip(mut root: WireMessage, source_name: &str) -> Result<Source> {
    let types = Types::load()?;
    let mut paths: Vec<Path> = Vec::new();
    let malformed = |e: unbound_wire::WireError| {
        ExternalizeError::invalid(source_name, format!("not a SavedModel: {e}"))
    };
    for m in root.message_positions(saved_model::META_GRAPHS) {
        let meta = root.expand_at(m, &types.meta_graph).map_err(malformed)?;
        for g in meta.message_positions(meta_graph_def::GRAPH_DEF) {
            let graph = meta.expand_at(g, &types.graph).map_err(malformed)?;
            let at = |rest: &[usize]| [&[m, g][..], rest].concat();
            for n in graph.message_positions(graph_def::NODE) {
                for p in const_values(graph, n, &types).map_err(malformed)? {
                    paths.push(at(&[&[n][..], &p].concat()));
                }
            }
            for l in graph.message_positions(graph_def::LIBRARY) {
                let library = graph.expand_at(l, &types.library).map_err(malformed)?;
                for f in library.message_positions(function_def_library::FUNCTION) {
                    let function = library.expand_at(f, &types.function).map_err(malformed)?;
                    for n in function.message_positions(function_def::NODE_DEF) {
                        for p in const_values(function, n, &types).map_err(malformed)? {
                            paths.push(at(&[&[l, f, n][..], &p].concat()));
                        }
                    }
                }
            }
        }
    }
    let mut stripped = root.clone();
    let mut values = Values::none();
    for path in paths {
        let Some(field) = field_at(&mut stripped, &path) else {
            continue;
        };
        if let WireValue::Bytes(payload) = &field.value {
            let marker = values.keep(payload.clone());
            field.value = WireValue::Bytes(Payload::Inline(marker));
        }
    }
    Ok(Source {
        root,
        stripped,
        values,
    })
}

/// The field at `path` (positions, each into the message the previous one holds).
fn field_at<'a>(
    mut message: &'a mut WireMessage,
    path: &[usize],
) -> Option<&'a mut unbound_wire::WireField> {
    let (last, inner) = path.split_last()?;
    for &i in inner {
        match &mut message.fields.get_mut(i)?.value {
            WireValue::Message(m) => message = m,
            _ => return None,
        }
    }
    message.fields.get_mut(*last)
}

/// If the node at `n` of `parent` is a `Const`, expands it down to its value and returns the
/// paths (from the node) of the occurrences of its `tensor_content` worth stripping; any
/// other node is left as it was.
fn const_values(
    parent: &mut WireMessage,
    n: usize,
    types: &Types,
) -> unbound_wire::Result<Vec<Path>> {
    let is_const = match &parent.fields[n].value {
        WireValue::Message(m) => op_is_const(m),
        WireValue::Bytes(p) => {
            op_is_const(&WireMessage::parse(&p.bytes()?, None).map_err(malformed)?)
        }
        _ => false,
    };
    if !is_const {
        return Ok(Vec::new());
    }
    let node = parent.expand_at(n, &types.node)?;
    let mut paths = Vec::new();
    for a in node.message_positions(node_def::ATTR) {
        let entry = node.expand_at(a, &types.attr_entry)?;
        let key = entry
            .fields
            .iter()
            .rev()
            .find(|f| {
                f.number == node_def::attr_entry::KEY && matches!(f.value, WireValue::Bytes(_))
            })
            .and_then(|f| match &f.value {
                WireValue::Bytes(Payload::Inline(b)) => Some(b.clone()),
                _ => None,
            });
        if key.as_deref() != Some(b"value") {
            continue;
        }
        for v in entry.message_positions(node_def::attr_entry::VALUE) {
            let value = entry.expand_at(v, &types.attr_value)?;
            for t in value.message_positions(attr_value::TENSOR) {
                let tensor = value.expand_at(t, &types.tensor)?;
                for (c, field) in tensor.fields.iter().enumerate() {
                    if field.number != tensor_proto::TENSOR_CONTENT {
                        continue;
                    }
                    if let WireValue::Bytes(p) = &field.value {
                        if p.len() >= STRIP_AT {
                            paths.push(vec![a, v, t, c]);
                        }
                    }
                }
            }
        }
    }
    Ok(paths)
}

/// Whether a NodeDef's op (its last length-delimited occurrence: one of another wire type is
/// an unknown field) is `Const`.
fn op_is_const(node: &WireMessage) -> bool {
    node.fields
        .iter()
        .rev()
        .find(|f| f.number == node_def::OP && matches!(f.value, WireValue::Bytes(_)))
        .is_some_and(
            |f| matches!(&f.value, WireValue::Bytes(Payload::Inline(b)) if &b[..] == b"Const"),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_resolve_only_to_their_values() {
        let mut values = Values::none();
        let a = values.keep(Payload::Inline(Bytes::from_static(b"first value")));
        let b = values.keep(Payload::Inline(Bytes::from_static(b"second")));
        assert_eq!(values.resolve(&a).unwrap().len(), 11);
        assert_eq!(values.resolve(&b).unwrap().len(), 6);
        assert!(values.resolve(b"first value").is_none());
        // Another run's marker (another nonce) is not one of these.
        let other = Values::none();
        assert!(other.resolve(&a).is_none() || other.nonce == values.nonce);
        let mut truncated = a.to_vec();
        truncated.pop();
        assert!(values.resolve(&truncated).is_none());
    }
}

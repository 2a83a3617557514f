//! The parts of a SavedModel that fingerprints hash, and how: `meta_graphs[0]`'s graph,
//! signatures and object graph, each serialized deterministically.

use prost_reflect::MessageDescriptor;
use unbound_chunked::{WireMessage, WireValue};

use super::canonical::{source_of, Encoder, Source};
use super::farmhash::{fingerprint64, fingerprint_cat64};
use super::maps::{map_entries, KeyOrder};
use super::regularize::{strip_uid, suffix_uid};
use super::{model_fault, Result};

/// `SavedModel.meta_graphs`.
const SAVED_MODEL_META_GRAPHS: u32 = 2;
/// `MetaGraphDef.graph_def`, `.signature_def`, `.object_graph_def`.
pub const META_GRAPH_GRAPH_DEF: u32 = 2;
/// See [`META_GRAPH_GRAPH_DEF`].
pub const META_GRAPH_SIGNATURE_DEF: u32 = 5;
/// See [`META_GRAPH_GRAPH_DEF`].
pub const META_GRAPH_OBJECT_GRAPH_DEF: u32 = 7;
/// `SavedObjectGraph.concrete_functions`.
const OBJECT_GRAPH_CONCRETE_FUNCTIONS: u32 = 2;

/// A message type from our pool.
pub fn descriptor(name: &str) -> Result<MessageDescriptor> {
    Ok(crate::dir::message_descriptor(name)?)
}

fn is_len(v: &WireValue) -> bool {
    matches!(v, WireValue::Bytes(_) | WireValue::Message(_))
}

/// `meta_graphs[0]`. TensorFlow dereferences it unchecked; a model without one is refused.
pub fn first_meta_graph(model: &WireMessage) -> Result<Source<'_>> {
    let first = model
        .fields
        .iter()
        .find(|f| f.number == SAVED_MODEL_META_GRAPHS && is_len(&f.value))
        .ok_or_else(|| model_fault("the SavedModel has no meta graph to fingerprint"))?;
    Ok(source_of(&first.value)?.expect("a length-delimited value"))
}

/// The occurrences of a message field of `msg` (merged in order, they make its value).
pub fn field_sources<'a>(msgs: &[&'a WireMessage], number: u32) -> Result<Vec<Source<'a>>> {
    let mut out = Vec::new();
    for m in msgs {
        for f in m.fields.iter().filter(|f| f.number == number) {
            out.extend(source_of(&f.value)?);
        }
    }
    Ok(out)
}

/// The length-delimited occurrences of field `number` in `msgs`.
pub fn field_values<'a>(msgs: &[&'a WireMessage], number: u32) -> Vec<&'a WireValue> {
    msgs.iter()
        .flat_map(|m| m.fields.iter())
        .filter(|f| f.number == number && is_len(&f.value))
        .map(|f| &f.value)
        .collect()
}

/// One message holding the fields of all `sources`, in order.
pub fn merged(sources: &[Source<'_>], desc: &MessageDescriptor) -> WireMessage {
    let mut out = WireMessage::new(Some(desc.clone()));
    for s in sources {
        out.fields.extend(s.message().fields.iter().cloned());
    }
    out
}

/// FarmHash of the deterministic serialization of the message made of `sources`.
pub fn hash_message(
    enc: &mut Encoder,
    sources: &[Source<'_>],
    desc: &MessageDescriptor,
) -> Result<u64> {
    Ok(enc.encode(sources, desc)?.fingerprint64()?)
}

/// The signature entries of `meta_graph` in key order, each as
/// `(FP64(key), FP64(ser(SignatureDef)))`.
pub fn signature_hashes(enc: &mut Encoder, meta_graph: &WireMessage) -> Result<Vec<(u64, u64)>> {
    let mg = descriptor("tensorflow.MetaGraphDef")?;
    let sig = descriptor("tensorflow.SignatureDef")?;
    let fd = mg
        .get_field(META_GRAPH_SIGNATURE_DEF)
        .expect("MetaGraphDef.signature_def");
    let entry = fd.kind().as_message().expect("map entry").clone();
    let values = field_values(&[meta_graph], META_GRAPH_SIGNATURE_DEF);
    let entries = map_entries(
        &values,
        &entry.map_entry_key_field(),
        &entry.map_entry_value_field(),
    )?;
    let mut out = Vec::with_capacity(entries.len());
    for (key, value) in &entries {
        let KeyOrder::Str(name) = &key.order else {
            unreachable!("signature keys are strings")
        };
        let mut srcs = Vec::new();
        for v in value {
            srcs.extend(source_of(v)?);
        }
        out.push((fingerprint64(name), hash_message(enc, &srcs, &sig)?));
    }
    Ok(out)
}

/// `RegularizeAndHashSavedObjectGraph`: the concrete functions in ascending order of the
/// UID that ends their names (a name without one fails, as in TensorFlow), each hashed as its
/// name without the UID, then its deterministic serialization. The nodes are not hashed.
///
/// Where two names end in the same UID TensorFlow keeps the first in its hash map's order,
/// which is unspecified; here the first in name order is kept.
pub fn object_graph_hash(enc: &mut Encoder, object_graph: &[Source<'_>]) -> Result<u64> {
    let og = descriptor("tensorflow.SavedObjectGraph")?;
    let cf = descriptor("tensorflow.SavedConcreteFunction")?;
    let fd = og
        .get_field(OBJECT_GRAPH_CONCRETE_FUNCTIONS)
        .expect("SavedObjectGraph.concrete_functions");
    let entry = fd.kind().as_message().expect("map entry").clone();
    let msgs: Vec<&WireMessage> = object_graph.iter().map(Source::message).collect();
    let values = field_values(&msgs, OBJECT_GRAPH_CONCRETE_FUNCTIONS);
    let entries = map_entries(
        &values,
        &entry.map_entry_key_field(),
        &entry.map_entry_value_field(),
    )?;
    let mut by_uid = std::collections::BTreeMap::new();
    for (key, value) in &entries {
        let KeyOrder::Str(name) = &key.order else {
            unreachable!("function names are strings")
        };
        let uid = suffix_uid(name).ok_or_else(|| {
            model_fault(format!(
                "concrete function name \"{}\" does not end in an integer, which TensorFlow \
                 requires to fingerprint the object graph",
                String::from_utf8_lossy(name)
            ))
        })?;
        by_uid.entry(uid).or_insert((name, value));
    }
    let mut h = 0;
    for (uid, (name, value)) in by_uid {
        h = fingerprint_cat64(h, fingerprint64(strip_uid(name, uid)));
        let mut srcs = Vec::new();
        for v in value {
            srcs.extend(source_of(v)?);
        }
        h = fingerprint_cat64(h, hash_message(enc, &srcs, &cf)?);
    }
    Ok(h)
}

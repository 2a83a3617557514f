//! The parts of a SavedModel that fingerprints hash, and how: `meta_graphs[0]`'s graph,
//! signatures and object graph, each serialized deterministically.

use prost_reflect::MessageDescriptor;
use unbound_proto::fields::tensorflow::{meta_graph_def, saved_model, saved_object_graph};
use unbound_wire::{WireField, WireMessage};

use super::canonical::Encoder;
use super::farmhash::{fingerprint64, fingerprint_cat64};
use super::fields::{Source, Val};
use super::layout::MapInfo;
use super::maps::{map_entries, KeyOrder};
use super::regularize::{strip_uid, suffix_uid};
use super::{model_fault, Result};

/// A message type from our pool.
pub fn descriptor(name: &str) -> Result<MessageDescriptor> {
    crate::dir::message_descriptor(name)
}

/// `meta_graphs[0]`. TensorFlow dereferences it unchecked; a model without one is refused.
pub fn first_meta_graph(model: &WireMessage) -> Result<Source<'_>> {
    let first = model
        .fields
        .iter()
        .map(|f| (f.number, Val::from_wire(&f.value)))
        .find(|(n, v)| *n == saved_model::META_GRAPHS && v.is_len())
        .ok_or_else(|| model_fault("the SavedModel has no meta graph to fingerprint"))?;
    Ok(first.1.to_source()?.expect("a length-delimited value"))
}

/// The length-delimited occurrences of field `number` in `sources`.
pub fn field_values<'s>(sources: &'s [Source<'_>], number: u32) -> Result<Vec<Val<'s>>> {
    let mut out = Vec::new();
    for s in sources {
        s.for_each(|n, v| {
            if n == number && v.is_len() {
                out.push(v);
            }
        })?;
    }
    Ok(out)
}

/// The occurrences of a message field in `sources` (merged in order, they make its value).
pub fn field_sources<'s>(sources: &'s [Source<'_>], number: u32) -> Result<Vec<Source<'s>>> {
    let mut out = Vec::new();
    for v in field_values(sources, number)? {
        out.extend(v.to_source()?);
    }
    Ok(out)
}

/// One message holding the fields of all `sources`, in order.
pub fn merged(sources: &[Source<'_>], desc: &MessageDescriptor) -> Result<WireMessage> {
    let mut out = WireMessage::new(Some(desc.clone()));
    for s in sources {
        s.for_each(|number, v| {
            out.fields.push(WireField {
                number,
                value: v.to_wire(),
            })
        })?;
    }
    Ok(out)
}

/// FarmHash of the deterministic serialization of the message made of `sources`.
pub fn hash_message(
    enc: &mut Encoder,
    sources: &[Source<'_>],
    desc: &MessageDescriptor,
) -> Result<u64> {
    let built: u64 = sources
        .iter()
        .map(|s| match s {
            Source::Ref(m) => m.encoded_len(),
            _ => 0,
        })
        .sum();
    let input = built + sources.iter().map(|s| s.input_len() as u64).sum::<u64>();
    // Built messages (a .cpb's merged parts) must be written out for the byte encoder: a copy
    // of them. Mostly built sources stay with the general encoder, which reads them where
    // they are.
    let too_built = built * 4 > input && !enc.writes_out_built();
    if enc.trusts_children()
        || input < STREAMED_FROM
        || too_built
        || looks_canonical(enc, sources, desc)
    {
        return enc.fingerprint64(sources, desc);
    }
    match super::streamed::fingerprint64(sources, desc)? {
        Some(hash) => Ok(hash),
        None => enc.fingerprint64(sources, desc),
    }
}

/// Whether the first [`PROBED`] bytes of whole fields of the first serialized source in
/// `sources` are canonical: the general encoder, which takes canonical messages as they are
/// without a copy, is then the faster and leaner of the two (a `.cpb` written by protobuf
/// C++ or unbound), else the byte encoder (issue 29). Only the choice of path rests on it:
/// both give the same hash for any input.
fn looks_canonical(enc: &mut Encoder, sources: &[Source<'_>], desc: &MessageDescriptor) -> bool {
    let first = sources.iter().find_map(|source| match source {
        Source::Raw(buf) => Some(buf.clone()),
        Source::Slice(buf, start, end) => Some(buf.slice(*start..*end)),
        _ => None,
    });
    let Some(first) = first else {
        return false;
    };
    let mut end = 0;
    while end < first.len().min(PROBED) {
        if unbound_wire::codec::read_field(&first, &mut end).is_err() {
            return false;
        }
    }
    enc.is_canonical(&first.slice(..end), desc)
}

/// How much of a source [`looks_canonical`] reads.
const PROBED: usize = 256 << 10;

/// Serialized messages of at least this many bytes, not known canonical, are hashed by the encoder of
/// `unbound_canonical` (issue 29: the general encoder lists every field of every message, ten
/// times slower on a model of millions of nodes); smaller ones by the general encoder, whose
/// setup costs nothing.
const STREAMED_FROM: u64 = 1 << 20;

/// The signature entries of `meta_graph` in key order, each as
/// `(FP64(key), FP64(ser(SignatureDef)))`.
pub fn signature_hashes(enc: &mut Encoder, meta_graph: &Source<'_>) -> Result<Vec<(u64, u64)>> {
    let mg = descriptor("tensorflow.MetaGraphDef")?;
    let sig = descriptor("tensorflow.SignatureDef")?;
    let fd = mg
        .get_field(meta_graph_def::SIGNATURE_DEF)
        .expect("MetaGraphDef.signature_def");
    let values = field_values(
        std::slice::from_ref(meta_graph),
        meta_graph_def::SIGNATURE_DEF,
    )?;
    let entries = map_entries(&values, &MapInfo::of(&fd))?;
    let mut out = Vec::with_capacity(entries.len());
    for (key, value) in &entries {
        let KeyOrder::Str(name) = &key.order else {
            unreachable!("signature keys are strings")
        };
        let mut srcs = Vec::new();
        for v in value {
            srcs.extend(v.val().to_source()?);
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
        .get_field(saved_object_graph::CONCRETE_FUNCTIONS)
        .expect("SavedObjectGraph.concrete_functions");
    let values = field_values(object_graph, saved_object_graph::CONCRETE_FUNCTIONS)?;
    let entries = map_entries(&values, &MapInfo::of(&fd))?;
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
            srcs.extend(v.val().to_source()?);
        }
        h = fingerprint_cat64(h, hash_message(enc, &srcs, &cf)?);
    }
    Ok(h)
}

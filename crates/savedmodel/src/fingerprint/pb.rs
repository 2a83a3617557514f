//! `CreateFingerprintDefPb`: the fingerprint of a `saved_model.pb`.

use std::path::Path;

use crate::SavedModelError;
use unbound_io::map_file;
use unbound_proto::fields::tensorflow::meta_graph_def;
use unbound_wire::WireMessage;

use super::canonical::{Encoder, Source};
use super::farmhash::{fingerprint64, fingerprint_cat64};
use super::hashes::{
    descriptor, field_sources, first_meta_graph, hash_message, merged, object_graph_hash,
    signature_hashes,
};
use super::regularize::simple_delete;
use super::{Hashes, Result};

/// The hash fields for the SavedModel in `pb_file`:
///
/// - `saved_model_checksum`: the whole model;
/// - `graph_def_program_hash`: `meta_graphs[0].graph_def` after `SimpleDelete`;
/// - `signature_def_hash`: for each signature in key order, `Cat(h, FP64(key))` then
///   `Cat(h, FP64(ser(SignatureDef)))`;
/// - `saved_object_graph_hash`: see [`object_graph_hash`].
pub fn hashes(pb_file: &Path) -> Result<Hashes> {
    let desc = descriptor("tensorflow.SavedModel")?;
    let bytes = map_file(pb_file)?;
    let model = WireMessage::parse(&bytes, Some(desc.clone()))
        .map_err(|error| SavedModelError::malformed(pb_file.display().to_string(), error))?;
    let mut enc = Encoder::new();
    // A model written deterministically (as TensorFlow and unbound write it) is hashed as it
    // is, and its graph's nodes need no second scan below.
    let canonical = enc.is_canonical(&bytes, &desc);
    let saved_model_checksum = if canonical {
        fingerprint64(&bytes)
    } else {
        hash_message(&mut enc, &[Source::Ref(&model)], &desc)?
    };

    let meta_graph = [first_meta_graph(&model)?];
    let graph_desc = descriptor("tensorflow.GraphDef")?;
    let mut graph = merged(
        &field_sources(&meta_graph, meta_graph_def::GRAPH_DEF)?,
        &graph_desc,
    )?;
    simple_delete(&mut graph)?;
    // Every serialized field of `graph` is the value of the same GraphDef field in the model
    // just found canonical (edited nodes are built messages, encoded as usual).
    enc.trust_children(canonical);
    let graph_def_program_hash = hash_message(&mut enc, &[Source::Ref(&graph)], &graph_desc)?;
    enc.trust_children(false);
    drop(graph);

    let signature_def_hash = signature_hashes(&mut enc, &meta_graph[0])?
        .into_iter()
        .fold(0, |h, (key, sig)| {
            fingerprint_cat64(fingerprint_cat64(h, key), sig)
        });
    let object_graph = field_sources(&meta_graph, meta_graph_def::OBJECT_GRAPH_DEF)?;
    let saved_object_graph_hash = object_graph_hash(&mut enc, &object_graph)?;
    Ok(Hashes {
        saved_model_checksum,
        graph_def_program_hash,
        signature_def_hash,
        saved_object_graph_hash,
    })
}

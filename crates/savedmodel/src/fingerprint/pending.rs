//! A `.cpb`'s fingerprint completed from the canonical form of its graph's nodes that a
//! writer makes anyway.
//!
//! `merge` compares a `.cpb`'s stored `fingerprint.pb` with the model before writing it. All
//! of the fingerprint comes cheaply from the chunks (their prints, taken as the merge decodes
//! them) and from the small messages, but for the canonical form of the graph's nodes, which
//! `FP64(ser(graph_def))` hashes: the very bytes `merge` writes inside the model's. So the
//! nodes are encoded once, for both (issue 29: a second encoding was 4 of the 18 s of a merge
//! of the non-canonical 3M-node `.cpb`). They are taken from the canonical form made of this
//! model, or encoded from the model held, never from another file's bytes.

use std::path::PathBuf;

use unbound_proto::fields::tensorflow::{graph_def, meta_graph_def, saved_model};
use unbound_proto::tensorflow::FingerprintDef;
use unbound_wire::codec::{read_field, WireType};
use unbound_wire::{WireMessage, WireValue};

use super::cpb::{hashes_but_nodes_of, PendingHashes};
use super::farmhash::Fingerprint64;
use super::hashes::{descriptor, field_sources, first_meta_graph, merged};
use super::streamed::graph_nodes_then;
use super::{checkpoint_hash, definition, fingerprinted, model_fault, naming_file};
use crate::dir::SavedModel;
use crate::shared_cpb::SharedCpb;
use crate::Result;

/// A `.cpb`'s fingerprint, maybe but for the canonical form of its graph's nodes.
pub(crate) struct PendingFingerprint {
    hashes: PendingHashes,
    checkpoint_hash: u64,
    /// The `.cpb`, named by errors.
    file: PathBuf,
}

impl PendingFingerprint {
    /// The fingerprint of the `.cpb` of the opened `model`, read through `shared` (the same
    /// file), maybe but for its graph's nodes ([`hashes_but_nodes_of`]).
    pub(crate) fn of(model: &SavedModel, shared: &SharedCpb) -> Result<Self> {
        let file = fingerprinted(model)?;
        let root = shared.metadata.message.clone().unwrap_or_default();
        let hashes = hashes_but_nodes_of(&shared.chunks, &root, Some(&shared.prints))
            .map_err(|e| naming_file(file, e))?;
        Ok(Self {
            hashes,
            checkpoint_hash: checkpoint_hash(model.dir()),
            file: file.to_path_buf(),
        })
    }

    /// The fingerprint, the graph's nodes taken from `canonical`: the canonical form (what
    /// the encoder made) of this very model.
    pub(crate) fn complete_from_canonical(self, canonical: &[u8]) -> Result<FingerprintDef> {
        self.complete(|others| {
            let nodes = graph_nodes_of_canonical(canonical)?;
            let mut hash = Fingerprint64::new();
            hash.update(nodes);
            hash.update(others);
            Ok(hash.finish())
        })
    }

    /// The fingerprint, the graph's nodes encoded from `model`, this very model as merged.
    pub(crate) fn complete_from_model(self, model: &WireMessage) -> Result<FingerprintDef> {
        self.complete(|others| graph_nodes_of_model_then(model, others))
    }

    fn complete(self, graph_print: impl FnOnce(&[u8]) -> Result<u64>) -> Result<FingerprintDef> {
        let file = self.file;
        let hashes = self
            .hashes
            .complete(graph_print)
            .map_err(|e| naming_file(&file, e))?;
        Ok(definition(hashes, self.checkpoint_hash, true))
    }
}

/// The canonical form of the nodes of `meta_graphs[0].graph_def` of the SavedModel whose
/// canonical form is `canonical`: the run of nodes its graph starts with, as it lies (a
/// message nested in a canonical message is canonical, a singular one occurs once, and a
/// `GraphDef`'s nodes, field 1, come first).
fn graph_nodes_of_canonical(canonical: &[u8]) -> Result<&[u8]> {
    let meta_graph = first_len_field(canonical, saved_model::META_GRAPHS)?
        .ok_or_else(|| model_fault("the SavedModel has no meta graph to fingerprint"))?;
    let graph = first_len_field(meta_graph, meta_graph_def::GRAPH_DEF)?.unwrap_or_default();
    let mut pos = 0;
    while pos < graph.len() {
        let at = pos;
        let field = read_field(graph, &mut pos).map_err(unparsed)?;
        if field.number != graph_def::NODE || field.wire_type != WireType::Len {
            return Ok(&graph[..at]);
        }
    }
    Ok(graph)
}

/// `Fingerprint64` of the canonical form of the nodes of `meta_graphs[0].graph_def` of
/// `model`, then of `others`: the nodes read where the merge left them (slices of its
/// chunks), encoded by the byte encoder on every core.
fn graph_nodes_of_model_then(model: &WireMessage, others: &[u8]) -> Result<u64> {
    let meta_graph = [first_meta_graph(model)?];
    let sources = field_sources(&meta_graph, meta_graph_def::GRAPH_DEF)?;
    let desc = descriptor("tensorflow.GraphDef")?;
    let graph = merged(&sources, &desc)?;
    // A node held built (expanded by the merge) is written out; the others are slices.
    let mut nodes = Vec::new();
    for field in &graph.fields {
        match &field.value {
            _ if field.number != graph_def::NODE => {}
            WireValue::Bytes(payload) => nodes.push(payload.bytes().map_err(model_fault_of)?),
            WireValue::Message(node) => {
                nodes.push(bytes::Bytes::from(node.to_vec().map_err(model_fault_of)?))
            }
            _ => {}
        }
    }
    graph_nodes_then(&nodes, others)
}

fn model_fault_of(e: impl std::fmt::Display) -> crate::SavedModelError {
    model_fault(e.to_string())
}

/// The payload of the first length-delimited field `number` of `message`.
fn first_len_field(message: &[u8], number: u32) -> Result<Option<&[u8]>> {
    let mut pos = 0;
    while pos < message.len() {
        let field = read_field(message, &mut pos).map_err(unparsed)?;
        if field.number == number && field.wire_type == WireType::Len {
            return Ok(Some(&message[field.start..field.end]));
        }
    }
    Ok(None)
}

fn unparsed(e: unbound_wire::DecodeError) -> crate::SavedModelError {
    model_fault(format!(
        "the canonical form made of the model does not parse: {e}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::fingerprint_model;
    use crate::show::unmerged::tests::{write_model, Layout};
    use unbound_chunked::Merger;
    use unbound_records::Compression;
    use unbound_test_support::fingerprint_fields;

    /// A `.cpb` whose graph's chunks hold library functions too, with a chunk of the library
    /// below the graph (left out of the graph TensorFlow hashes): completed from the merged
    /// model's canonical form, and from the model, the fingerprint is the one computed whole.
    /// With a chunk of the graph's `versions`, the nodes are not left (made whole instead).
    #[test]
    fn completed_from_the_nodes_it_is_the_fingerprint_made_whole() {
        for layout in [
            Layout::Interleaved,
            Layout::BaseWithoutLibrary,
            Layout::VersionsChunk,
        ] {
            let dir = tempfile::tempdir().unwrap();
            write_model(dir.path(), Compression::Brotli { level: 5 }, layout, |_| {});
            let opened = SavedModel::open(dir.path()).unwrap();
            let whole = fingerprint_model(&opened).unwrap();
            let shared = SharedCpb::open(&opened, None).unwrap();
            let pending = || PendingFingerprint::of(&opened, &shared).unwrap();
            let left = matches!(pending().hashes, PendingHashes::NodesElsewhere { .. });
            assert_eq!(left, layout != Layout::VersionsChunk, "{layout:?}");
            let root = shared.metadata.message.clone().unwrap();
            let desc = crate::dir::saved_model_descriptor().unwrap();
            let model = Merger::new(&shared.chunks).merge(&desc, &root).unwrap();
            let canonical =
                super::super::streamed::canonical_model(&model.to_vec().unwrap()).unwrap();
            let from_canonical = pending().complete_from_canonical(&canonical).unwrap();
            assert_eq!(
                fingerprint_fields(&from_canonical),
                fingerprint_fields(&whole),
                "{layout:?}"
            );
            let from_model = pending().complete_from_model(&model).unwrap();
            assert_eq!(
                fingerprint_fields(&from_model),
                fingerprint_fields(&whole),
                "{layout:?}"
            );
        }
    }

    /// Were the library's chunk not left out, the graph's hash would differ: the test above
    /// tells the pruned graph from the merged one.
    #[test]
    fn the_merged_graph_is_not_the_graph_hashed() {
        let dir = tempfile::tempdir().unwrap();
        write_model(dir.path(), Compression::None, Layout::Interleaved, |_| {});
        let opened = SavedModel::open(dir.path()).unwrap();
        let shared = SharedCpb::open(&opened, None).unwrap();
        let root = shared.metadata.message.clone().unwrap();
        let desc = crate::dir::saved_model_descriptor().unwrap();
        let model = Merger::new(&shared.chunks).merge(&desc, &root).unwrap();
        let canonical = super::super::streamed::canonical_model(&model.to_vec().unwrap()).unwrap();
        let meta_graph = first_len_field(&canonical, saved_model::META_GRAPHS)
            .unwrap()
            .unwrap();
        let graph = first_len_field(meta_graph, meta_graph_def::GRAPH_DEF)
            .unwrap()
            .unwrap();
        let PendingHashes::NodesElsewhere { others, .. } =
            PendingFingerprint::of(&opened, &shared).unwrap().hashes
        else {
            panic!("nodes not left");
        };
        let nodes = graph_nodes_of_canonical(&canonical).unwrap();
        assert!(graph.starts_with(nodes) && nodes.len() < graph.len());
        assert_ne!(&graph[nodes.len()..], &others[..]);
    }
}

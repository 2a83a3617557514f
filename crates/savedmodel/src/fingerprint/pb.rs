//! `CreateFingerprintDefPb`: the fingerprint of a `saved_model.pb`.

use std::path::Path;

use crate::SavedModelError;
use unbound_io::map_file;
use unbound_proto::fields::tensorflow::meta_graph_def;
use unbound_wire::{WireField, WireMessage, WireValue};

use super::canonical::{CheckedSlices, Encoder, Source};
use super::farmhash::{fingerprint64, fingerprint_cat64};
use super::graph_in_place::{canonical_graph_check, canonical_graph_hash};
use super::hashes::{
    descriptor, field_sources, first_meta_graph, hash_message, merged, object_graph_hash,
    signature_hashes,
};
use super::regularize::{simple_delete, simple_deleted};
use super::{CanonicalVerdict, Hashes, Result};

/// The hash fields for the SavedModel in `pb_file`:
///
/// - `saved_model_checksum`: the whole model;
/// - `graph_def_program_hash`: `meta_graphs[0].graph_def` after `SimpleDelete`;
/// - `signature_def_hash`: for each signature in key order, `Cat(h, FP64(key))` then
///   `Cat(h, FP64(ser(SignatureDef)))`;
/// - `saved_object_graph_hash`: see [`object_graph_hash`].
///
/// The whole-model canonical check is made in the mode that also checks what protobuf C++
/// checks when it parses when `verdict` is given, and its answer published there.
pub fn hashes(pb_file: &Path, verdict: Option<&CanonicalVerdict>) -> Result<Hashes> {
    hashes_unless_canonical(pb_file, verdict, true).map(|hashes| hashes.expect("asked for"))
}

/// What [`hashes`] would refuse, refused the same way, without hashing when it can be
/// helped: of a model whose bytes are canonical, only the regularization of its graph (a call
/// node without its function, say) and the signature and object-graph hashes (a concrete
/// function name without a numeric suffix) can fail, so those are made, but the whole-model
/// and graph hashes, two passes over all of its bytes, are not. For a verification that has
/// no stored fingerprint to compare them with (issue 15: they were a tenth of a split of a
/// model of millions of nodes). `Some` hashes when they were computed anyway (a model that
/// is not canonical takes the whole way). The canonical check is the one that also checks
/// what protobuf C++ checks when it parses, whose answer `verdict` gets: only a model valid
/// that way is known not to fail where it is not hashed.
pub fn check(pb_file: &Path, verdict: &CanonicalVerdict) -> Result<Option<Hashes>> {
    hashes_unless_canonical(pb_file, Some(verdict), false)
}

/// [`hashes`], or with `!hash_canonical` (and a `verdict`) [`check`].
fn hashes_unless_canonical(
    pb_file: &Path,
    verdict: Option<&CanonicalVerdict>,
    hash_canonical: bool,
) -> Result<Option<Hashes>> {
    let desc = descriptor("tensorflow.SavedModel")?;
    let bytes = map_file(pb_file)?;
    let model = WireMessage::parse(&bytes, Some(desc.clone()))
        .map_err(|error| SavedModelError::malformed(pb_file.display().to_string(), error))?;
    let meta_graph = [first_meta_graph(&model)?];
    // A model written deterministically (as TensorFlow and unbound write it) is hashed as it
    // is, and its graph's nodes need no second scan. The graph is hashed on a second thread
    // on that assumption while the whole model is checked (issue 15: the two are most of the
    // time, and neither needs the other), and again without it if the check fails.
    let (canonical, graph_hash) = std::thread::scope(|s| {
        let graph = s.spawn(|| {
            if hash_canonical {
                graph_program_hash(&meta_graph, true).map(Some)
            } else {
                graph_program_check(&meta_graph)
            }
        });
        let canonical = match verdict {
            Some(verdict) => {
                let valid = Encoder::new().is_canonical_and_valid(&bytes, &desc);
                verdict.publish(valid);
                valid
            }
            None => Encoder::new().is_canonical(&bytes, &desc),
        };
        let graph = graph
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (canonical, graph)
    });
    let graph_def_program_hash = match (canonical, graph_hash) {
        (true, graph_hash) => match graph_hash? {
            Some(hash) => hash,
            None => {
                small_hashes(&meta_graph, 0, 0)?;
                return Ok(None);
            }
        },
        (false, _) => graph_program_hash(&meta_graph, false)?,
    };
    let saved_model_checksum = if canonical {
        fingerprint64(&bytes)
    } else {
        hash_message(&mut Encoder::new(), &[Source::Ref(&model)], &desc)?
    };
    small_hashes(&meta_graph, saved_model_checksum, graph_def_program_hash).map(Some)
}

/// [`hashes`] of a `saved_model.pb` holding `model`, from the message itself (a model merged
/// in memory, about to be written): the same hashes, since they are hashes of the model's
/// deterministic serialization, whatever bytes the file holds. The whole model and its graph
/// are hashed on two threads. Both meet the graph's nodes: when the graph is held as a message
/// (as a merge builds it), its serialized children are checked once first, on two threads,
/// and then trusted by both hashes (issue 15: checked by each, they were half of a merge of a
/// model of millions of nodes). Those `known` vouches for (checked by verify's fingerprint of
/// the `.cpb` the model was merged from) are not checked again.
pub(crate) fn hashes_of_model(
    model: &WireMessage,
    known: Option<&CheckedSlices>,
) -> Result<Hashes> {
    let desc = descriptor("tensorflow.SavedModel")?;
    let meta_graph = [first_meta_graph(model)?];
    let graph = held_graph(&meta_graph[0]);
    let mut checked = Vec::new();
    let held = graph;
    let trusted = match graph {
        Some(graph) => Encoder::new().children_canonical(
            graph,
            &descriptor("tensorflow.GraphDef")?,
            NODE_LEVEL,
            known,
            &mut checked,
        ),
        None => false,
    };
    let (checksum, graph_hash) = std::thread::scope(|s| {
        let graph_hash = s.spawn(|| {
            if let (true, Some(graph)) = (trusted, held) {
                checked_graph_hash(graph)
            } else {
                graph_program_hash(&meta_graph, false)
            }
        });
        let mut enc = Encoder::new();
        if trusted {
            enc.trust_children_of(&checked);
        }
        let checksum = hash_message(&mut enc, &[Source::Ref(model)], &desc);
        let graph_hash = graph_hash
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (checksum, graph_hash)
    });
    small_hashes(&meta_graph, checksum?, graph_hash?)
}

/// `graph_def_program_hash` of a graph held as a built message whose serialized messages were
/// all checked canonical ([`Encoder::children_canonical`]): after `SimpleDelete` every
/// serialized message in it, at any depth, is one of those or a slice of one, and is taken as
/// it is.
///
/// The graph is `SimpleDelete`d as a view of it, not a copy ([`simple_deleted`]).
fn checked_graph_hash(graph: &WireMessage) -> Result<u64> {
    let graph_desc = descriptor("tensorflow.GraphDef")?;
    let edited = simple_deleted(graph, true)?;
    let mut enc = Encoder::new();
    enc.trust_descendants();
    hash_message(&mut enc, &[Source::Edited(&edited)], &graph_desc)
}

/// The nesting at which the whole-model hash meets a graph's nodes (in `SavedModel`,
/// `meta_graphs`, `graph_def`).
const NODE_LEVEL: usize = 3;

/// `meta_graph`'s graph, when it is held as one built message (not serialized bytes, which
/// [`graph_program_hash`] would take as a whole when trusted) and occurs once.
fn held_graph<'m>(meta_graph: &Source<'m>) -> Option<&'m WireMessage> {
    let Source::Ref(meta) = meta_graph else {
        return None;
    };
    let mut graphs = meta
        .fields
        .iter()
        .filter(|f| f.number == meta_graph_def::GRAPH_DEF);
    match (graphs.next(), graphs.next()) {
        (
            Some(WireField {
                value: WireValue::Message(graph),
                ..
            }),
            None,
        ) => Some(graph),
        _ => None,
    }
}

/// The hashes of `meta_graph`'s signatures and object graph, with the two large ones.
fn small_hashes(
    meta_graph: &[Source<'_>; 1],
    saved_model_checksum: u64,
    graph_def_program_hash: u64,
) -> Result<Hashes> {
    let mut enc = Encoder::new();
    let signature_def_hash = signature_hashes(&mut enc, &meta_graph[0])?
        .into_iter()
        .fold(0, |h, (key, sig)| {
            fingerprint_cat64(fingerprint_cat64(h, key), sig)
        });
    let object_graph = field_sources(meta_graph, meta_graph_def::OBJECT_GRAPH_DEF)?;
    let saved_object_graph_hash = object_graph_hash(&mut enc, &object_graph)?;
    Ok(Hashes {
        saved_model_checksum,
        graph_def_program_hash,
        signature_def_hash,
        saved_object_graph_hash,
    })
}

/// What [`graph_program_hash`] of a canonical graph would refuse, without hashing when the
/// graph is hashed in place ([`canonical_graph_check`]; `None`), else its hash.
fn graph_program_check(meta_graph: &[Source<'_>]) -> Result<Option<u64>> {
    let sources = field_sources(meta_graph, meta_graph_def::GRAPH_DEF)?;
    match canonical_graph_check(&sources)? {
        Some(()) => Ok(None),
        None => graph_program_hash(meta_graph, true).map(Some),
    }
}

/// `graph_def_program_hash`: the hash of `meta_graph`'s graph after `SimpleDelete`, its
/// nodes taken as they are when `trusted` (the whole model was found canonical: every node is
/// then a slice of it that is canonical too; edited nodes are built messages, encoded as
/// usual).
fn graph_program_hash(meta_graph: &[Source<'_>], trusted: bool) -> Result<u64> {
    let graph_desc = descriptor("tensorflow.GraphDef")?;
    let sources = field_sources(meta_graph, meta_graph_def::GRAPH_DEF)?;
    if trusted {
        if let Some(hash) = canonical_graph_hash(&sources)? {
            return Ok(hash);
        }
    }
    let mut graph = merged(&sources, &graph_desc)?;
    simple_delete(&mut graph)?;
    let mut enc = Encoder::new();
    enc.trust_children(trusted);
    hash_message(&mut enc, &[Source::Ref(&graph)], &graph_desc)
}

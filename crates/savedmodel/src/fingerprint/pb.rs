//! `CreateFingerprintDefPb`: the fingerprint of a `saved_model.pb`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::SavedModelError;
use bytes::Bytes;
use unbound_proto::fields::tensorflow::meta_graph_def;
use unbound_wire::WireMessage;

use super::canonical::{Encoder, Source};
use super::farmhash::{fingerprint64, fingerprint_cat64};
use super::graph_in_place::{
    canonical_graph_check, canonical_graph_hash, canonical_graph_hash_unless,
};
use super::hashes::{
    descriptor, field_sources, first_meta_graph, hash_message, merged, object_graph_hash,
    signature_hashes,
};
use super::regularize::simple_delete;
use super::streamed;
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
/// `made_canonical` says `bytes` are a canonical form the validating encoder made (see
/// [`crate::SavedModel::canonicalized`]): they are not checked again, and a `verdict` is
/// told they are canonical and valid.
pub fn hashes(
    bytes: &Bytes,
    pb_file: &Path,
    verdict: Option<&CanonicalVerdict>,
    made_canonical: bool,
) -> Result<Hashes> {
    hashes_unless_canonical(bytes, pb_file, verdict, true, made_canonical)
        .map(|(hashes, _)| hashes.expect("asked for"))
}

/// [`hashes`], and the model's canonical form when its bytes are not canonical (made on the
/// way: the hashes are those of that form). A writer puts it in place of the file it wrote
/// (see `write.rs`), so that every `.pb` unbound writes is what protobuf C++ writes, byte for
/// byte, and its fingerprint, computed from those bytes, describes the file.
pub fn hashes_and_canonical_form(bytes: &Bytes, pb_file: &Path) -> Result<(Hashes, Option<Bytes>)> {
    hashes_unless_canonical(bytes, pb_file, None, true, false)
        .map(|(hashes, canonical)| (hashes.expect("asked for"), canonical))
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
///
/// `made_canonical` says `bytes` are a canonical form the validating encoder made (see
/// [`crate::SavedModel::canonicalized`]): canonical and valid by construction, answered so
/// without a check.
pub fn check(
    bytes: &Bytes,
    pb_file: &Path,
    verdict: &CanonicalVerdict,
    made_canonical: bool,
) -> Result<Option<Hashes>> {
    hashes_unless_canonical(bytes, pb_file, Some(verdict), false, made_canonical)
        .map(|(hashes, _)| hashes)
}

/// [`hashes`], or with `!hash_canonical` (and a `verdict`) [`check`], of `bytes`, the model
/// read from `pb_file` (its mapping, or its canonical form: see
/// [`crate::SavedModel::canonicalized`]), taken as canonical and valid without a check when
/// `known_canonical` (a form the validating encoder made).
fn hashes_unless_canonical(
    bytes: &Bytes,
    pb_file: &Path,
    verdict: Option<&CanonicalVerdict>,
    hash_canonical: bool,
    known_canonical: bool,
) -> Result<(Option<Hashes>, Option<Bytes>)> {
    let desc = descriptor("tensorflow.SavedModel")?;
    let model = WireMessage::parse(bytes, Some(desc.clone()))
        .map_err(|error| SavedModelError::malformed(pb_file.display().to_string(), error))?;
    let meta_graph = [first_meta_graph(&model)?];
    // A model written deterministically (as TensorFlow and unbound write it) is hashed as it
    // is, and its graph's nodes need no second scan. The graph is hashed in place on a second
    // thread on that assumption while the whole model is checked (issue 15: the two are most
    // of the time, and neither needs the other); the hash is dropped if the check fails.
    let not_canonical = AtomicBool::new(false);
    let (canonical, graph_hash) = std::thread::scope(|s| {
        let graph = s.spawn(|| {
            if hash_canonical {
                let sources = field_sources(&meta_graph, meta_graph_def::GRAPH_DEF)?;
                canonical_graph_hash_unless(&sources, &not_canonical)
            } else {
                graph_program_check(&meta_graph)
            }
        });
        let canonical = match verdict {
            _ if known_canonical => {
                if let Some(verdict) = verdict {
                    verdict.publish(true);
                }
                true
            }
            Some(verdict) => {
                let valid = Encoder::new().is_canonical_and_valid(bytes, &desc);
                verdict.publish(valid);
                valid
            }
            None => Encoder::new().is_canonical(bytes, &desc),
        };
        not_canonical.store(!canonical, Ordering::Relaxed);
        let graph = graph
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (canonical, graph)
    });
    if canonical {
        let graph_def_program_hash = match graph_hash? {
            Some(hash) => hash,
            None if hash_canonical => graph_program_hash(&meta_graph, true)?,
            None => {
                small_hashes(&meta_graph, 0, 0)?;
                return Ok((None, None));
            }
        };
        let saved_model_checksum = fingerprint64(bytes);
        let hashes = small_hashes(&meta_graph, saved_model_checksum, graph_def_program_hash)?;
        return Ok((Some(hashes), None));
    }
    // Not canonical: its canonical form, made in memory, is hashed as a canonical model is.
    let canonical = Bytes::from(streamed::canonical_model(bytes)?);
    let model = WireMessage::parse(&canonical, Some(desc))
        .map_err(|error| SavedModelError::malformed(pb_file.display().to_string(), error))?;
    let meta_graph = [first_meta_graph(&model)?];
    let sources = field_sources(&meta_graph, meta_graph_def::GRAPH_DEF)?;
    let graph_def_program_hash = match canonical_graph_hash(&sources)? {
        Some(hash) => hash,
        None => graph_program_hash(&meta_graph, true)?,
    };
    let hashes = small_hashes(
        &meta_graph,
        fingerprint64(&canonical),
        graph_def_program_hash,
    )?;
    Ok((Some(hashes), Some(canonical)))
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

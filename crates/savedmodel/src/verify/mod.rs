//! `verify`: checks a whole SavedModel directory and reports every problem found, each naming
//! the file and the fault.
//!
//! - `saved_model.cpb`: every Riegeli chunk (header and data hashes, decoding); the chunk
//!   metadata (types, record positions and sizes, chunk indices and field tags of the tree);
//!   that the chunks merge into a message that serializes; that the merged message is a valid
//!   `SavedModel` (wire structure and field types checked against the schema, strings UTF-8).
//! - `saved_model.pb` / `.pbtxt`: that it parses as a `SavedModel`.
//! - `variables/`: every tensor's size, offset and checksum, missing shards, a damaged index
//!   ([`unbound_bundle::BundleReader::verify`]); that every variable the object graphs name exists in the bundle.
//! - `assets/`: every file `asset_file_def` names exists.
//! - a second model file beside the one used (`saved_model.pb` beside `saved_model.cpb`):
//!   that it parses too.
//! - that the model holds at least one MetaGraphDef.
//! - `fingerprint.pb`: that it parses and that every hash it stores (model checksum, graph,
//!   signature and object-graph hashes, checkpoint hash) equals the one computed now.
//! - that `show`, `fingerprint` and `vars` succeed: whatever another command refuses, verify
//!   refuses.
//!
//! [`verified_model`] is the same check for `split` and `merge`, which refuse what verify
//! rejects.

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use prost::Message as _;
use prost_reflect::MessageDescriptor;
use serde::Serialize;
use unbound_chunked::check::{
    check_chunks, check_chunks_deferring, check_chunks_leaving, check_deferred, complete_deferred,
};
use unbound_chunked::merger::FileChunks;
use unbound_chunked::Merger;
use unbound_proto::fields::tensorflow::{meta_graph_def, saved_model};
use unbound_proto::tensorflow::{saved_object::Kind as ObjectKind, FingerprintDef, MetaGraphDef};
use unbound_records::RecordReader;
use unbound_wire::WireMessage;

use crate::dir::{read_text, saved_model_descriptor, ModelFile, SavedModel};
use crate::fingerprint::{
    check_model_sharing, fingerprint_cpb_seeing, fingerprint_model_sharing, CanonicalVerdict,
    PendingFingerprint,
};
use crate::format::{ModelFormat, FINGERPRINT_FILE};
use crate::shared_cpb::SharedCpb;
use crate::show::unmerged::{leavable, LeavingGraphChunks};
use crate::show::{objects::checkpoint_keys_by_path, wire, ScannedChunks};
use crate::{Result, SavedModelError};
use unbound_bundle::BundleReader;

pub use crate::error::Fault;

mod left_chunks;
mod schema;

use schema::Schema;

/// What [`verify_dir`] found: the report `unbound verify` prints (each fault as a
/// `FILE: FAULT` line, or `OK: DIR: ` and the `checked` phrases joined by `; `).
#[derive(Debug, Default, Clone, Serialize)]
pub struct VerifyReport {
    /// Every problem, in the order found; empty when the directory is sound.
    pub faults: Vec<Fault>,
    /// What was checked, one short phrase per part (for the summary line).
    pub checked: Vec<String>,
}

impl VerifyReport {
    fn fault(&mut self, file: &Path, fault: impl fmt::Display) {
        // Errors of lower layers often start with the file name already.
        let text = fault.to_string();
        let prefix = format!("{}: ", file.display());
        let text = text.strip_prefix(&prefix).unwrap_or(&text).to_string();
        self.faults.push(Fault {
            file: file.to_path_buf(),
            fault: text,
        });
    }
}

/// Checks everything in the SavedModel directory `dir`.
pub fn verify_dir(dir: &Path) -> VerifyReport {
    match SavedModel::open(dir) {
        // A `.pb` not in canonical form is checked as its canonical form, made once, on the
        // paths of a canonical model (the same answers: issue 29).
        Ok(model) => verify_model(&crate::fingerprint::in_canonical_form(model)),
        Err(e) => {
            let mut report = VerifyReport::default();
            report.fault(dir, e);
            report
        }
    }
}

/// [`verify_dir`] of a SavedModel already opened.
pub fn verify_model(model: &SavedModel) -> VerifyReport {
    verify_with_model(model, Keep::ReportOnly, SchemaCheck::Now, None).0
}

/// What a verification keeps of the model beyond its verdict.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// The fingerprint of its model file, for a `split` that may write that file as it is.
    Fingerprint,
    /// No fingerprint: it is computed only as far as a stored `fingerprint.pb` needs comparing
    /// and as the computation could fail ([`check_model_sharing`]).
    Nothing,
    /// No fingerprint, and for a `.cpb` none computed unless a stored `fingerprint.pb` needs
    /// comparing (a `.pb` is checked as with [`Keep::Nothing`]: cheap when canonical):
    /// for a `merge`, which fingerprints the `.pb` it writes of the same message, and so
    /// fails wherever a fingerprint of it fails (the regularization of its graph, its depth,
    /// a signature's or a function's name), and is refused as verify refuses it. A `.cpb`'s
    /// fingerprint is most of the cost of verifying it (issue 29: half a merge of a model of
    /// 300,000 nodes not in canonical form). When a `.cpb`'s stored fingerprint needs
    /// comparing, it is computed but for its graph's print ([`Verified::pending`]), which the
    /// caller makes from the graph's canonical form it makes anyway, and compares
    /// ([`compare_with_stored`]).
    Unfingerprinted,
    /// Nothing but the report (`verify` itself): as [`Keep::Nothing`], and a `.cpb` whose graph
    /// is in large chunks is checked without merging them (`left_chunks.rs`), so the model
    /// kept is not the whole model.
    ReportOnly,
}

/// A model [`verified_model_keeping`] read, with what verify learnt of it.
pub(crate) struct Verified {
    /// The SavedModel proto.
    pub model: WireMessage,
    /// The fingerprint computed for its model file (none for a `.pbtxt`, nor, with
    /// [`Keep::Nothing`], for a canonical `.pb` with no `fingerprint.pb` beside it).
    pub fingerprint: Option<FingerprintDef>,
    /// Whether its model file is a `.pb` whose bytes are canonical (its deterministic
    /// serialization) and valid ([`CanonicalVerdict`]): every message `model` holds
    /// serialized is then canonical too.
    pub canonical: bool,
    /// With [`Keep::Unfingerprinted`], the fingerprint of a `.cpb` with a stored one, but for
    /// its graph's print: the caller completes it and compares it ([`compare_with_stored`]);
    /// the stored one has not been compared yet.
    pub pending: Option<PendingFingerprint>,
}

/// The SavedModel proto of the opened `model` (its `.cpb`, else `.pb`, else `.pbtxt`), read
/// only when [`verify_model`] finds no problem anywhere in the directory: what `split` and
/// `merge` read, so they never write a model from a directory `verify` rejects
/// ([`SavedModelError::Unverified`] lists what it found).
pub fn verified_model(model: &SavedModel) -> Result<WireMessage> {
    verified_model_keeping(model, Keep::Nothing).map(|verified| verified.model)
}

/// [`verified_model`] for a writer that fingerprints the model file it writes of the same
/// message ([`Keep::Unfingerprinted`]): the source's fingerprint is computed only to compare
/// it with a stored one.
pub(crate) fn verified_model_to_fingerprint_again(model: &SavedModel) -> Result<Verified> {
    verified_model_keeping(model, Keep::Unfingerprinted)
}

/// Whether the schema check of a `.cpb`'s merged message is made by the verification.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum SchemaCheck {
    /// Made: the model returned is valid.
    Now,
    /// Left to the caller ([`verified_model_but_schema`]).
    ByTheCaller,
}

/// [`verified_model_to_fingerprint_again`] but for the schema check of a `.cpb`'s merged
/// message, which the caller makes: `merge` writes the canonical form of a model whose
/// chunks are mostly not canonical, made by the encoder that refuses what protobuf C++
/// refuses to parse (`fingerprint::streamed::canonical_model`), which is that check made on
/// the way (issue 29: the check was an eighth of such a merge); it checks any other model
/// itself ([`check_merged_schema`]). Where either finds a fault, or this verification finds
/// any (it may word one differently, having gone on past an invalid message), the caller
/// words it by verifying the model the usual way ([`verified_model_to_fingerprint_again`]).
pub(crate) fn verified_model_but_schema(model: &SavedModel) -> Result<Verified> {
    verified_model_checking(model, Keep::Unfingerprinted, SchemaCheck::ByTheCaller, None)
}

/// The schema check [`verified_model_but_schema`] leaves to its caller, of `model`: the
/// merged message it returned. A model of another format was checked already.
pub(crate) fn check_merged_schema(opened: &SavedModel, model: &WireMessage) -> Result<()> {
    if opened.format() != ModelFormat::Cpb {
        return Ok(());
    }
    let desc = saved_model_descriptor()?;
    check_schema(
        model,
        &desc,
        &opened.model_file().path.display().to_string(),
    )
}

/// Compares `computed`, the fingerprint of the model file of `opened` completed by its caller
/// ([`Verified::pending`]), with the stored `fingerprint.pb`, in `verify`'s words: refused
/// ([`SavedModelError::Unverified`]) when a field differs.
pub(crate) fn compare_with_stored(opened: &SavedModel, computed: FingerprintDef) -> Result<()> {
    let mut report = VerifyReport::default();
    verify_fingerprint(opened, true, &Ok(Some(computed)), &mut report);
    if report.faults.is_empty() {
        return Ok(());
    }
    Err(SavedModelError::Unverified {
        dir: opened.dir().to_path_buf(),
        faults: report.faults,
    })
}

/// [`verified_model`], with what `keep` asks for and whether the model file is canonical:
/// `split` reuses the fingerprint when it writes the same bytes again ([`Keep::Fingerprint`];
/// else [`Verified::fingerprint`] may be `None`), and trusts the canonical form of what it
/// splits.
pub(crate) fn verified_model_keeping(model: &SavedModel, keep: Keep) -> Result<Verified> {
    verified_model_checking(model, keep, SchemaCheck::Now, None)
}

/// [`verified_model`], with `tap` seeing the decoded bytes of each chunk of a `.cpb` too
/// large to keep decoded as the merge streams it (and told where the values it leaves in
/// the file lie: [`unbound_chunked::TapSink::lazy_value`]): a writer that copies those
/// values (`externalize`) takes them from the one decompression the verification makes
/// instead of decompressing the chunk again. Nothing is tapped for a `.pb`, nor for a
/// `.cpb` whose chunks are not shared.
pub fn verified_model_tapped(
    model: &SavedModel,
    tap: Arc<dyn unbound_chunked::StreamTap>,
) -> Result<WireMessage> {
    verified_model_checking(model, Keep::Nothing, SchemaCheck::Now, Some(tap))
        .map(|verified| verified.model)
}

/// [`verified_model_keeping`], the schema check made as `schema` says, the streams of the
/// merge seen by `tap` if any.
fn verified_model_checking(
    model: &SavedModel,
    keep: Keep,
    schema: SchemaCheck,
    tap: Option<Arc<dyn unbound_chunked::StreamTap>>,
) -> Result<Verified> {
    let dir = model.dir();
    match verify_with_model(model, keep, schema, tap) {
        (report, Some(verified)) if report.faults.is_empty() => Ok(verified),
        (report, _) => Err(SavedModelError::Unverified {
            dir: dir.to_path_buf(),
            faults: report.faults,
        }),
    }
}

/// [`verify_dir`], also returning the model proto when it could be read, with what was
/// learnt of it and what `keep` asks for ([`Verified`]).
fn verify_with_model(
    opened: &SavedModel,
    keep: Keep,
    schema: SchemaCheck,
    tap: Option<Arc<dyn unbound_chunked::StreamTap>>,
) -> (VerifyReport, Option<Verified>) {
    let mut report = VerifyReport::default();
    let (dir, file) = (opened.dir(), opened.model_file());
    // The fingerprint is computed on a second thread while the model is read and checked:
    // both read the whole model, and neither needs the other (issue 15: it was about a fifth
    // of a merge). Used only if the model reads (see verify_fingerprint).
    // Both read a `.cpb` through one SharedCpb: each message chunk is decoded once for the
    // check, the merge and the fingerprint together.
    // `verify` of a `.cpb` whose graph is in large chunks leaves them unmerged, and checks
    // each on its own as the fingerprint decodes it (`left_chunks.rs`) rather than through a
    // shared reading that would hold them all.
    let left = (keep == Keep::ReportOnly && file.format == ModelFormat::Cpb && tap.is_none())
        .then(|| left_chunks::LeftChunks::open(opened))
        .flatten();
    let shared = match file.format {
        ModelFormat::Cpb if left.is_none() => SharedCpb::open(opened, tap),
        _ => None,
    };
    // The fingerprint hands the chunks left unmerged to their check as it decodes them.
    let (relay, relayed) = match &left {
        Some(left) => {
            let (relay, relayed) = left.relay();
            (Some(relay), Some(relayed))
        }
        None => (None, None),
    };
    // What `show` makes of the model is found on a third thread, while the model is checked
    // and fingerprinted: run last, it was a serial tail of a fifth of a verify of a model of
    // millions of nodes (issue 15). `show` reads a `.pb` itself, so that starts at once; a
    // `.cpb` is shown from the merged model, as soon as it is read. It is reported only if
    // nothing else is wrong (`verify_other_commands`), as when it ran last.
    // A `.pb`'s schema check is answered by the fingerprint's canonical check when the model
    // is canonical (see `CanonicalVerdict`); made here only when it is not.
    let verdict = (file.format == ModelFormat::Pb).then(CanonicalVerdict::default);
    // Without a stored fingerprint to compare, the fingerprint is only wanted if kept.
    let compared = opened.fingerprint_file().is_some();
    // The merge below streams the chunks too large to keep decoded, and hashes them for the
    // fingerprint as they go by: announced before the fingerprint starts, which then waits
    // for those hashes instead of streaming the chunks itself.
    let merge_ahead = shared.as_ref().map(|s| s.prints.merge_ahead());
    let mut pending = None;
    let (model, fingerprint, shown) = std::thread::scope(|s| {
        let pending = &mut pending;
        let fingerprint = s.spawn(|| {
            let (shared, verdict) = (shared.as_ref(), verdict.as_ref());
            // Ends with this thread: the check then reads what it was not handed.
            let relay = relay;
            // (A `.pb`'s check is still made: its schema check waits for the verdict.)
            if let (Some(left), Some(relay)) = (&left, &relay) {
                fingerprint_cpb_seeing(opened, &left.chunks, &left.root, relay).map(Some)
            } else if keep == Keep::Unfingerprinted && !compared && verdict.is_none() {
                Ok(None)
            } else if let Some(shared) = shared.filter(|shared| {
                keep == Keep::Unfingerprinted && shared.path == opened.model_file().path
            }) {
                // Compared by the caller once it completes it: nothing to compare here.
                PendingFingerprint::of(opened, shared).map(|p| {
                    *pending = Some(p);
                    None
                })
            } else if keep != Keep::Fingerprint && !compared {
                check_model_sharing(opened, shared, verdict)
            } else {
                fingerprint_model_sharing(opened, shared, verdict).map(Some)
            }
        });
        let shown_from_file =
            (file.format != ModelFormat::Cpb).then(|| s.spawn(|| show_check(opened, None, None)));
        let leaving = left.as_ref().zip(relayed).map(|(left, relayed)| Leaving {
            chunks: &left.chunks,
            relayed,
            scanned: &left.scanned,
            positions: left.positions(),
        });
        let model = verify_model_file(
            file,
            Some(opened),
            shared.as_ref(),
            verdict.as_ref(),
            leaving,
            schema,
            &mut report,
        )
        .map(Arc::new);
        drop(merge_ahead);
        let scanned = left.as_ref().map(|left| &left.scanned);
        let shown = match shown_from_file {
            Some(shown) => Some(shown),
            None => model
                .clone()
                .map(|model| s.spawn(move || show_check(opened, Some(&model), scanned))),
        };
        let fingerprint = joined(fingerprint);
        let shown = shown.map(joined);
        (model, fingerprint, shown)
    });
    // Both threads that shared the model have ended: it has one owner again.
    let model = model.map(|m| Arc::try_unwrap(m).unwrap_or_else(|m| (*m).clone()));
    // A model file TensorFlow ignores (a .pb beside the .cpb it prefers) is checked too: a
    // damaged one is a problem the next tool to read it would meet.
    for other in opened.passed_over() {
        let parsed =
            verify_model_file(other, None, None, None, None, SchemaCheck::Now, &mut report);
        if parsed.as_ref().is_some_and(|m| !has_meta_graph(m)) {
            report.fault(
                &other.path,
                "holds no MetaGraphDef (an unused model file, but an empty or stray one)",
            );
        } else if parsed.is_some() {
            report.checked.push(format!(
                "{} parses too (unused: {} is preferred)",
                other.format.file_name(),
                file.format.file_name()
            ));
        }
    }
    let meta_graphs = match &model {
        Some(root) => {
            let before = report.faults.len();
            let meta_graphs = decode_meta_graphs(root, dir, &mut report);
            if meta_graphs.is_empty() && report.faults.len() == before {
                report.fault(
                    &file.path,
                    "holds no MetaGraphDef: there is no model to load",
                );
            }
            meta_graphs
        }
        None => Vec::new(),
    };
    verify_variables(dir, &meta_graphs, &mut report);
    verify_assets(dir, &meta_graphs, &mut report);
    verify_fingerprint(opened, model.is_some(), &fingerprint, &mut report);
    if report.faults.is_empty() {
        let shown = shown.unwrap_or_else(|| show_check(opened, model.as_ref(), None));
        verify_other_commands(dir, file, shown, &mut report);
    }
    let fingerprint = fingerprint
        .ok()
        .flatten()
        .filter(|_| file.format != ModelFormat::Pbtxt);
    // Answered by now: the fingerprint's thread has ended, and it answers however it ends.
    let canonical = verdict.as_ref().is_some_and(CanonicalVerdict::wait);
    let verified = model.map(|model| Verified {
        model,
        fingerprint,
        canonical,
        pending,
    });
    (report, verified)
}

/// What a scoped thread returned (its panic carried on).
fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Whether the SavedModel `root` has a `meta_graphs` entry.
fn has_meta_graph(root: &WireMessage) -> bool {
    root.fields
        .iter()
        .any(|f| f.number == saved_model::META_GRAPHS)
}

/// A `.cpb` verified leaving its graph's chunks unmerged (`left_chunks.rs`).
struct Leaving<'a> {
    /// The file's chunks, opened once for every reader.
    chunks: &'a FileChunks,
    /// The chunks left, as the fingerprint decodes them, with their record positions.
    relayed: std::sync::mpsc::Receiver<(u64, bytes::Bytes)>,
    /// Where what `show` finds in them goes.
    scanned: &'a ScannedChunks,
    /// The record positions of the chunks left.
    positions: std::collections::HashSet<u64>,
}

/// Checks one model file by its format: the model file of `opened` (read from its mapping), or
/// without it one it passes over (read from its path); a `.cpb` through `shared` when it is
/// that file, or, with `leaving`, leaving its graph's chunks unmerged (`left_chunks.rs`).
fn verify_model_file(
    file: &ModelFile,
    opened: Option<&SavedModel>,
    shared: Option<&SharedCpb>,
    verdict: Option<&CanonicalVerdict>,
    leaving: Option<Leaving<'_>>,
    schema: SchemaCheck,
    report: &mut VerifyReport,
) -> Option<WireMessage> {
    match file.format {
        ModelFormat::Cpb => verify_cpb(
            &file.path,
            shared.filter(|s| s.path == file.path),
            leaving,
            schema,
            report,
        ),
        ModelFormat::Pb => verify_pb(&file.path, opened, verdict, report),
        ModelFormat::Pbtxt => {
            let read = saved_model_descriptor().and_then(|d| match opened {
                Some(opened) => opened.read_text(&d),
                None => read_text(&file.path, &d),
            });
            match read {
                Ok(m) => {
                    report
                        .checked
                        .push(format!("{} parses", file.path.display()));
                    Some(m)
                }
                Err(e) => {
                    report.fault(&file.path, e);
                    None
                }
            }
        }
    }
}

/// `fingerprint.pb`: it parses, and every hash it stores equals the one computed from the
/// files now (`computed`: TensorFlow's algorithm, [`fingerprint_dir`]); the fingerprint
/// computation itself must succeed for a `.pb` or `.cpb` model (`unbound fingerprint` would
/// fail).
fn verify_fingerprint(
    opened: &SavedModel,
    model_ok: bool,
    computed: &Result<Option<FingerprintDef>>,
    report: &mut VerifyReport,
) {
    let (dir, file) = (opened.dir(), opened.model_file());
    let path = dir.join(FINGERPRINT_FILE);
    let stored = if opened.fingerprint_file().is_some() {
        match unbound_io::map_file(&path).map(FingerprintDef::decode) {
            Ok(Ok(def)) => Some(def),
            Ok(Err(e)) => {
                report.fault(&path, format!("not a FingerprintDef: {e}"));
                return;
            }
            Err(e) => {
                report.fault(&path, e);
                return;
            }
        }
    } else {
        None
    };
    if file.format == ModelFormat::Pbtxt || !model_ok {
        if stored.is_some() {
            report.checked.push("fingerprint.pb parses".into());
        }
        return;
    }
    let computed = match computed {
        Ok(def) => def,
        Err(e) => {
            let target = e
                .path()
                .map_or_else(|| file.path.clone(), Path::to_path_buf);
            report.fault(&target, e);
            return;
        }
    };
    // Not computed only when there was nothing stored to compare it with.
    let (Some(stored), Some(computed)) = (stored, computed) else {
        return;
    };
    let fields = [
        (
            "saved_model_checksum",
            stored.saved_model_checksum,
            computed.saved_model_checksum,
            file.path.clone(),
        ),
        (
            "graph_def_program_hash",
            stored.graph_def_program_hash,
            computed.graph_def_program_hash,
            file.path.clone(),
        ),
        (
            "signature_def_hash",
            stored.signature_def_hash,
            computed.signature_def_hash,
            file.path.clone(),
        ),
        (
            "saved_object_graph_hash",
            stored.saved_object_graph_hash,
            computed.saved_object_graph_hash,
            file.path.clone(),
        ),
        (
            "checkpoint_hash",
            stored.checkpoint_hash,
            computed.checkpoint_hash,
            dir.join("variables").join("variables.index"),
        ),
    ];
    let before = report.faults.len();
    for (name, stored, now, of) in fields {
        if stored != now {
            report.fault(
                &path,
                format!(
                    "{name} is {stored}, but {} now hashes to {now}: changed after the fingerprint was written",
                    of.display()
                ),
            );
        }
    }
    if report.faults.len() == before {
        report
            .checked
            .push("fingerprint.pb matches the model and checkpoint".into());
    }
}

/// Whether `show` works on the directory. `model` is the model file as read and checked by
/// verify: `show` of a `.cpb` works from it instead of merging the chunks again (its own merge
/// leaves out large tensor contents, which it does not look at; the rest is the same message).
fn show_check(
    opened: &SavedModel,
    model: Option<&WireMessage>,
    scanned: Option<&ScannedChunks>,
) -> Result<()> {
    match model {
        Some(model) if opened.format() == ModelFormat::Cpb => opened
            .chunks()
            .and_then(|(_, metadata)| {
                crate::show::show_merged_cpb(opened, model, metadata.chunks.len() as u64, scanned)
            })
            .map(drop),
        _ => crate::show::show_model(opened).map(drop),
    }
}

/// What the other reading commands (`show`, whose result [`show_check`] found, and `vars`)
/// make of the directory: anything they refuse, `verify` refuses too.
fn verify_other_commands(
    dir: &Path,
    file: &ModelFile,
    shown: Result<()>,
    report: &mut VerifyReport,
) {
    if let Err(e) = shown {
        let target = e
            .path()
            .map_or_else(|| file.path.clone(), Path::to_path_buf);
        report.fault(&target, format!("`unbound show` fails: {e}"));
    }
    let listed = crate::vars::open_variables(dir).and_then(|vars| match vars {
        Some(v) => v.report(None).map(drop).map_err(SavedModelError::from),
        None => Ok(()),
    });
    if let Err(e) = listed {
        let target = e
            .path()
            .map_or_else(|| dir.to_path_buf(), Path::to_path_buf);
        report.fault(&target, format!("`unbound vars` fails: {e}"));
    }
}

/// A `.pb`: it must parse as a `SavedModel`; read from the mapping of `opened` when it is its
/// model file. With `verdict` (the fingerprint of this same file, on another thread, says
/// whether it is canonical and valid), a canonical model needs no schema check of its own.
fn verify_pb(
    path: &Path,
    opened: Option<&SavedModel>,
    verdict: Option<&CanonicalVerdict>,
    report: &mut VerifyReport,
) -> Option<WireMessage> {
    let desc = saved_model_descriptor().ok()?;
    let read = match opened {
        Some(opened) => opened.read_pb(&desc),
        None => unbound_chunked::read_pb(path, &desc).map_err(SavedModelError::from),
    };
    let root = match read {
        Ok(m) => m,
        Err(e) => {
            report.fault(path, e);
            return None;
        }
    };
    let checked = match verdict {
        Some(verdict) if verdict.wait() => Ok(()),
        _ => check_message(&root, &desc),
    };
    match checked {
        Ok(()) => {
            report.checked.push(format!("{} parses", file_name(path)));
            Some(root)
        }
        Err(e) => {
            report.fault(path, format!("not a valid SavedModel: {e}"));
            None
        }
    }
}

/// A `.cpb`: Riegeli chunks, metadata and layout ([`check_chunks`], the checker every
/// command shares), merge, and the merged message. With `shared` (the same file, opened for
/// sharing), the check and the merge read its kept chunks through its cache. With `leaving`,
/// the chunks of its graphs are left unmerged and checked as the fingerprint hands them over
/// (`left_chunks.rs`): the model returned stands for the merged one, but is not it. Any fault
/// found so has the file verified again the usual way, which words it as always. The merged
/// message's schema is checked as `schema` says.
fn verify_cpb(
    path: &Path,
    shared: Option<&SharedCpb>,
    leaving: Option<Leaving<'_>>,
    schema: SchemaCheck,
    report: &mut VerifyReport,
) -> Option<WireMessage> {
    if let Some(leaving) = leaving {
        let mut own = VerifyReport::default();
        if let Some(model) = verify_cpb_leaving(path, leaving, &mut own) {
            report.checked.extend(own.checked);
            return Some(model);
        }
        // (The fingerprint no longer hands chunks over: what it was handing is let go.)
        return verify_cpb(path, shared, None, schema, report);
    }
    let (reader, mut checked) = match shared {
        // The chunks the merge streams are decompressed by the merge alone
        // (`check_deferred` below).
        Some(shared) => (
            Arc::clone(shared.chunks.reader()),
            check_chunks_deferring(&shared.chunks),
        ),
        None => match RecordReader::open(path) {
            Ok(r) => {
                let reader = Arc::new(r);
                let checked = check_chunks(&reader);
                (reader, checked)
            }
            Err(e) => {
                report.fault(path, e);
                return None;
            }
        },
    };
    for fault in &checked.faults {
        report.fault(path, fault);
    }
    let (_, metadata) = checked.metadata.take()?;
    if !checked.faults.is_empty() {
        return None;
    }
    let tree = metadata.message.clone().unwrap_or_default();
    let desc = saved_model_descriptor().ok()?;
    let merged = match shared {
        Some(shared) => Merger::new(&shared.chunks).merge(&desc, &tree),
        None => FileChunks::from_reader(reader.clone())
            .and_then(|(chunks, _)| Merger::new(&chunks).merge(&desc, &tree)),
    };
    // The deferred chunks' check, completed: free for those the merge streamed whole.
    if let Some(shared) = shared {
        check_deferred(&shared.chunks, &mut checked);
        for fault in &checked.faults {
            report.fault(path, fault);
        }
    }
    let message = match merged {
        Ok(m) if checked.faults.is_empty() => m,
        Ok(_) => return None,
        Err(e) => {
            report.fault(path, format!("the chunks do not merge: {e}"));
            return None;
        }
    };
    if let Err(e) = serializes(&message, &reader, &checked.record_lengths) {
        report.fault(path, format!("the merged message does not serialize: {e}"));
        return None;
    }
    let valid = match schema {
        SchemaCheck::Now => check_message(&message, &desc),
        SchemaCheck::ByTheCaller => Ok(()),
    };
    if let Err(e) = valid {
        report.fault(
            path,
            format!("the merged message is not a valid SavedModel: {e}"),
        );
        return None;
    }
    report.checked.push(merged_line(
        path,
        &checked,
        &metadata,
        &message,
        &Default::default(),
    ));
    Some(message)
}

/// [`verify_cpb`] leaving the graph's chunks unmerged: `None` at the first fault, unworded
/// (the caller verifies the file again the usual way, which words it). The records' check
/// stops short of decompressing the chunks left, whose check completes it once they have
/// been read.
fn verify_cpb_leaving(
    path: &Path,
    leaving: Leaving<'_>,
    report: &mut VerifyReport,
) -> Option<WireMessage> {
    let Leaving {
        chunks,
        relayed,
        scanned,
        positions,
    } = leaving;
    let reader = chunks.reader();
    let mut checked = check_chunks_leaving(reader, &positions);
    let (_, metadata) = checked.metadata.take()?;
    if !checked.faults.is_empty() {
        return None;
    }
    // The check read every chunk header: its pages leave resident memory, and each chunk left
    // unmerged is mapped again when it is read.
    for info in &metadata.chunks {
        reader.release_chunk_pages(info.offset);
    }
    let tree = metadata.message.clone().unwrap_or_default();
    let desc = saved_model_descriptor().ok()?;
    let leave = leavable(&tree, &desc);
    let message = Merger::new(&LeavingGraphChunks { chunks, leave })
        .merge(&desc, &tree)
        .ok()?;
    serializes(&message, reader, &checked.record_lengths).ok()?;
    check_message(&message, &desc).ok()?;
    // The chunks left unmerged, as the fingerprint hands them over on the other core, then
    // those it did not, on every core.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let hidden = left_chunks::check_left_chunks(
        &Schema::new(&desc),
        &message,
        Some(relayed),
        Some(scanned),
        threads,
    )
    .ok()?;
    // Every chunk left was decompressed whole by now (the reader remembers it): the records'
    // check completes without decompressing them again.
    complete_deferred(reader, &mut checked);
    if !checked.faults.is_empty() {
        return None;
    }
    report
        .checked
        .push(merged_line(path, &checked, &metadata, &message, &hidden));
    Some(message)
}

/// What verify reports of a `.cpb` it merged: its records, its chunks, and the size of the
/// message `message` stands for (with `hidden`, what the chunks left unmerged hold of their
/// graph's library: [`left_chunks::merged_len`]).
fn merged_line(
    path: &Path,
    checked: &unbound_chunked::ChunkReport,
    metadata: &unbound_proto::tensorflow::proto_splitter::ChunkMetadata,
    message: &WireMessage,
    hidden: &left_chunks::HiddenLibraries,
) -> String {
    format!(
        "{}: {} Riegeli records, {} chunks, merged ({} bytes)",
        file_name(path),
        checked.record_lengths.len(),
        metadata.chunks.len(),
        left_chunks::merged_len(message, hidden)
    )
}

/// Whether `message`, merged from the file of `reader`, serializes: the chunk records were all
/// checked, so each lazy record only has to be the length its chunk said (`records`, by
/// position; a value left inside a record streamed as it was merged, to lie inside it).
fn serializes(
    message: &WireMessage,
    reader: &RecordReader,
    records: &std::collections::BTreeMap<u64, u64>,
) -> std::result::Result<(), unbound_wire::WireError> {
    message
        .write_with(
            &mut std::io::sink(),
            &mut |r, _| match records.get(&r.position) {
                Some(&len) if len == r.len => Ok(()),
                Some(&len)
                    if r.reader.offset_in_record().is_some_and(|offset| {
                        offset.checked_add(r.len).is_some_and(|end| end <= len)
                    }) =>
                {
                    Ok(())
                }
                other => Err(unbound_wire::WireError::RecordLength {
                    source_name: reader.name().to_string(),
                    position: r.position,
                    actual: other.copied().unwrap_or(0),
                    expected: r.len,
                }),
            },
        )
        .map(drop)
}

/// Checks `message` (read from `source_name`) against the schema of `desc` as verify checks a
/// model, refusing what protobuf C++ refuses: nested messages that do not parse, broken packed
/// runs, strings that are not UTF-8, nesting too deep. For `proto split` and `proto merge`,
/// which take any type.
pub fn check_schema(
    message: &WireMessage,
    desc: &MessageDescriptor,
    source_name: &str,
) -> Result<()> {
    check_message(message, desc).map_err(|fault| {
        SavedModelError::invalid(
            source_name,
            format!("not a valid {}: {fault}", desc.full_name()),
        )
    })
}

/// Checks that `m` is a valid message of type `desc` as TensorFlow's parser (protobuf C++)
/// accepts it ([`schema`]); the fault, worded, if not.
fn check_message(m: &WireMessage, desc: &MessageDescriptor) -> Result<(), String> {
    Schema::new(desc).check_root(m)
}

/// The MetaGraphDefs of `root` without their graphs (which may be huge), decoded.
fn decode_meta_graphs(
    root: &WireMessage,
    dir: &Path,
    report: &mut VerifyReport,
) -> Vec<MetaGraphDef> {
    let name = dir.display().to_string();
    let mut out = Vec::new();
    for mg in wire::messages(root, saved_model::META_GRAPHS, &name) {
        let decoded = mg
            .and_then(|mg| wire::encode_without(&mg, meta_graph_def::GRAPH_DEF))
            .map(|b| {
                unbound_wire::decode_lenient::<MetaGraphDef>(b, unbound_proto::descriptor_pool())
                    .map_err(|e| e.to_string())
            });
        match decoded {
            Ok(Ok(m)) => out.push(m),
            Ok(Err(e)) => report.fault(dir, format!("a MetaGraphDef does not decode: {e}")),
            Err(e) => report.fault(dir, format!("a MetaGraphDef does not decode: {e}")),
        }
    }
    out
}

/// The bundle in `variables/`, and that every variable the object graphs name is in it.
fn verify_variables(dir: &Path, meta_graphs: &[MetaGraphDef], report: &mut VerifyReport) {
    let prefix = dir.join("variables").join("variables");
    let index = dir.join("variables").join("variables.index");
    let wants_variables = meta_graphs.iter().any(|mg| {
        mg.object_graph_def.as_ref().is_some_and(|og| {
            og.nodes
                .iter()
                .any(|n| matches!(n.kind, Some(ObjectKind::Variable(_))))
        })
    });
    if std::fs::symlink_metadata(&index).is_err() {
        if let Some(shard) = crate::vars::orphan_data_shard(&prefix) {
            report.fault(
                &index,
                SavedModelError::IndexMissing {
                    index: index.clone(),
                    shard,
                },
            );
        } else if wants_variables {
            report.fault(&index, "missing, but the model has variables");
        }
        return;
    }
    let bundle = match BundleReader::open(&prefix) {
        Ok(b) => b,
        Err(e) => {
            report.fault(&index, e);
            return;
        }
    };
    let before = report.faults.len();
    for f in bundle.verify() {
        let fault = match &f.key {
            Some(k) => format!("tensor {k}: {}", f.fault),
            None => f.fault.clone(),
        };
        let file = if f.file.as_os_str().is_empty() {
            index.clone()
        } else {
            f.file.clone()
        };
        report.fault(&file, fault);
    }
    let keys: BTreeSet<&[u8]> = bundle.keys().collect();
    let ckpt_graph = match bundle.object_graph() {
        Ok(g) => g,
        Err(e) => {
            report.fault(&index, e);
            None
        }
    };
    if let Some(g) = &ckpt_graph {
        for (node, n) in g.nodes.iter().enumerate() {
            for a in &n.attributes {
                if !keys.contains(a.checkpoint_key.as_bytes()) {
                    report.fault(
                        &index,
                        format!(
                            "the checkpoint's object graph names {:?} (node {node}, {}), which the bundle does not hold",
                            a.checkpoint_key, a.name
                        ),
                    );
                }
            }
        }
    }
    let by_path = ckpt_graph
        .as_ref()
        .map(checkpoint_keys_by_path)
        .unwrap_or_default();
    for mg in meta_graphs {
        let Some(og) = &mg.object_graph_def else {
            continue;
        };
        let info = crate::show::objects::object_graph(og, &[]);
        for v in &info.variables {
            match by_path.get(&v.path) {
                Some(key) if keys.contains(key.as_bytes()) => {}
                Some(key) => report.fault(
                    &index,
                    format!("variable {} ({key}) is not in the bundle", v.path),
                ),
                None => report.fault(
                    &index,
                    format!(
                        "variable {} of the SavedModel's object graph has no checkpoint key in the bundle's object graph",
                        v.path
                    ),
                ),
            }
        }
    }
    if report.faults.len() == before {
        report.checked.push(format!(
            "variables: {} keys in {} shard(s), checksums match",
            keys.len(),
            bundle.num_shards()
        ));
    }
}

/// Every asset file `asset_file_def` names exists under `assets/`.
fn verify_assets(dir: &Path, meta_graphs: &[MetaGraphDef], report: &mut VerifyReport) {
    let mut count = 0;
    for mg in meta_graphs {
        for a in &mg.asset_file_def {
            let path = dir.join("assets").join(&a.filename);
            if !path.is_file() {
                report.fault(&path, "missing (named by asset_file_def)");
            }
            count += 1;
        }
    }
    if count > 0 {
        report.checked.push(format!("{count} asset file(s)"));
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::write::{split_dir, WriteOptions};
    use unbound_records::WriterOptions;
    use unbound_test_support::testdata::model as testdata;

    /// Every record in its own Riegeli chunk, as TensorFlow writes a `.cpb` (unbound packs
    /// small records together, and [`FileChunks::keep_decoded`] keeps only lone records).
    fn one_record_per_chunk() -> WriterOptions {
        WriterOptions {
            chunk_size: Some(1),
            ..WriterOptions::default()
        }
    }

    /// The hash fields of a fingerprint (its uuid is random).
    fn hashes(def: &FingerprintDef) -> [u64; 5] {
        [
            def.saved_model_checksum,
            def.graph_def_program_hash,
            def.signature_def_hash,
            def.saved_object_graph_hash,
            def.checkpoint_hash,
        ]
    }

    /// verify's check and merge and the fingerprint, on two threads through one SharedCpb,
    /// decode each message chunk once, and give what each gives reading the file alone.
    #[test]
    fn verify_and_fingerprint_share_each_decoded_chunk() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("split");
        split_dir(
            &testdata("tf2_multi_sig"),
            &dir,
            &WriteOptions::default()
                .with_max_size(5000)
                .with_writer(one_record_per_chunk()),
            &|_| {},
        )
        .unwrap();
        let path = dir.join("saved_model.cpb");
        let shared = SharedCpb::open(&SavedModel::open(&dir).unwrap(), None)
            .expect("a small .cpb is shared");
        let kept = shared.chunks.message_chunks();
        assert!(kept.len() >= 3, "{kept:?}");
        let cache = shared.chunks.cache().unwrap();
        assert!(
            kept.iter().all(|&i| cache.is_cached(i)),
            "lone records are kept"
        );
        let mut report = VerifyReport::default();
        let (model, fingerprint) = std::thread::scope(|s| {
            let fingerprint = s.spawn(|| {
                fingerprint_model_sharing(&SavedModel::open(&dir).unwrap(), Some(&shared), None)
            });
            let model = verify_cpb(&path, Some(&shared), None, SchemaCheck::Now, &mut report);
            (model, fingerprint.join().unwrap())
        });
        for &index in &kept {
            assert!(cache.get(index).is_some(), "chunk {index} was never read");
        }
        assert_eq!(
            cache.decodes(),
            kept.len() as u64,
            "a chunk was decoded more than once"
        );

        let mut alone = VerifyReport::default();
        let model_alone = verify_cpb(&path, None, None, SchemaCheck::Now, &mut alone);
        assert!(report.faults.is_empty(), "{:?}", report.faults);
        assert_eq!(report.checked, alone.checked);
        assert_eq!(
            model.unwrap().to_vec().unwrap(),
            model_alone.unwrap().to_vec().unwrap()
        );
        let fingerprint_alone = crate::fingerprint::fingerprint_dir(&dir).unwrap();
        assert_eq!(hashes(&fingerprint.unwrap()), hashes(&fingerprint_alone));
        // What split wrote (TensorFlow's algorithm, checked against TensorFlow in interop).
        let written = crate::fingerprint::read_fingerprint(&dir).unwrap();
        assert_eq!(hashes(&fingerprint_alone), hashes(&written));
    }

    /// A `.cpb` whose constants are Brotli BYTES chunks (as TensorFlow writes them): every
    /// chunk is kept, so the check, verify's merge, the fingerprint on another thread and the
    /// write of the merged model (its lazy tensor values read through the cache) decode each
    /// chunk once in all, and every one of them gives what it gives reading the file alone.
    #[test]
    fn bytes_chunks_are_decoded_once_for_check_fingerprint_and_write() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("split");
        let options = WriterOptions {
            compression: unbound_records::Compression::Brotli { level: 6 },
            store_incompressible: false,
            ..one_record_per_chunk()
        };
        split_dir(
            &testdata("tf1_large_consts"),
            &dir,
            &WriteOptions::default()
                .with_max_size(20000)
                .with_writer(options),
            &|_| {},
        )
        .unwrap();
        let path = dir.join("saved_model.cpb");
        let shared = SharedCpb::open(&SavedModel::open(&dir).unwrap(), None)
            .expect("a small .cpb is shared");
        let all = shared.chunks.infos().len() as u64;
        let bytes_chunks = all - shared.chunks.message_chunks().len() as u64;
        assert!(bytes_chunks >= 1, "the split made no BYTES chunk");
        let cache = shared.chunks.cache().unwrap();
        assert!((0..all).all(|i| cache.is_cached(i)), "every chunk is kept");
        let mut report = VerifyReport::default();
        let (model, fingerprint) = std::thread::scope(|s| {
            let fingerprint = s.spawn(|| {
                fingerprint_model_sharing(&SavedModel::open(&dir).unwrap(), Some(&shared), None)
            });
            let model = verify_cpb(&path, Some(&shared), None, SchemaCheck::Now, &mut report);
            (model, fingerprint.join().unwrap())
        });
        assert!(report.faults.is_empty(), "{:?}", report.faults);
        let model = model.unwrap();
        let lazy = model.lazy_records();
        assert!(!lazy.is_empty(), "the tensors stay lazy");
        // They read through the cache: decoding them again is no longer work to do ahead.
        assert!(lazy
            .iter()
            .all(|r| !r.reader.decoding_is_costly(r.position)));
        let written = model.to_vec().unwrap();
        assert_eq!(cache.decodes(), all, "a chunk was decoded more than once");

        let mut alone = VerifyReport::default();
        let model_alone = verify_cpb(&path, None, None, SchemaCheck::Now, &mut alone).unwrap();
        // Read alone, each is decompressed from the file whenever it is read.
        assert!(model_alone
            .lazy_records()
            .iter()
            .all(|r| r.reader.decoding_is_costly(r.position)));
        assert_eq!(report.checked, alone.checked);
        assert_eq!(written, model_alone.to_vec().unwrap());
        let fingerprint_alone = crate::fingerprint::fingerprint_dir(&dir).unwrap();
        assert_eq!(hashes(&fingerprint.unwrap()), hashes(&fingerprint_alone));
        let stored = crate::fingerprint::read_fingerprint(&dir).unwrap();
        assert_eq!(hashes(&fingerprint_alone), hashes(&stored));
    }

    /// A damaged chunk: the shared check reports exactly what the check alone reports, and
    /// the fingerprint fails (or not) alike.
    #[test]
    fn a_damaged_chunk_reads_the_same_with_sharing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("split");
        split_dir(
            &testdata("tf2_multi_sig"),
            &dir,
            &WriteOptions::default()
                .with_max_size(5000)
                .with_writer(one_record_per_chunk()),
            &|_| {},
        )
        .unwrap();
        let path = dir.join("saved_model.cpb");
        let original = std::fs::read(&path).unwrap();
        let mut shared_cases = 0;
        for at in (200..original.len().saturating_sub(400)).step_by(97) {
            let mut damaged = original.clone();
            damaged[at] ^= 0x24;
            std::fs::write(&path, &damaged).unwrap();
            let Some(shared) = SharedCpb::open(&SavedModel::open(&dir).unwrap(), None) else {
                continue;
            };
            shared_cases += 1;
            let mut report = VerifyReport::default();
            let model = verify_cpb(&path, Some(&shared), None, SchemaCheck::Now, &mut report);
            let fingerprint =
                fingerprint_model_sharing(&SavedModel::open(&dir).unwrap(), Some(&shared), None);
            let mut alone = VerifyReport::default();
            let model_alone = verify_cpb(&path, None, None, SchemaCheck::Now, &mut alone);
            let fingerprint_alone = crate::fingerprint::fingerprint_dir(&dir);
            let text =
                |r: &VerifyReport| r.faults.iter().map(|f| f.to_string()).collect::<Vec<_>>();
            assert_eq!(text(&report), text(&alone), "byte {at}");
            assert_eq!(report.checked, alone.checked, "byte {at}");
            assert_eq!(model.is_some(), model_alone.is_some(), "byte {at}");
            match (fingerprint, fingerprint_alone) {
                (Ok(a), Ok(b)) => assert_eq!(hashes(&a), hashes(&b), "byte {at}"),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "byte {at}"),
                (a, b) => panic!("byte {at}: {a:?} shared, {b:?} alone"),
            }
        }
        assert!(
            shared_cases > 10,
            "only {shared_cases} damaged files shared"
        );
    }
}

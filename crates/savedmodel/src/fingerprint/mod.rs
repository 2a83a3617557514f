//! SavedModel fingerprints (`fingerprint.pb`), equal to what TensorFlow 2.21's C++
//! `saved_model::fingerprinting::CreateFingerprintDef(export_dir)` computes.
//!
//! - A directory with a `saved_model.cpb` (it wins over `.pb`, as in TensorFlow) is
//!   fingerprinted from its chunks (`cpb.rs`; producer 2); otherwise its `saved_model.pb`
//!   (`pb.rs`; producer 4, what TensorFlow 2.21 writes). A directory with neither is refused,
//!   as TensorFlow refuses it (`.pbtxt` models are not fingerprinted).
//! - Every hash field is FarmHash `Fingerprint64` ([`farmhash`]) of protobuf C++'s
//!   deterministic serialization ([`canonical`]), combined with `FingerprintCat64`.
//! - `checkpoint_hash` is the fingerprint of `variables/variables.index`, 0 when it cannot be
//!   read; `uuid` is random (128 bits in decimal, zero-padded to at least 20 digits).

mod already_canonical;
pub mod canonical;
mod canonicalized;
mod cpb;
pub(crate) use cpb::ChunkSeen;
mod entry_memo;
pub use unbound_canonical::farmhash;
pub mod fields;
mod graph_in_place;
mod hashes;
mod layout;
pub mod maps;
mod opaque_values;
mod pb;
mod pending;
pub mod regularize;
pub mod rope;
mod streamed;
mod verdict;
mod wire_values;

use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::dir::SavedModel;
use crate::format::ModelFormat;
use crate::shared_cpb::SharedCpb;
use crate::{Result, SavedModelError};

use prost::Message as _;
use serde::Serialize;
pub use unbound_proto::tensorflow::FingerprintDef;
use unbound_proto::tensorflow::VersionDef;
use unbound_wire::WireMessage;

use self::canonical::{Encoder, Source};
pub(crate) use self::canonicalized::{canonical_form_of_held, HeldCanonical};
pub(crate) use self::pending::PendingFingerprint;
pub(crate) use self::verdict::CanonicalVerdict;

pub use self::canonicalized::{
    canonical_form_unless_mostly_canonical, in_canonical_form, mostly_canonical_pb,
};
pub use crate::format::FINGERPRINT_FILE;

/// `version.producer` TensorFlow 2.21 writes for a fingerprint computed from `saved_model.pb`.
pub const PRODUCER_PB: i32 = 4;

/// `version.producer` TensorFlow 2.21 writes for a fingerprint computed from
/// `saved_model.cpb`.
pub const PRODUCER_CPB: i32 = 2;

/// A model fault; the path is filled in by [`fingerprint_dir`].
pub(crate) fn model_fault(fault: impl Into<String>) -> SavedModelError {
    SavedModelError::Fingerprint {
        path: PathBuf::new(),
        fault: fault.into(),
    }
}

/// The four hash fields computed from the model file.
pub(crate) struct Hashes {
    saved_model_checksum: u64,
    graph_def_program_hash: u64,
    signature_def_hash: u64,
    saved_object_graph_hash: u64,
}

/// Which model file TensorFlow fingerprints in `dir`: `saved_model.cpb` if it exists (even
/// beside a `.pb`), otherwise `saved_model.pb` ([`crate::dir::model_file`]'s choice, with `.pbtxt`
/// refused).
pub fn fingerprinted_file(dir: &Path) -> Result<PathBuf> {
    Ok(fingerprinted(&open_fingerprinted(dir)?)?.to_path_buf())
}

/// [`SavedModel::open`] of a directory to fingerprint: one without a model file is refused
/// as TensorFlow refuses it ([`SavedModelError::NotFingerprintable`]).
fn open_fingerprinted(dir: &Path) -> Result<SavedModel> {
    SavedModel::open(dir).map_err(|e| match e {
        SavedModelError::NotADirectory { .. } | SavedModelError::NoModelFile { .. } => {
            SavedModelError::NotFingerprintable {
                dir: dir.to_path_buf(),
            }
        }
        e => e,
    })
}

/// The model file TensorFlow fingerprints of the opened `model`: its `.cpb` or `.pb`; a
/// `.pbtxt` model is refused ([`SavedModelError::NotFingerprintable`]).
pub fn fingerprinted(model: &SavedModel) -> Result<&Path> {
    if model.format() == ModelFormat::Pbtxt {
        return Err(SavedModelError::NotFingerprintable {
            dir: model.dir().to_path_buf(),
        });
    }
    Ok(&model.model_file().path)
}

/// TensorFlow's `CreateFingerprintDef(dir)`: the fingerprint of the SavedModel in `dir`, with
/// a fresh random `uuid`.
pub fn fingerprint_dir(dir: &Path) -> Result<FingerprintDef> {
    fingerprint_model(&in_canonical_form(open_fingerprinted(dir)?))
}

/// [`fingerprint_dir`] of a SavedModel already opened.
pub fn fingerprint_model(model: &SavedModel) -> Result<FingerprintDef> {
    fingerprint_model_sharing(model, None, None)
}

/// [`fingerprint_dir`] of a directory just written, and, when its model file is a `.pb` whose
/// bytes are not canonical, that file's path and canonical form, for the writer to put in its
/// place: the fingerprint is that form's (a `.pb`'s fingerprint is the same for any encoding of
/// its message), so it describes the file either way.
pub(crate) fn fingerprint_written(
    dir: &Path,
) -> Result<(FingerprintDef, Option<(PathBuf, Bytes)>)> {
    let model = open_fingerprinted(dir)?;
    if model.format() != ModelFormat::Pb {
        return Ok((fingerprint_model(&model)?, None));
    }
    let file = fingerprinted(&model)?;
    let (hashes, canonical) =
        pb::hashes_and_canonical_form(&model.data()?, file).map_err(|e| naming_file(file, e))?;
    let def = definition(hashes, checkpoint_hash(dir), false);
    Ok((def, canonical.map(|bytes| (file.to_path_buf(), bytes))))
}

/// The fingerprint of `bytes`, a canonical form the encoder made and that is being written as
/// `pb_file` (not checked again: see [`pb::hashes`]); its checkpoint hash is left to the
/// writer, which knows the variables it writes.
pub(crate) fn fingerprint_made_canonical(bytes: &Bytes, pb_file: &Path) -> Result<FingerprintDef> {
    let hashes = pb::hashes(bytes, pb_file, None, true).map_err(|e| naming_file(pb_file, e))?;
    Ok(definition(hashes, 0, false))
}

/// [`fingerprint_model`], reading the `.cpb` through `shared` when it is the file
/// fingerprinted (`verify` hands it the file it checks and merges on another thread, so each
/// chunk is decoded once for both). When the model fingerprinted is a `.pb`, whether it is
/// canonical and valid is published to `verdict` (see [`CanonicalVerdict`]); "no" in every
/// other case.
pub(crate) fn fingerprint_model_sharing(
    model: &SavedModel,
    shared: Option<&SharedCpb>,
    verdict: Option<&CanonicalVerdict>,
) -> Result<FingerprintDef> {
    let _answered = verdict.map(CanonicalVerdict::no_unless_answered);
    let file = fingerprinted(model)?;
    let chunked = model.format() == ModelFormat::Cpb;
    let shared = shared.filter(|s| s.path == file);
    let hashes = if let (true, Some(shared)) = (chunked, shared) {
        let root = shared.metadata.message.clone().unwrap_or_default();
        cpb::hashes_of(&shared.chunks, &root, Some(&shared.prints), None)
    } else if chunked {
        cpb::hashes(file)
    } else {
        model
            .data()
            .and_then(|bytes| pb::hashes(&bytes, file, verdict, model.canonicalized()))
    }
    .map_err(|e| naming_file(file, e))?;
    Ok(definition(hashes, checkpoint_hash(model.dir()), chunked))
}

/// The fingerprint of the `.cpb` model file of `model`, read from `chunks` (that file's,
/// opened by the caller) whose metadata tree is `root`, each chunk `seen` wants handed to it
/// as it is decoded ([`ChunkSeen`]): for `verify`, which checks those chunks without
/// decoding them again.
pub(crate) fn fingerprint_cpb_seeing(
    model: &SavedModel,
    chunks: &unbound_chunked::FileChunks,
    root: &unbound_proto::tensorflow::proto_splitter::ChunkedMessage,
    seen: &dyn ChunkSeen,
) -> Result<FingerprintDef> {
    let file = fingerprinted(model)?;
    let hashes = cpb::hashes_seeing(chunks, root, seen).map_err(|e| naming_file(file, e))?;
    Ok(definition(hashes, checkpoint_hash(model.dir()), true))
}

/// [`fingerprint_model_sharing`] for a verification with no stored fingerprint to compare it
/// with: what would make the computation fail is checked, but the hashes of a canonical
/// `.pb`, which cannot fail, are skipped ([`pb::check`]; `None` then). A `.cpb` or a `.pb`
/// that is not canonical is fingerprinted whole, and `verdict` answered as there.
pub(crate) fn check_model_sharing(
    model: &SavedModel,
    shared: Option<&SharedCpb>,
    verdict: Option<&CanonicalVerdict>,
) -> Result<Option<FingerprintDef>> {
    let file = fingerprinted(model)?;
    let pb = model.format() == ModelFormat::Pb;
    let Some(verdict) = verdict.filter(|_| pb) else {
        return fingerprint_model_sharing(model, shared, verdict).map(Some);
    };
    let _answered = verdict.no_unless_answered();
    let hashes = model
        .data()
        .and_then(|bytes| pb::check(&bytes, file, verdict, model.canonicalized()))
        .map_err(|e| naming_file(file, e))?;
    Ok(hashes.map(|hashes| definition(hashes, checkpoint_hash(model.dir()), false)))
}

/// The fingerprint `fingerprint_dir` would compute for a directory whose `saved_model.cpb`
/// (`cpb_file`, not read) is `split` written out ([`unbound_chunked::write_chunked`]) and whose
/// checkpoint hashes to `checkpoint_hash`: the same hashes, from the split in memory
/// (`cpb::hashes_of_split`), so that a split fingerprints its output while writing it.
///
/// `source_canonical` says the split was made, unedited, of a model parsed from bytes that are
/// its own deterministic serialization (as models protobuf C++ writes are): the graph's
/// serialized nodes are then hashed as they are, without the check that they are canonical
/// (issue 15: that check was a fifth of a split of a model of millions of nodes). A wrong
/// `true` gives a wrong fingerprint, never an error.
pub fn fingerprint_split_as_cpb(
    split: &unbound_chunked::SplitOutput,
    cpb_file: &Path,
    checkpoint_hash: u64,
    source_canonical: bool,
) -> Result<FingerprintDef> {
    let hashes =
        cpb::hashes_of_split(split, source_canonical).map_err(|e| naming_file(cpb_file, e))?;
    Ok(definition(hashes, checkpoint_hash, true))
}

/// A fingerprint of `hashes`, with a fresh uuid and the producer TensorFlow writes for the
/// model file's format.
fn definition(hashes: Hashes, checkpoint_hash: u64, chunked: bool) -> FingerprintDef {
    FingerprintDef {
        saved_model_checksum: hashes.saved_model_checksum,
        graph_def_program_hash: hashes.graph_def_program_hash,
        signature_def_hash: hashes.signature_def_hash,
        saved_object_graph_hash: hashes.saved_object_graph_hash,
        checkpoint_hash,
        uuid: random_uuid(),
        version: Some(VersionDef {
            producer: if chunked { PRODUCER_CPB } else { PRODUCER_PB },
            ..Default::default()
        }),
    }
}

/// `e` naming the model `file` (the hashing code names only the part at fault).
fn naming_file(file: &Path, e: SavedModelError) -> SavedModelError {
    let named = |source_name: String| {
        let file = file.display().to_string();
        if source_name.starts_with(&file) {
            source_name
        } else {
            format!("{file}: {source_name}")
        }
    };
    match e {
        SavedModelError::Fingerprint { fault, .. } => SavedModelError::Fingerprint {
            path: file.to_path_buf(),
            fault,
        },
        SavedModelError::Malformed { source_name, error } => SavedModelError::Malformed {
            source_name: named(source_name),
            error,
        },
        SavedModelError::InvalidModel { source_name, fault } => SavedModelError::InvalidModel {
            source_name: named(source_name),
            fault,
        },
        SavedModelError::TooDeep { source_name, limit } => SavedModelError::TooDeep {
            source_name: named(source_name),
            limit,
        },
        e => e,
    }
}

/// TensorFlow's `HashCheckpointIndexFile`: `Fingerprint64` of `variables/variables.index`,
/// or 0 when it cannot be read (TensorFlow then logs a warning: [`checkpoint_index_fault`]
/// says why, for the caller to print).
pub fn checkpoint_hash(dir: &Path) -> u64 {
    // Mapped, not read: a FIFO or a device (a symlink to /dev/zero) is refused, not read
    // forever.
    unbound_io::map_file(&checkpoint_index(dir))
        .map(|data| farmhash::fingerprint64(&data))
        .unwrap_or(0)
}

/// Why [`checkpoint_hash`] of `dir` is 0 although something is at `variables/variables.index`
/// (a FIFO, a device, a directory, a link to nothing, a file it may not read): the fault,
/// naming the file. TensorFlow's `CreateFingerprintDef` gives 0 too and logs a warning ("Failed
/// to read checkpoint file"), which a command printing the hash repeats. `None` when the index
/// reads, or when nothing is there (a model without variables, the usual case, warned of by
/// no one).
pub fn checkpoint_index_fault(dir: &Path) -> Option<unbound_io::IoError> {
    let index = checkpoint_index(dir);
    std::fs::symlink_metadata(&index).ok()?;
    unbound_io::map_file(&index).err()
}

/// `dir/variables/variables.index`.
fn checkpoint_index(dir: &Path) -> PathBuf {
    dir.join("variables").join("variables.index")
}

/// TensorFlow's `CreateRandomUUID`: two random 64-bit numbers `a`, `b` as the decimal
/// `(a << 64) | b`, zero-padded to at least 20 digits.
pub fn random_uuid() -> String {
    let half = || {
        getrandom::u64().unwrap_or_else(|_| {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0),
            );
            h.finish()
        })
    };
    let uuid = (u128::from(half()) << 64) | u128::from(half());
    format!("{uuid:020}")
}

/// The deterministic serialization of `def` (fields in number order, as TensorFlow writes
/// `fingerprint.pb`).
pub fn encode_fingerprint(def: &FingerprintDef) -> Result<Vec<u8>> {
    let desc = hashes::descriptor("tensorflow.FingerprintDef")?;
    let bytes = bytes::Bytes::from(def.encode_to_vec());
    let msg = WireMessage::parse(&bytes, Some(desc.clone()))
        .map_err(|error| SavedModelError::malformed("FingerprintDef", error))?;
    Encoder::new().encode(&[Source::Ref(&msg)], &desc)?.to_vec()
}

/// Writes `def` as `dir/fingerprint.pb` (atomically: a temporary file, synced and renamed).
pub fn write_fingerprint(dir: &Path, def: &FingerprintDef) -> Result<()> {
    let bytes = encode_fingerprint(def)?;
    let path = dir.join(FINGERPRINT_FILE);
    unbound_io::write_atomically(&path, |out| {
        std::io::Write::write_all(out, &bytes).map_err(|e| SavedModelError::io(&path, e))
    })?;
    Ok(())
}

/// Reads `dir/fingerprint.pb`.
pub fn read_fingerprint(dir: &Path) -> Result<FingerprintDef> {
    let path = dir.join(FINGERPRINT_FILE);
    // Mapped: a FIFO or device in its place is refused instead of read forever.
    let bytes = unbound_io::map_file(&path)?;
    FingerprintDef::decode(bytes)
        .map_err(|error| SavedModelError::BadFingerprintFile { path, error })
}

/// What `unbound fingerprint` reports: the model file fingerprinted and its fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FingerprintReport {
    /// The model file the fingerprint was computed from (`DIR/saved_model.cpb` or
    /// `DIR/saved_model.pb`, the directory as given).
    pub model_file: PathBuf,
    /// The fingerprint.
    pub fingerprint: Fingerprint,
}

/// A `FingerprintDef` as a report: its fields under their proto names (serialized in name
/// order, uint64 values as exact JSON numbers), the JSON `unbound fingerprint --json` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fingerprint {
    /// `checkpoint_hash`: FarmHash of `variables/variables.index`, 0 without one.
    pub checkpoint_hash: u64,
    /// `graph_def_program_hash`: hash of `meta_graphs[0].graph_def` (regularized for `.pb`).
    pub graph_def_program_hash: u64,
    /// `saved_model_checksum`: hash of the whole model file's content.
    pub saved_model_checksum: u64,
    /// `saved_object_graph_hash`: hash of `meta_graphs[0].object_graph_def`.
    pub saved_object_graph_hash: u64,
    /// `signature_def_hash`: hash of `meta_graphs[0].signature_def`, in key order.
    pub signature_def_hash: u64,
    /// `uuid`: random, 128 bits in decimal.
    pub uuid: String,
    /// `version`: which computation made it (producer 4 for `.pb`, 2 for `.cpb`).
    pub version: FingerprintVersion,
}

/// `FingerprintDef.version` (a `VersionDef`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FingerprintVersion {
    /// `bad_consumers`.
    pub bad_consumers: Vec<i32>,
    /// `min_consumer`.
    pub min_consumer: i32,
    /// `producer`.
    pub producer: i32,
}

impl From<&FingerprintDef> for Fingerprint {
    fn from(def: &FingerprintDef) -> Self {
        let version = def.version.clone().unwrap_or_default();
        Fingerprint {
            checkpoint_hash: def.checkpoint_hash,
            graph_def_program_hash: def.graph_def_program_hash,
            saved_model_checksum: def.saved_model_checksum,
            saved_object_graph_hash: def.saved_object_graph_hash,
            signature_def_hash: def.signature_def_hash,
            uuid: def.uuid.clone(),
            version: FingerprintVersion {
                bad_consumers: version.bad_consumers,
                min_consumer: version.min_consumer,
                producer: version.producer,
            },
        }
    }
}

impl Fingerprint {
    /// TensorFlow's `singleprint`: `graph_def_program_hash/signature_def_hash/
    /// saved_object_graph_hash/checkpoint_hash`.
    pub fn singleprint(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            self.graph_def_program_hash,
            self.signature_def_hash,
            self.saved_object_graph_hash,
            self.checkpoint_hash
        )
    }
}

/// The fingerprint of the SavedModel in `dir` ([`fingerprint_dir`]) with the file it was
/// computed from.
pub fn fingerprint_report(dir: &Path) -> Result<FingerprintReport> {
    let model = in_canonical_form(open_fingerprinted(dir)?);
    let model_file = fingerprinted(&model)?.to_path_buf();
    let def = fingerprint_model(&model)?;
    Ok(FingerprintReport {
        model_file,
        fingerprint: Fingerprint::from(&def),
    })
}

//! Writing SavedModel directories: split ([`split_dir`]) or merged ([`merge_dir`]) copies of
//! one, and a copy holding a new model proto ([`write_model_dir`], what the rewrites write
//! with). Every output directory is begun as a temporary beside its target, filled (the model
//! file written, every other file of the source carried over byte for byte, a fresh
//! fingerprint computed from what was written) and renamed into place. Above the reports and
//! `verify` in the crate's flow (a source is verified, [`crate::verify`], before it is written
//! again); only [`crate::rewrite`] builds on it.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::io::Write as _;

use bytes::Bytes;
use unbound_chunked::{copy_unchunked, write_chunked, write_message_with_progress, Written};
use unbound_io::{write_atomically, TempPath};
use unbound_proto::tensorflow::FingerprintDef;
use unbound_records::WriterOptions;
use unbound_wire::WireMessage;

use crate::carry_over::{copy_tree, copy_tree_except};
use crate::dir::{saved_model_descriptor, SavedModel};
use crate::error::{Result, SavedModelError};
use crate::fingerprint::HeldCanonical;
use crate::format::{ModelFormat, MAX_PROTO_SIZE};
use crate::split::{
    message_chunk_over, split_saved_model_with, MetaGraphSplitting, SplitContext, DEFAULT_MAX_SIZE,
};
use crate::verify::{compare_with_stored, Keep};

/// What [`split_dir`] did.
#[derive(Debug)]
pub struct SplitReport {
    /// The model file written.
    pub written: Written,
    /// Files carried over from the source directory.
    pub copied_files: usize,
    /// Where the split differs from TensorFlow's algorithm (see [`crate::split`]).
    pub warnings: Vec<String>,
    /// Size of the model proto before splitting.
    pub model_bytes: u64,
}

/// Writes `out` as a split (image-format) copy of the SavedModel in `src`. The source is
/// checked as `verify` checks it first ([`crate::verify::verified_model`]): a directory
/// verify rejects is refused, so a damaged model is never split into one that reads back
/// differently (or not at all). Written as `options` say; `progress` is called with the bytes
/// of model data written, from whichever thread writes them.
pub fn split_dir(
    src: &Path,
    out: &Path,
    options: &WriteOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<SplitReport> {
    let WriteOptions {
        max_size,
        writer,
        splitting,
    } = *options;
    refuse_existing(out)?;
    let opened = SavedModel::open(src)?;
    // A `.pb` to split that is not in canonical form is split from its canonical form, made
    // once: the verification, the split and the output's fingerprint are then those of a
    // canonical model (issue 29: each made the canonical form again, and such a split took
    // 7x zstd). One with nothing to split is copied as it is.
    let to_split = opened.format() == ModelFormat::Pb
        && unbound_io::regular_file_len(&opened.model_file().path).is_ok_and(|len| len >= max_size);
    let opened = if to_split {
        crate::fingerprint::in_canonical_form(opened)
    } else {
        opened
    };
    let file = opened.model_file();
    let tmp = new_output_dir(src, out)?;
    // A `.pb` under the maximum size is most likely written back as it is: it is copied into
    // the output while it is verified (the copy is the kernel's work and its sync waits on
    // the disk, while the verification keeps both cores busy), and discarded if the model is
    // refused or turns out to need splitting (issue 15: the copy and its sync were a third of
    // a split with nothing to split).
    // (Not when it is read as its canonical form: those bytes are written, not the file's.)
    let ahead = file.format == ModelFormat::Pb
        && !opened.canonicalized()
        && unbound_io::regular_file_len(&file.path).is_ok_and(|len| len < max_size);
    // A `.pb` that will be split is split while it is verified, from a reading of its own: the
    // split is the same work whichever reading it starts from, and run after the verification
    // it was a fifth of a split of a model of millions of nodes, on one core (issue 15). Its
    // chunks are then compressed and written into the output at once, still while the model
    // is verified, and its fingerprint computed while they are written, as soon as the
    // verification has said whether the source is canonical (the compression and the
    // fingerprint were a third of such a split, after the verification). All of it is dropped
    // unused, the output directory with it, if the model is refused.
    let ahead_split = file.format == ModelFormat::Pb && !ahead;
    let prefix = tmp.path().join("saved_model");
    let cpb_file = tmp.path().join(ModelFormat::Cpb.file_name());
    let cancel = unbound_io::cancel_token();
    let (cancel, prefix, model_path, opened) =
        (&cancel, prefix.as_path(), file.path.as_path(), &opened);
    let (verified, copied, split) = std::thread::scope(|s| {
        let copy = ahead.then(|| {
            s.spawn(move || {
                unbound_io::set_cancel_token(cancel.clone());
                copy_unchunked(prefix, model_path, &mut |_| {})
            })
        });
        // The split, handed over as soon as it is cut (the sender is dropped unused when the
        // split fails or chunks nothing).
        let (cut, split_cut) = std::sync::mpsc::sync_channel::<Arc<ModelSplit>>(1);
        let split = ahead_split.then(|| {
            s.spawn(move || {
                unbound_io::set_cancel_token(cancel.clone());
                let split = Arc::new(split_model_file(opened, max_size, splitting)?);
                if !split.split.chunks_anything() {
                    return Ok((split, None));
                }
                // No receiver left only when the verification has failed already: the output
                // would be dropped, so nothing is written.
                if cut.send(split.clone()).is_err() {
                    return Ok((split, None));
                }
                let written = write_chunked(prefix, &split.split, writer, &mut |n| progress(n))?;
                Ok::<_, SavedModelError>((split, Some(written)))
            })
        });
        // The model's own fingerprint is reused only by a copy of it.
        let keep = if ahead {
            Keep::Fingerprint
        } else {
            Keep::Nothing
        };
        let verified = crate::verify::verified_model_keeping(opened, keep);
        let fingerprint = match (&verified, ahead_split) {
            (Ok(verified), true) => split_cut.recv().ok().map(|split| {
                crate::fingerprint::fingerprint_split_as_cpb(
                    &split.split,
                    &cpb_file,
                    0,
                    verified.canonical,
                )
            }),
            _ => None,
        };
        drop(split_cut);
        let copied = copy.map(joined);
        let split = split.map(|split| {
            let (split, written) = joined(split)?;
            Ok::<_, SavedModelError>((split, written, fingerprint))
        });
        (verified, copied, split)
    });
    let verified = verified?;
    let known = KnownFingerprint {
        model_file: file.path.clone(),
        // Only a `.pb` is ever written back as the same bytes.
        def: verified
            .fingerprint
            .filter(|_| file.format == ModelFormat::Pb && !opened.canonicalized()),
        copied: copied.and_then(std::result::Result::ok),
        canonical: verified.canonical,
    };
    let model = match split {
        Some(split) => {
            let (split, written, fingerprint) = split?;
            // Its only other holder, the fingerprint above, has ended with the threads.
            let split = Arc::into_inner(split).ok_or_else(|| {
                SavedModelError::invalid(
                    src.display().to_string(),
                    "internal fault: the split was still in use after its threads ended",
                )
            })?;
            let written = match (written, fingerprint) {
                (Some(written), Some(fingerprint)) => Some(Box::new(WrittenAhead {
                    written,
                    fingerprint: fingerprint?,
                })),
                _ => None,
            };
            ToWrite::Split(split, written)
        }
        None => ToWrite::Model(verified.model),
    };
    write_dir(
        DirWrite {
            src,
            out: Output::Begun(tmp),
            model,
            known: Some(&known),
            variables: None,
        },
        options,
        &mut |n| progress(n),
    )
}

/// Frees `value` on a thread of its own: a split of millions of nodes takes a tenth of a
/// second to free, one field at a time, and nothing waits for it (issue 15). A process that
/// ends first leaves the freeing to the kernel.
fn drop_in_background<T: Send + 'static>(value: T) {
    let spawned = std::thread::Builder::new()
        .name("unbound-free".into())
        .spawn(move || drop(value));
    // No thread to be had: the value was handed back and dropped with the error.
    drop(spawned);
}

/// What a scoped thread returned (its panic carried on).
fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The model [`write_dir`] writes: as a message, or already split.
enum ToWrite {
    /// The SavedModel proto, to be split.
    Model(WireMessage),
    /// Its split ([`split_model_file`]), as the options say; with its `.cpb` and that file's
    /// fingerprint when [`split_dir`] has written and computed them already.
    Split(ModelSplit, Option<Box<WrittenAhead>>),
}

/// A split's `.cpb`, written by [`split_dir`] while the model was verified, and its
/// fingerprint.
struct WrittenAhead {
    written: Written,
    fingerprint: FingerprintDef,
}

/// A SavedModel proto split into chunks, with what the split report needs.
struct ModelSplit {
    split: unbound_chunked::SplitOutput,
    /// Where the split differs from TensorFlow's algorithm.
    warnings: Vec<String>,
    /// Size of the model proto before splitting.
    model_bytes: u64,
}

/// Splits `model` as [`write_dir`] does with `splitting`.
fn split_model(
    model: WireMessage,
    max_size: u64,
    splitting: MetaGraphSplitting,
) -> Result<ModelSplit> {
    let desc = saved_model_descriptor()?;
    let model_bytes = model.encoded_len();
    let mut ctx = SplitContext::new(max_size);
    let split = split_saved_model_with(model, &desc, &mut ctx, splitting)?;
    Ok(ModelSplit {
        split,
        warnings: ctx.warnings,
        model_bytes,
    })
}

/// The split of the SavedModel proto in the `saved_model.pb` of `opened` (a reading of its
/// own, from the same mapping), as [`split_model`] splits it.
fn split_model_file(
    opened: &SavedModel,
    max_size: u64,
    splitting: MetaGraphSplitting,
) -> Result<ModelSplit> {
    let model = opened.read_pb(&saved_model_descriptor()?)?;
    split_model(model, max_size, splitting)
}

/// What is known of the model file of a split's source: its fingerprint, when it is a
/// `saved_model.pb` already fingerprinted (by the verification before a split), for an output
/// that copies that file byte for byte (a `.pb` with nothing to split: computing it again was
/// a fifth of such a split, issue 15), and whether it is canonical.
pub(crate) struct KnownFingerprint {
    /// The model file.
    model_file: PathBuf,
    /// Its fingerprint, if it is a `.pb` and was computed.
    def: Option<FingerprintDef>,
    /// The copy of the model file already made in the output directory, if any.
    copied: Option<Written>,
    /// Whether the model file's bytes were found canonical ([`crate::verify::Verified`]): the
    /// fingerprint of its split then takes its messages as they are (see
    /// [`crate::fingerprint::fingerprint_split_as_cpb`]).
    canonical: bool,
}

impl KnownFingerprint {
    /// `def`, the fingerprint of the opened model `src` (computed by its verification), when
    /// its model file is a `saved_model.pb` (a `.cpb` is never written back as the same bytes).
    pub(crate) fn of_pb_source(src: &SavedModel, def: FingerprintDef) -> Option<Self> {
        if src.format() != ModelFormat::Pb {
            return None;
        }
        Some(Self {
            model_file: src.model_file().path.clone(),
            def: Some(def),
            copied: None,
            // Not asked here: the split's fingerprint then checks every node.
            canonical: false,
        })
    }

    /// The fingerprint of a copy of the model file: the same hashes and a fresh uuid, as a new
    /// computation would give (the checkpoint is hashed again where the copy is written).
    fn of_copy(&self) -> Option<FingerprintDef> {
        self.def.as_ref().map(|def| FingerprintDef {
            uuid: crate::fingerprint::random_uuid(),
            ..def.clone()
        })
    }
}

/// How a SavedModel directory is written: where its model is split, how the `.cpb`'s records
/// are written, and which MetaGraphDefs' graphs are split. One value for every writer
/// ([`write_model_dir`], [`split_dir`], the rewrites of [`crate::rewrite`]); the default is what
/// TensorFlow writes (split at [`DEFAULT_MAX_SIZE`], Riegeli's default records, the first
/// MetaGraphDef's graph split).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOptions {
    /// The model is split into `saved_model.cpb` when its proto reaches this many bytes (and
    /// into chunks of at most about this size); below it, it is written as one
    /// `saved_model.pb`.
    pub max_size: u64,
    /// How the records of a `.cpb` are written (compression, chunk sizes).
    pub writer: WriterOptions,
    /// Which MetaGraphDefs' graphs a split splits ([`MetaGraphSplitting`]). With `Every`, a
    /// split whose root or any message chunk would still be past protobuf's 2 GiB limit (a
    /// graph node that large, say) is refused before anything is written
    /// ([`SavedModelError::UnparsableChunk`]).
    pub splitting: MetaGraphSplitting,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            max_size: DEFAULT_MAX_SIZE,
            writer: WriterOptions::default(),
            splitting: MetaGraphSplitting::First,
        }
    }
}

impl WriteOptions {
    /// These options with the model split when it reaches `max_size` bytes.
    pub fn with_max_size(self, max_size: u64) -> Self {
        Self { max_size, ..self }
    }

    /// These options with a `.cpb`'s records written as `writer` says.
    pub fn with_writer(self, writer: WriterOptions) -> Self {
        Self { writer, ..self }
    }

    /// These options with the graphs of the MetaGraphDefs `splitting` names split.
    pub fn with_splitting(self, splitting: MetaGraphSplitting) -> Self {
        Self { splitting, ..self }
    }
}

/// Writes `out` as a copy of the SavedModel directory `src` whose model proto is `model`
/// (for instance a rewritten one): split into `saved_model.cpb` as `options` say when it
/// reaches `options.max_size`, else one `saved_model.pb`; every other file of `src` is carried
/// over, a fresh fingerprint is written, and the directory appears atomically.
pub fn write_model_dir(
    src: &Path,
    out: &Path,
    model: WireMessage,
    options: &WriteOptions,
) -> Result<SplitReport> {
    write_dir(
        DirWrite {
            src,
            out: Output::New(out),
            model: ToWrite::Model(model),
            known: None,
            variables: None,
        },
        options,
        &mut |_| {},
    )
}

/// Writes the `variables/` of an output directory into it (the temporary directory given):
/// see [`write_model_dir_with_variables`].
pub type VariablesWriter<'a> = Box<dyn FnOnce(&Path) -> Result<()> + 'a>;

/// [`write_model_dir`] for a model whose variables change too: the source's `variables/` is
/// not carried over; `write_variables` writes the output's into the directory it is given
/// (the output's temporary directory), after the model file and before the fingerprint, whose
/// `checkpoint_hash` is then of the index it wrote. The model is written as `options` say.
pub fn write_model_dir_with_variables(
    src: &Path,
    out: &Path,
    model: WireMessage,
    options: &WriteOptions,
    write_variables: VariablesWriter<'_>,
) -> Result<SplitReport> {
    write_dir(
        DirWrite {
            src,
            out: Output::New(out),
            model: ToWrite::Model(model),
            known: None,
            variables: Some(write_variables),
        },
        options,
        &mut |_| {},
    )
}

/// [`write_model_dir`], reusing `known` for the new fingerprint where it applies (the model
/// file written has the bytes of the one `known` was computed for).
pub(crate) fn write_model_dir_known(
    src: &Path,
    out: &Path,
    model: WireMessage,
    options: &WriteOptions,
    known: Option<&KnownFingerprint>,
) -> Result<SplitReport> {
    write_dir(
        DirWrite {
            src,
            out: Output::New(out),
            model: ToWrite::Model(model),
            known,
            variables: None,
        },
        options,
        &mut |_| {},
    )
}

/// One directory for [`write_dir`] to write: what it copies, where, the model, and what is
/// already known of the model's bytes.
struct DirWrite<'a> {
    /// The source directory, whose other files are carried over.
    src: &'a Path,
    /// The output directory.
    out: Output<'a>,
    /// The model to write.
    model: ToWrite,
    /// What is known of the source's model file, reused where the output has its bytes.
    known: Option<&'a KnownFingerprint>,
    /// Writes the output's `variables/` instead of carrying the source's over.
    variables: Option<VariablesWriter<'a>>,
}

/// Writes `job` as `options` say, `progress` called with the bytes of model data written:
/// the one writer behind [`write_model_dir`] and [`split_dir`].
fn write_dir(
    job: DirWrite<'_>,
    options: &WriteOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<SplitReport> {
    let DirWrite {
        src,
        out,
        model,
        known,
        variables,
    } = job;
    let WriteOptions {
        max_size,
        writer: options,
        splitting,
    } = *options;
    let tmp = match out {
        Output::New(out) => new_output_dir(src, out)?,
        Output::Begun(tmp) => tmp,
    };
    let out = tmp.target().to_path_buf();
    let out = out.as_path();
    let (
        ModelSplit {
            split,
            warnings,
            model_bytes,
        },
        written_ahead,
    ) = match model {
        ToWrite::Model(model) => (split_model(model, max_size, splitting)?, None),
        ToWrite::Split(split, written) => (split, written),
    };
    if splitting == MetaGraphSplitting::Every {
        if let Some((chunk, size)) = message_chunk_over(&split, MAX_PROTO_SIZE) {
            return Err(SavedModelError::UnparsableChunk {
                path: out.join(ModelFormat::Cpb.file_name()),
                chunk,
                size,
            });
        }
    }
    let copied = known.and_then(|k| k.copied.as_ref());
    // The source's fingerprint, reused by a copy of its model file.
    let reused = known.and_then(|k| Some((k, k.of_copy()?)));
    let (mut written, copied_files) = write_dir_atomically(src, tmp, variables, |tmp| {
        let prefix = tmp.join("saved_model");
        let split = split.into_unchunked();
        if let (Err(_), Some(copied)) = (&split, copied) {
            // Copied ahead, but it is split after all.
            fs::remove_file(&copied.path).map_err(|e| SavedModelError::io(&copied.path, e))?;
        }
        match split {
            // The source `.pb`, untouched and already fingerprinted: copied as it is (or
            // already copied).
            Ok(_) if reused.is_some() => {
                let (known, def) = reused.expect("checked above");
                let written = match copied {
                    Some(copied) => {
                        progress(copied.data_bytes);
                        copied.clone()
                    }
                    None => copy_unchunked(&prefix, &known.model_file, progress)?,
                };
                Ok((written, Some(def)))
            }
            // Written whole; fingerprinted from the file written.
            Ok(model) => write_pb(tmp, &model, progress),
            // Chunked: fingerprinted from the split in memory while it is written (or once
            // the verification allows, when it was written while the model was verified).
            Err(split) => {
                let cpb_file = tmp.join(ModelFormat::Cpb.file_name());
                let canonical = known.is_some_and(|k| k.canonical);
                let fingerprint = || {
                    crate::fingerprint::fingerprint_split_as_cpb(&split, &cpb_file, 0, canonical)
                };
                let written = match written_ahead {
                    Some(ahead) => Ok((ahead.written, Some(ahead.fingerprint))),
                    None => writing_and_fingerprinting(fingerprint, || {
                        Ok(write_chunked(&prefix, &split, options, progress)?)
                    }),
                };
                drop_in_background(split);
                written
            }
        }
    })?;
    if let Some(name) = written.path.file_name() {
        written.path = out.join(name);
    }
    Ok(SplitReport {
        written,
        copied_files,
        warnings,
        model_bytes,
    })
}

/// What [`merge_dir`] did.
#[derive(Debug)]
pub struct MergeReport {
    /// Size of the `saved_model.pb` written.
    pub model_bytes: u64,
    /// Files carried over from the source directory.
    pub copied_files: usize,
}

/// Writes `out` as a copy of `src` with its model as one `saved_model.pb`. Refuses when the
/// merged model would exceed what protobuf can parse (2 GiB - 1): for a `.cpb`, from the
/// chunk sizes its metadata declares, before any chunk is decoded. Refuses a directory
/// `verify` rejects ([`crate::verify::verified_model`]). `progress` is called with (bytes
/// written now, total bytes).
pub fn merge_dir(
    src: &Path,
    out: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<MergeReport> {
    refuse_existing(out)?;
    // A `.pb` not in canonical form is read as its canonical form, made once (issue 29).
    let opened = crate::fingerprint::in_canonical_form(SavedModel::open(src)?);
    refuse_inside(src, out)?;
    if opened.format() == ModelFormat::Cpb {
        let (chunks, _) = opened.chunks()?;
        let declared = chunks.declared_bytes();
        if declared > MAX_PROTO_SIZE {
            return Err(SavedModelError::TooLargeToMerge {
                dir: src.to_path_buf(),
                size: declared,
            });
        }
    }
    // The output's fingerprint, computed from the file written, is the check of what would
    // make a fingerprint fail: the source's is not computed too (unless a stored one is
    // compared; a `.cpb`'s is then completed below from the graph's canonical form, made
    // once, and compared while the output is written: `Verified::pending`).
    // A `.cpb`'s merged message is checked against its schema below, by the encoder that
    // makes its canonical form or, written as held, on its own. Any fault found on the way is
    // worded as verify words it, by verifying the model again the usual way.
    let worded = |fault: SavedModelError| {
        crate::verify::verified_model_to_fingerprint_again(&opened)
            .err()
            .unwrap_or(fault)
    };
    let verified = crate::verify::verified_model_but_schema(&opened).map_err(worded)?;
    let (model, pending) = (verified.model, verified.pending);
    let size = model.encoded_len();
    progress(0, size);
    if size > MAX_PROTO_SIZE {
        return Err(SavedModelError::TooLargeToMerge {
            dir: src.to_path_buf(),
            size,
        });
    }
    // A `.cpb` whose chunks are mostly not in canonical form is written as the canonical
    // form of the merged model, made once in memory (what the Merger and protobuf C++ write),
    // and fingerprinted from those very bytes. Any other model is written as held, and its
    // fingerprint computed from the file written (`write_pb`; made canonical there if it is
    // not). Never from what verify saw of the input: `fingerprint_check.sh` and
    // `noncanonical_check.sh` compare it with TensorFlow's fingerprint of the written
    // directory.
    let canonical = match opened.format() {
        ModelFormat::Cpb => {
            crate::fingerprint::canonical_form_of_held(model, &opened.model_file().path)
                .map_err(worded)?
        }
        _ => HeldCanonical::AsHeld(model),
    };
    // Made by the validating encoder, the canonical form is valid and so was the model;
    // one written as held (or with its large values kept where they are, which that encoder
    // did not read) is checked here.
    if let HeldCanonical::AsHeld(model) | HeldCanonical::KeepingValues { model, .. } = &canonical {
        crate::verify::check_merged_schema(&opened, model).map_err(worded)?;
    }
    let opened = &opened;
    let (written, copied_files) = match canonical {
        HeldCanonical::Made(bytes) => {
            let compare = || match pending {
                Some(pending) => {
                    compare_with_stored(opened, pending.complete_from_canonical(&bytes)?)
                }
                None => Ok(()),
            };
            write_dir_atomically(src, new_output_dir(src, out)?, None, |tmp| {
                writing_while(compare, || {
                    progress(0, bytes.len() as u64);
                    let written = write_canonical_pb(tmp, &bytes)?;
                    progress(bytes.len() as u64, bytes.len() as u64);
                    Ok(written)
                })
            })?
        }
        HeldCanonical::AsHeld(model) => {
            // Owned by the writing, and let go once written: the fingerprint of the file
            // written follows.
            write_dir_atomically(src, new_output_dir(src, out)?, None, move |tmp| {
                let compare = || match pending {
                    Some(pending) => {
                        compare_with_stored(opened, pending.complete_from_model(&model)?)
                    }
                    None => Ok(()),
                };
                let written = writing_while(compare, || {
                    let mut progress = |n| progress(n, size);
                    write_pb(tmp, &model, &mut progress)
                });
                drop(model);
                written
            })?
        }
        // Its fingerprint is computed from the file written, found canonical there.
        HeldCanonical::KeepingValues { canonical, model } => {
            // The graph's nodes, taken from the model held, before it is let go.
            if let Some(pending) = pending {
                compare_with_stored(opened, pending.complete_from_model(&model)?)?;
            }
            drop(model);
            let size = canonical.encoded_len();
            write_dir_atomically(src, new_output_dir(src, out)?, None, move |tmp| {
                let mut progress = |n| progress(n, size);
                write_pb(tmp, &canonical, &mut progress)
            })?
        }
    };
    let model_bytes = written.data_bytes;
    Ok(MergeReport {
        model_bytes,
        copied_files,
    })
}

/// Runs `write` while `check` runs on another thread: a refusal found while the output is
/// being written (in a temporary, removed on error) costs no time when there is none. The
/// check's error wins over the write's.
fn writing_while<T>(
    check: impl FnOnce() -> Result<()> + Send,
    write: impl FnOnce() -> Result<T>,
) -> Result<T> {
    std::thread::scope(|s| {
        let checked = s.spawn(check);
        let written = write();
        checked
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        written
    })
}

/// Runs `write`, which writes the model file, while `fingerprint` computes that file's
/// fingerprint from the model in memory on other threads (its checkpoint hash is left to
/// [`write_dir_atomically`]): reading the file back once written was a third of a merge, and a
/// fifth of a split, of a model of millions of nodes (issue 15).
fn writing_and_fingerprinting<T>(
    fingerprint: impl FnOnce() -> Result<FingerprintDef> + Send,
    write: impl FnOnce() -> Result<T>,
) -> Result<(T, Option<FingerprintDef>)> {
    std::thread::scope(|s| {
        let fingerprint = s.spawn(fingerprint);
        let written = write();
        let fingerprint = fingerprint
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        Ok((written?, Some(fingerprint?)))
    })
}

/// Writes `model` as `dir/saved_model.pb`, its fields as they are held (known fields in
/// field-number order, unknown ones after them in the order read: lossless). No fingerprint
/// is returned: [`write_dir_atomically`] computes it from the file written, so that it
/// describes those bytes by construction (issue 29: a fingerprint computed from the model in
/// memory, trusting that the file would parse back to it, did not describe a file whose
/// fields were written in another order).
fn write_pb(
    dir: &Path,
    model: &WireMessage,
    progress: &mut dyn FnMut(u64),
) -> Result<(Written, Option<FingerprintDef>)> {
    let path = dir.join(ModelFormat::Pb.file_name());
    let data_bytes = write_message_with_progress(&path, model, progress)?;
    Ok((pb_written(path, data_bytes), None))
}

/// What writing a `saved_model.pb` of `data_bytes` at `path` wrote.
fn pb_written(path: PathBuf, data_bytes: u64) -> Written {
    Written {
        path,
        chunked: false,
        chunks: 0,
        data_bytes,
    }
}

/// Fills the output directory begun as `tmp` ([`new_output_dir`]) and renames it into place:
/// `write_model` writes the model file, every other file of `src` is copied, the fingerprint
/// is written. The fingerprint is the one `write_model` returns when it computed it (its
/// checkpoint hash is then filled in here), else one computed from the directory. Returns what
/// `write_model` returned and the number of files copied.
fn write_dir_atomically(
    src: &Path,
    tmp: TempPath,
    variables: Option<VariablesWriter<'_>>,
    write_model: impl FnOnce(&Path) -> Result<(Written, Option<FingerprintDef>)>,
) -> Result<(Written, usize)> {
    let (mut written, computed) = write_model(tmp.path())?;
    let copied = match variables {
        None => copy_tree(src, tmp.path())?,
        Some(write_variables) => {
            let copied = copy_tree_except(src, tmp.path(), &["variables"])?;
            write_variables(tmp.path())?;
            copied
        }
    };
    // A fresh fingerprint of the model just written (the old one is not carried over).
    let fingerprint = match computed {
        Some(def) => FingerprintDef {
            checkpoint_hash: crate::fingerprint::checkpoint_hash(tmp.path()),
            ..def
        },
        None => {
            let (def, canonical) = crate::fingerprint::fingerprint_written(tmp.path())?;
            if let Some((path, bytes)) = canonical {
                written.data_bytes = write_canonical_form(&path, &bytes)?;
            }
            def
        }
    };
    crate::fingerprint::write_fingerprint(tmp.path(), &fingerprint)?;
    tmp.persist()?;
    Ok((written, copied))
}

/// Writes `bytes`, a canonical form the encoder made, as `dir/saved_model.pb`, and its
/// fingerprint, computed from those bytes (the checkpoint hash is left to
/// [`write_dir_atomically`]).
fn write_canonical_pb(dir: &Path, bytes: &Bytes) -> Result<(Written, Option<FingerprintDef>)> {
    let path = dir.join(ModelFormat::Pb.file_name());
    let (data_bytes, fingerprint) = writing_and_fingerprinting(
        || crate::fingerprint::fingerprint_made_canonical(bytes, &path),
        || write_canonical_form(&path, bytes),
    )?;
    Ok((pb_written(path, data_bytes), fingerprint))
}

/// Writes `bytes`, the canonical form of the `.pb` at `path` (found while it was fingerprinted),
/// in its place, atomically: a model held as read keeps its fields' encodings (map entries
/// without their default keys, packed or not, fields sent in parts), which protobuf C++ would
/// have written otherwise. Every `.pb` unbound writes is then byte for byte what TensorFlow
/// writes for the same message (a `merge` equals the Merger's output), and reads back on the
/// fast paths of a canonical model. Returns the size written.
fn write_canonical_form(path: &Path, bytes: &[u8]) -> Result<u64> {
    write_atomically(path, |out| {
        out.write_all(bytes)
            .map_err(|e| SavedModelError::io(path, e))?;
        Ok::<_, SavedModelError>(bytes.len() as u64)
    })
}

/// The output directory `out` of a command reading `src`, begun: its temporary directory,
/// created, to be filled and then persisted ([`write_dir_atomically`]). Refuses an `out` that
/// exists or lies inside `src`.
fn new_output_dir(src: &Path, out: &Path) -> Result<TempPath> {
    refuse_existing(out)?;
    refuse_inside(src, out)?;
    let tmp = TempPath::new(out);
    tmp.create_dir()
        .map_err(|e| SavedModelError::io(tmp.path(), e))?;
    Ok(tmp)
}

/// Where [`write_dir`] writes: a new directory, or one already begun.
enum Output<'a> {
    /// `out`, not begun yet.
    New(&'a Path),
    /// Begun by [`new_output_dir`] (something may already be in it).
    Begun(TempPath),
}

/// Outputs are never overwritten: an existing `out` (even a dangling symlink) is refused.
fn refuse_existing(out: &Path) -> Result<()> {
    if fs::symlink_metadata(out).is_ok() {
        return Err(SavedModelError::OutputExists {
            path: out.to_path_buf(),
        });
    }
    Ok(())
}

/// Refuses an `out` inside `src` (`split DIR DIR/sub`): the copy of `src` would take in its
/// own temporary directory.
fn refuse_inside(src: &Path, out: &Path) -> Result<()> {
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if let (Ok(src_real), Ok(parent_real)) = (fs::canonicalize(src), fs::canonicalize(parent)) {
        if parent_real.starts_with(&src_real) {
            return Err(SavedModelError::OutputInsideInput {
                out: out.to_path_buf(),
                dir: src.to_path_buf(),
            });
        }
    }
    Ok(())
}

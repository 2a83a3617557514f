//! SavedModel directories: finding and reading the model proto, and writing split or merged
//! copies of a whole directory atomically (every other file carried over byte for byte).

use std::fs;
use std::path::{Path, PathBuf};

use prost_reflect::{DynamicMessage, MessageDescriptor};
use unbound_chunked::{
    read_cpb, read_pb, write_message_with_progress, write_split, ChunkedError, ReadMessage, Result,
    SourceFormat, Written,
};
use unbound_io::TempPath;
use unbound_records::WriterOptions;
use unbound_wire::WireMessage;

use crate::split::{split_saved_model, SplitContext};

/// Files of a SavedModel directory that hold the model proto (and are rewritten, not copied).
const MODEL_FILES: [&str; 3] = ["saved_model.cpb", "saved_model.pb", "saved_model.pbtxt"];

/// The fingerprint describes the model file's exact content; a rewritten model needs a new one,
/// so the old one is not carried over.
const FINGERPRINT_FILE: &str = "fingerprint.pb";

/// Largest message protobuf can serialize and parse: 2 GiB - 1.
pub const MAX_PROTO_SIZE: u64 = (1 << 31) - 1;

/// The `tensorflow.SavedModel` descriptor.
pub fn saved_model_descriptor() -> Result<MessageDescriptor> {
    message_descriptor("tensorflow.SavedModel")
}

/// A message descriptor from our pool by full name.
pub fn message_descriptor(name: &str) -> Result<MessageDescriptor> {
    unbound_proto::descriptor_pool()
        .get_message_by_name(name)
        .ok_or_else(|| ChunkedError::UnknownType(name.to_string()))
}

/// Which file of `dir` holds the model: `saved_model.cpb`, else `.pb`, else `.pbtxt`.
pub fn model_file(dir: &Path) -> Result<(PathBuf, &'static str)> {
    if !dir.is_dir() {
        return Err(ChunkedError::io(
            dir,
            std::io::Error::new(std::io::ErrorKind::NotFound, "not a SavedModel directory"),
        ));
    }
    for (name, kind) in MODEL_FILES.iter().zip(["cpb", "pb", "pbtxt"]) {
        let p = dir.join(name);
        if p.is_file() {
            return Ok((p, kind));
        }
    }
    Err(ChunkedError::io(
        dir,
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no saved_model.cpb, saved_model.pb or saved_model.pbtxt in this directory",
        ),
    ))
}

/// Reads the SavedModel proto of `dir`, preferring `.cpb`, then `.pb`, then `.pbtxt`.
pub fn read_saved_model(dir: &Path) -> Result<ReadMessage> {
    let desc = saved_model_descriptor()?;
    let (path, kind) = model_file(dir)?;
    match kind {
        "cpb" => read_cpb(&path, &desc),
        "pb" => Ok(ReadMessage {
            message: read_pb(&path, &desc)?,
            format: SourceFormat::Pb,
            metadata: None,
        }),
        _ => Ok(ReadMessage {
            message: read_text(&path, &desc)?,
            format: SourceFormat::Pb,
            metadata: None,
        }),
    }
}

/// Parses a text-format message file.
pub fn read_text(path: &Path, desc: &MessageDescriptor) -> Result<WireMessage> {
    let text = fs::read_to_string(path).map_err(|e| ChunkedError::io(path, e))?;
    let msg = DynamicMessage::parse_text_format(desc.clone(), &text).map_err(|e| {
        ChunkedError::metadata(path.display().to_string(), format!("text format: {e}"))
    })?;
    let bytes = bytes::Bytes::from(prost::Message::encode_to_vec(&msg));
    WireMessage::parse(&bytes, Some(desc.clone())).map_err(|error| ChunkedError::Wire {
        source_name: path.display().to_string(),
        error,
    })
}

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

/// Writes `out` as a split (image-format) copy of the SavedModel in `src`.
pub fn split_dir(
    src: &Path,
    out: &Path,
    max_size: u64,
    options: WriterOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<SplitReport> {
    let model = read_saved_model(src)?.message;
    write_model_dir(src, out, model, max_size, options, progress)
}

/// Writes `out` as a copy of the SavedModel directory `src` whose model proto is `model`
/// (for instance a rewritten one): split into `saved_model.cpb` when it reaches `max_size`,
/// else one `saved_model.pb`; every other file of `src` is carried over, a fresh fingerprint
/// is written, and the directory appears atomically.
pub fn write_model_dir(
    src: &Path,
    out: &Path,
    model: WireMessage,
    max_size: u64,
    options: WriterOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<SplitReport> {
    let desc = saved_model_descriptor()?;
    let model_bytes = model.encoded_len();
    let mut ctx = SplitContext::new(max_size);
    let split = split_saved_model(model, &desc, &mut ctx)?;
    let (mut written, copied_files) = write_dir_atomically(src, out, |tmp| {
        write_split(&tmp.join("saved_model"), split, options, progress)
    })?;
    if let Some(name) = written.path.file_name() {
        written.path = out.join(name);
    }
    Ok(SplitReport {
        written,
        copied_files,
        warnings: ctx.warnings,
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
/// merged model would exceed what protobuf can parse (2 GiB - 1). `progress` is called with
/// (bytes written now, total bytes).
pub fn merge_dir(
    src: &Path,
    out: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<MergeReport> {
    let model = read_saved_model(src)?.message;
    let size = model.encoded_len();
    progress(0, size);
    if size > MAX_PROTO_SIZE {
        return Err(ChunkedError::metadata(
            src.display().to_string(),
            format!(
                "the merged SavedModel would be {size} bytes, over protobuf's limit of \
                 {MAX_PROTO_SIZE}: keep it in the chunked format"
            ),
        ));
    }
    // The closure owns the model, so its input mapping is released once the model is written,
    // before the fingerprint maps the output: peak memory holds one copy, not two.
    let (model_bytes, copied_files) = write_dir_atomically(src, out, move |tmp| {
        let written = write_message_with_progress(&tmp.join("saved_model.pb"), &model, &mut |n| {
            progress(n, size)
        });
        drop(model);
        written
    })?;
    Ok(MergeReport {
        model_bytes,
        copied_files,
    })
}

/// Builds `out` in a temporary directory beside it: `write_model` writes the model file, every
/// other file of `src` is copied, a fresh `fingerprint.pb` is computed for the result, then the
/// directory is renamed into place. `out` must not exist yet. Returns what `write_model`
/// returned and the number of files copied.
fn write_dir_atomically<T>(
    src: &Path,
    out: &Path,
    write_model: impl FnOnce(&Path) -> Result<T>,
) -> Result<(T, usize)> {
    if out.exists() {
        return Err(ChunkedError::io(
            out,
            std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "output already exists; choose a new path",
            ),
        ));
    }
    let tmp = TempPath::new(out);
    fs::create_dir_all(tmp.path()).map_err(|e| ChunkedError::io(tmp.path(), e))?;
    let value = write_model(tmp.path())?;
    let copied = copy_tree(src, tmp.path(), true)?;
    // A fresh fingerprint of the model just written (the old one is not carried over).
    let fingerprint = crate::fingerprint::fingerprint_dir(tmp.path())?;
    crate::fingerprint::write_fingerprint(tmp.path(), &fingerprint)?;
    tmp.persist()?;
    Ok((value, copied))
}

/// Copies every file under `src` to `dst` (creating directories), skipping the model files and
/// the fingerprint at the top level. Returns the number of files copied.
fn copy_tree(src: &Path, dst: &Path, top: bool) -> Result<usize> {
    let mut copied = 0;
    let entries = fs::read_dir(src).map_err(|e| ChunkedError::io(src, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| ChunkedError::io(src, e))?;
        let name = entry.file_name();
        let name_str = name.to_string_lossy();
        if top && (MODEL_FILES.contains(&name_str.as_ref()) || name_str == FINGERPRINT_FILE) {
            continue;
        }
        let from = entry.path();
        let to = dst.join(&name);
        let kind = entry.file_type().map_err(|e| ChunkedError::io(&from, e))?;
        if kind.is_dir() {
            fs::create_dir_all(&to).map_err(|e| ChunkedError::io(&to, e))?;
            copied += copy_tree(&from, &to, false)?;
        } else if !fs::metadata(&from)
            .map_err(|e| ChunkedError::io(&from, e))?
            .is_file()
        {
            // A FIFO, socket or device would block or stream forever: refuse it.
            return Err(ChunkedError::io(
                &from,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "not a regular file; a SavedModel directory holds only files and directories",
                ),
            ));
        } else {
            fs::copy(&from, &to).map_err(|e| ChunkedError::io(&from, e))?;
            copied += 1;
        }
    }
    Ok(copied)
}

//! Locating and reading a SavedModel directory: which file holds the model ([`model_file`],
//! the one place that decides it), the model files passed over, the descriptors of our schema,
//! and the model proto read whole ([`read_saved_model`]). The bottom of the crate's flow:
//! every report, `verify` and the writers start here, and this module imports none of them.

use std::fs;
use std::path::{Path, PathBuf};

use prost_reflect::{DynamicMessage, MessageDescriptor};
use unbound_chunked::{read_cpb, read_pb, ReadMessage};
use unbound_proto::tensorflow::proto_splitter::ChunkMetadata;
use unbound_wire::WireMessage;

use crate::error::{Result, SavedModelError};
use crate::format::ModelFormat;

/// The file of a SavedModel directory that holds the model proto.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFile {
    /// Its path (the directory as given, joined with the file name).
    pub path: PathBuf,
    /// Its format.
    pub format: ModelFormat,
}

/// The `tensorflow.SavedModel` descriptor.
pub fn saved_model_descriptor() -> Result<MessageDescriptor> {
    message_descriptor("tensorflow.SavedModel")
}

/// A message descriptor from our pool by full name.
pub fn message_descriptor(name: &str) -> Result<MessageDescriptor> {
    unbound_proto::descriptor_pool()
        .get_message_by_name(name)
        .ok_or_else(|| SavedModelError::UnknownType(name.to_string()))
}

/// Which file of `dir` holds the model: `saved_model.cpb`, else `.pb`, else `.pbtxt`. The
/// one place that decides it (show, verify, fingerprint, split, merge and vars all ask here).
pub fn model_file(dir: &Path) -> Result<ModelFile> {
    if !dir.is_dir() {
        return Err(SavedModelError::NotADirectory {
            dir: dir.to_path_buf(),
        });
    }
    ModelFormat::SEARCH_ORDER
        .into_iter()
        .map(|format| ModelFile {
            path: dir.join(format.file_name()),
            format,
        })
        .find(|f| f.path.is_file())
        .ok_or_else(|| SavedModelError::NoModelFile {
            dir: dir.to_path_buf(),
        })
}

/// The model files of `dir` that [`model_file`] passes over because one earlier in
/// [`ModelFormat::SEARCH_ORDER`] exists (a `saved_model.pb` beside a `saved_model.cpb`):
/// nothing reads them, which users should be told. Empty when there is no model file.
pub fn unused_model_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(used) = model_file(dir) else {
        return Vec::new();
    };
    ModelFormat::SEARCH_ORDER
        .into_iter()
        .filter(|&f| f != used.format)
        .map(|f| dir.join(f.file_name()))
        .filter(|p| fs::symlink_metadata(p).is_ok())
        .collect()
}

/// A SavedModel proto as read by [`read_saved_model`].
#[derive(Debug)]
pub struct SavedModelFile {
    /// The merged message.
    pub message: WireMessage,
    /// The file it was read from.
    pub file: ModelFile,
    /// The chunk metadata of a `.cpb`.
    pub metadata: Option<ChunkMetadata>,
}

/// Reads the SavedModel proto of `dir`, preferring `.cpb`, then `.pb`, then `.pbtxt`.
pub fn read_saved_model(dir: &Path) -> Result<SavedModelFile> {
    let desc = saved_model_descriptor()?;
    let file = model_file(dir)?;
    let (message, metadata) = match file.format {
        ModelFormat::Cpb => {
            let ReadMessage {
                message, metadata, ..
            } = read_cpb(&file.path, &desc)?;
            (message, metadata)
        }
        ModelFormat::Pb => (read_pb(&file.path, &desc)?, None),
        ModelFormat::Pbtxt => (read_text(&file.path, &desc)?, None),
    };
    Ok(SavedModelFile {
        message,
        file,
        metadata,
    })
}

/// Parses a text-format message file.
pub fn read_text(path: &Path, desc: &MessageDescriptor) -> Result<WireMessage> {
    // Mapped: a FIFO or device in its place is refused instead of read forever.
    let bytes = unbound_io::map_file(path)?;
    let text = std::str::from_utf8(&bytes).map_err(|e| SavedModelError::TextFormat {
        path: path.to_path_buf(),
        fault: format!("not UTF-8 text: {e}"),
    })?;
    let msg = DynamicMessage::parse_text_format(desc.clone(), text).map_err(|e| {
        SavedModelError::TextFormat {
            path: path.to_path_buf(),
            fault: e.to_string(),
        }
    })?;
    let bytes = bytes::Bytes::from(prost::Message::encode_to_vec(&msg));
    WireMessage::parse(&bytes, Some(desc.clone()))
        .map_err(|error| SavedModelError::malformed(path.display().to_string(), error))
}

//! Reading one message of any type from `PREFIX.cpb` / `PREFIX.pb` into bytes Python can
//! parse, as TensorFlow's `Merger::Read` does, refusing what protobuf cannot parse.

use std::path::Path;

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use unbound_chunked::{read_prefix, ChunkedError, SourceFormat};
use unbound_savedmodel::SavedModelError;
use unbound_savedmodel::MAX_PROTO_SIZE;
use unbound_wire::{DecodeError, WireMessage};

use crate::errors::{raise, Kind, ToPyErr};
use crate::splitter_types::{message_type, TypeError};

/// Why a message could not be handed to Python.
#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    /// The message type is unknown.
    #[error(transparent)]
    Type(#[from] TypeError),
    /// Reading or merging failed.
    #[error(transparent)]
    Chunked(#[from] ChunkedError),
    /// A value could not be read or serialized (a lazy record that fails its check).
    #[error(transparent)]
    Wire(#[from] unbound_wire::WireError),
    /// The merged message breaks its schema.
    #[error(transparent)]
    Schema(#[from] SavedModelError),
    /// The serialized message given (to split) does not decode as its type.
    #[error("the {type_name} given: malformed protobuf {error}")]
    Malformed {
        /// The message type it was given as.
        type_name: String,
        /// The decoding fault.
        error: DecodeError,
    },
    /// The message is past protobuf's limit.
    #[error("{source_name}: the merged message would be {size} bytes, over protobuf's limit of {MAX_PROTO_SIZE} (Python's protobuf cannot parse it; read it by parts)")]
    TooLarge {
        /// Where it came from.
        source_name: String,
        /// Its size.
        size: u64,
    },
}

impl ToPyErr for MessageError {
    fn to_py_err(&self) -> PyErr {
        match self {
            MessageError::Type(e @ TypeError::Unknown(_)) => raise(Kind::InvalidArgument, e),
            MessageError::Type(e) => raise(Kind::Format, e),
            MessageError::Chunked(e) => e.to_py_err(),
            MessageError::Wire(e) => e.to_py_err(),
            MessageError::Schema(e) => e.to_py_err(),
            MessageError::Malformed { .. } => raise(Kind::Format, self),
            MessageError::TooLarge { .. } => raise(Kind::TooLarge, self),
        }
    }
}

/// Refuses `message` (from `source_name`) past 2 GiB - 1, which protobuf cannot parse.
pub fn check_size(message: &WireMessage, source_name: &str) -> Result<(), MessageError> {
    let size = message.encoded_len();
    if size > MAX_PROTO_SIZE {
        return Err(MessageError::TooLarge {
            source_name: source_name.to_string(),
            size,
        });
    }
    Ok(())
}

/// The serialized segments of `message` (from `source_name`), refused past 2 GiB - 1.
pub fn message_segments(
    message: &WireMessage,
    source_name: &str,
) -> Result<Vec<Bytes>, MessageError> {
    check_size(message, source_name)?;
    Ok(message.to_segments()?)
}

/// Reads the message under `prefix` (`.cpb` first, as TensorFlow) and serializes it:
/// the segments and the format read (`"cpb"` or `"pb"`).
pub fn read_message_bytes(
    prefix: &Path,
    type_name: &str,
    schema: Option<&[u8]>,
) -> Result<(Vec<Bytes>, String), MessageError> {
    let desc = message_type(type_name, schema)?;
    let read = read_prefix(prefix, &desc)?;
    let source_name = prefix.display().to_string();
    check_size(&read.message, &source_name)?;
    unbound_savedmodel::verify::check_schema(&read.message, &desc, &source_name)?;
    let format = match read.format {
        SourceFormat::Cpb => "cpb",
        _ => "pb",
    };
    Ok((
        message_segments(&read.message, &source_name)?,
        format.to_string(),
    ))
}

/// One Python `bytes` object holding `segments` back to back (one copy, made holding the GIL).
pub fn to_py_bytes<'py>(py: Python<'py>, segments: &[Bytes]) -> PyResult<Bound<'py, PyBytes>> {
    let total: usize = segments.iter().map(|s| s.len()).sum();
    PyBytes::new_with(py, total, |buf| {
        let mut at = 0;
        for s in segments {
            buf[at..at + s.len()].copy_from_slice(s);
            at += s.len();
        }
        Ok(())
    })
}

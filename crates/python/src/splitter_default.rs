//! The default splitting algorithm of `unbound.Splitter` (the one `unbound proto split`
//! uses: TensorFlow's for `tensorflow.SavedModel` and `tensorflow.GraphDef`, unbound's generic
//! one for any other type), and `split_and_write`, which writes its chunks straight from Rust
//! when Python never asked to see them (no copy of every chunk into Python `bytes`).

use std::path::PathBuf;

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use unbound_chunked::{write_split, SplitOutput};
use unbound_savedmodel::split::{split_message, SplitContext, DEFAULT_MAX_SIZE};
use unbound_wire::WireMessage;

use crate::background;
use crate::errors::py_err;
use crate::splitter_types::message_type;
use crate::toolkit_message::MessageError;
use crate::toolkit_options::{checked_max_size, writer_options, DEFAULT_COMPRESSION};

/// Splits the serialized message `data` of type `type_name` until every chunk fits
/// `max_size`; the split and the warnings of TensorFlow's algorithms.
pub fn split_serialized(
    type_name: &str,
    data: &Bytes,
    max_size: u64,
    schema: Option<&[u8]>,
) -> Result<(SplitOutput, Vec<String>), MessageError> {
    let desc = message_type(type_name, schema)?;
    let message =
        WireMessage::parse(data, Some(desc.clone())).map_err(|error| MessageError::Malformed {
            type_name: type_name.to_string(),
            error,
        })?;
    let mut ctx = SplitContext::new(max_size);
    let split = split_message(message, &desc, &mut ctx)?;
    Ok((split, ctx.warnings))
}

/// Splits the serialized message `data` as [`split_serialized`] and writes `PREFIX.pb` or
/// `PREFIX.cpb` atomically: the path written and the warnings.
#[pyfunction]
#[pyo3(signature = (type_name, data, prefix, max_size = DEFAULT_MAX_SIZE, compression = DEFAULT_COMPRESSION, schema = None))]
pub fn split_and_write(
    py: Python<'_>,
    type_name: String,
    data: PyBackedBytes,
    prefix: PathBuf,
    max_size: u64,
    compression: &str,
    schema: Option<Vec<u8>>,
) -> PyResult<(String, Vec<String>)> {
    let max_size = checked_max_size(max_size)?;
    let options = writer_options(compression)?;
    let data = Bytes::from_owner(data);
    let work = move || -> Result<_, MessageError> {
        let (split, warnings) = split_serialized(&type_name, &data, max_size, schema.as_deref())?;
        let written = write_split(&prefix, split, options, &mut |_| {})?;
        Ok((written.path.display().to_string(), warnings))
    };
    background::run(py, work)?.map_err(py_err)
}

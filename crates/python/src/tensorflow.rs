//! Bindings for `unbound.tensorflow`: the SavedModel image format by parts.
//!
//! - `_tf_split(parts, max_size)` and `_tf_write(parts, prefix, max_size, compression)` take a
//!   `tensorflow.SavedModel` handed over by parts ([`crate::tensorflow::assemble`]) and split it
//!   with TensorFlow's SavedModel algorithm (`unbound_savedmodel::split::split_saved_model`,
//!   the code `unbound split` runs), returning the chunks or writing `PREFIX.cpb` (or
//!   `PREFIX.pb` when nothing needed splitting) atomically;
//! - `_tf_read(export_dir)` reads a SavedModel directory's model (`saved_model.cpb`, else
//!   `.pb`, else `.pbtxt`) and returns its merge steps ([`crate::tensorflow::steps`]).
//!
//! The message is never serialized whole on either side: past 2 GiB, Python could not.

use std::path::PathBuf;

use prost::Message as _;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use unbound_chunked::{write_split, Chunk, SplitOutput};
use unbound_savedmodel::dir::{read_saved_model, saved_model_descriptor};
use unbound_savedmodel::fingerprint::canonical_form_unless_mostly_canonical;
use unbound_savedmodel::split::{split_saved_model, SplitContext};

use crate::background;
use crate::errors::py_err;
use crate::toolkit_options::{checked_max_size, writer_options};
mod assemble;
mod steps;

use assemble::assemble;
use steps::{plan, MergeSteps, STEP_LIMIT};

/// Adds this file's functions and classes to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_tf_split, m)?)?;
    m.add_function(wrap_pyfunction!(_tf_write, m)?)?;
    m.add_function(wrap_pyfunction!(_tf_read, m)?)?;
    m.add_function(wrap_pyfunction!(_tf_assembled_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(_tf_file_descriptor_set, m)?)?;
    m.add_class::<MergeSteps>()?;
    Ok(())
}

/// Assembles the parts and splits them with TensorFlow's SavedModel algorithm, off the GIL.
fn split_parts(
    py: Python<'_>,
    parts: &Bound<'_, PyAny>,
    max_size: u64,
) -> PyResult<(SplitOutput, Vec<String>)> {
    checked_max_size(max_size)?;
    let desc = saved_model_descriptor().map_err(py_err)?;
    let model = assemble(parts, &desc)?;
    background::run(py, move || {
        // Only a model to split: one with nothing to split is written as it is given, as
        // `unbound split` copies such a `.pb`.
        let model = if model.encoded_len() >= max_size {
            in_canonical_form(model, &desc)?
        } else {
            model
        };
        let mut ctx = SplitContext::new(max_size);
        split_saved_model(model, &desc, &mut ctx).map(|split| (split, ctx.warnings))
    })?
    .map_err(py_err)
}

/// Models up to this size are split from their canonical form when mostly not canonical.
const CANONICAL_UP_TO: u64 = 1 << 30;

/// `model`, or the model of its canonical form when most of it is not canonical (as
/// TensorFlow's Python serializes: map entries without their default keys), as `unbound
/// split` splits it (`fingerprint::in_canonical_form`): the same message, and the same chunks
/// as the command writes. Past 1 GiB the model is split as it is given: its canonical form
/// would be a whole serialization more in memory.
fn in_canonical_form(
    model: unbound_wire::WireMessage,
    desc: &prost_reflect::MessageDescriptor,
) -> unbound_savedmodel::Result<unbound_wire::WireMessage> {
    if model.encoded_len() > CANONICAL_UP_TO {
        return Ok(model);
    }
    let bytes = bytes::Bytes::from(model.to_vec()?);
    match canonical_form_unless_mostly_canonical(&bytes) {
        Some(canonical) => unbound_wire::WireMessage::parse(&canonical, Some(desc.clone()))
            .map_err(|e| {
                unbound_savedmodel::SavedModelError::malformed(
                    "the canonical form of the model".to_string(),
                    e,
                )
            }),
        None => Ok(model),
    }
}

/// What `_tf_split` returns: the serialized chunks, the serialized `ChunkedMessage`, and
/// where the split differs from TensorFlow's algorithm.
type SplitResult<'py> = (Vec<Bound<'py, PyBytes>>, Bound<'py, PyBytes>, Vec<String>);

/// Splits a SavedModel given by parts: `(chunks, chunked_message, warnings)`, each chunk
/// serialized, the `ChunkedMessage` serialized.
#[pyfunction]
fn _tf_split<'py>(
    py: Python<'py>,
    parts: &Bound<'py, PyAny>,
    max_size: u64,
) -> PyResult<SplitResult<'py>> {
    let (split, warnings) = split_parts(py, parts, max_size)?;
    let mut chunks = Vec::with_capacity(split.chunks.len());
    for chunk in &split.chunks {
        let bytes = match chunk {
            Chunk::Message(m) => bytes::Bytes::from(m.to_vec().map_err(py_err)?),
            Chunk::SerializedMessage(p) | Chunk::Bytes(p) => p.bytes().map_err(py_err)?,
        };
        chunks.push(PyBytes::new(py, &bytes));
    }
    let message = PyBytes::new(py, &split.message.encode_to_vec());
    Ok((chunks, message, warnings))
}

/// Splits a SavedModel given by parts and writes it under `prefix` (`PREFIX.cpb`, or
/// `PREFIX.pb` when nothing was chunked): `(path, chunked, chunk_count, data_bytes,
/// warnings)`.
#[pyfunction]
fn _tf_write(
    py: Python<'_>,
    parts: &Bound<'_, PyAny>,
    prefix: PathBuf,
    max_size: u64,
    compression: &str,
) -> PyResult<(PathBuf, bool, usize, u64, Vec<String>)> {
    let options = writer_options(compression)?;
    let (split, warnings) = split_parts(py, parts, max_size)?;
    let written = background::run(py, move || {
        write_split(&prefix, split, options, &mut |_| {})
    })?
    .map_err(py_err)?;
    Ok((
        written.path,
        written.chunked,
        written.chunks,
        written.data_bytes,
        warnings,
    ))
}

/// Reads the SavedModel of `export_dir` (`saved_model.cpb`, else `.pb`, else `.pbtxt`) and
/// returns its merge steps (of at most `step_limit` bytes, tests make it small) and the name
/// of the file read.
#[pyfunction]
#[pyo3(signature = (export_dir, step_limit = STEP_LIMIT))]
fn _tf_read(
    py: Python<'_>,
    export_dir: PathBuf,
    step_limit: u64,
) -> PyResult<(MergeSteps, PathBuf)> {
    let desc = saved_model_descriptor().map_err(py_err)?;
    let (message, path) = background::run(py, move || {
        read_saved_model(&export_dir).map(|file| (file.message, file.file.path))
    })?
    .map_err(py_err)?;
    let steps = plan(message, &desc, step_limit.max(1))?;
    Ok((MergeSteps { steps }, path))
}

/// The serialization of a SavedModel given by parts, assembled (for tests: it must equal
/// Python's whole deterministic serialization of a message below 2 GiB).
#[pyfunction]
fn _tf_assembled_bytes<'py>(
    py: Python<'py>,
    parts: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let desc = saved_model_descriptor().map_err(py_err)?;
    let model = assemble(parts, &desc)?;
    let bytes = model.to_vec().map_err(py_err)?;
    Ok(PyBytes::new(py, &bytes))
}

/// unbound's schemas as a serialized `FileDescriptorSet` (TensorFlow's wheel has no Python
/// module for the proto splitter's `ChunkedMessage`; `unbound.tensorflow` builds one).
#[pyfunction]
fn _tf_file_descriptor_set(py: Python<'_>) -> Bound<'_, PyBytes> {
    PyBytes::new(py, unbound_proto::FILE_DESCRIPTOR_SET)
}

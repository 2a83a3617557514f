//! The seed's generic Splitter / Merger for Python (`unbound/_splitter.py`): the Rust half.
//!
//! The Python classes hold the messages; this side does the heavy lifting: the default
//! splitting algorithm ([`split_message`]), chunk metadata ([`crate::splitter_sink`]),
//! writing `PREFIX.pb` / `PREFIX.cpb` atomically ([`write_chunks`]) and TensorFlow's merge
//! from memory ([`merge_chunks`]) or from files ([`read_into_bytes`]). Messages cross as
//! serialized bytes; Python `bytes` are shared with Rust, not copied, on the way in.

use std::path::PathBuf;

use bytes::Bytes;
use prost::Message as _;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;
use unbound_chunked::{write_split, Chunk, MemoryChunks, Merger, SplitOutput};
use unbound_proto::tensorflow::proto_splitter::ChunkedMessage;
use unbound_savedmodel::split::DEFAULT_MAX_SIZE;
use unbound_wire::Payload;

use crate::background;
use crate::errors::{py_err, raise, Kind};
use crate::splitter_default::{split_and_write, split_serialized};
use crate::splitter_sink::PyChunkSink;
use crate::splitter_types::message_type;
use crate::toolkit_message::{
    check_size, message_segments, read_message_bytes, to_py_bytes, MessageError,
};
use crate::toolkit_options::{checked_max_size, writer_options, DEFAULT_COMPRESSION};

/// Adds this file's functions and classes to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyChunkSink>()?;
    m.add_function(wrap_pyfunction!(split_message, m)?)?;
    m.add_function(wrap_pyfunction!(split_and_write, m)?)?;
    m.add_function(wrap_pyfunction!(write_chunks, m)?)?;
    m.add_function(wrap_pyfunction!(merge_chunks, m)?)?;
    m.add_function(wrap_pyfunction!(read_into_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(chunk_schema, m)?)?;
    Ok(())
}

/// Python bytes shared with Rust without a copy.
fn shared(data: PyBackedBytes) -> Bytes {
    Bytes::from_owner(data)
}

/// A chunk as Python sees it: its serialized bytes and whether it is a message.
type PyChunk<'py> = (Bound<'py, PyBytes>, bool);

/// The bytes of one chunk (messages serialized).
fn chunk_bytes(chunk: &Chunk) -> Result<(Vec<Bytes>, bool), MessageError> {
    Ok(match chunk {
        Chunk::Message(m) => (message_segments(m, "a chunk")?, true),
        Chunk::SerializedMessage(p) => (vec![p.bytes()?], true),
        Chunk::Bytes(p) => (vec![p.bytes()?], false),
    })
}

/// Splits the serialized message `data` of type `type_name` until every chunk fits
/// `max_size`, with the algorithm `unbound proto split` uses: TensorFlow's for
/// `tensorflow.SavedModel` and `tensorflow.GraphDef`, unbound's generic one for any other type.
/// Returns the chunks (bytes, is-a-message), the serialized `ChunkedMessage`, and warnings.
#[pyfunction]
#[pyo3(signature = (type_name, data, max_size = DEFAULT_MAX_SIZE, schema = None))]
fn split_message<'py>(
    py: Python<'py>,
    type_name: String,
    data: PyBackedBytes,
    max_size: u64,
    schema: Option<Vec<u8>>,
) -> PyResult<(Vec<PyChunk<'py>>, Bound<'py, PyBytes>, Vec<String>)> {
    let max_size = checked_max_size(max_size)?;
    let data = shared(data);
    let work = move || -> Result<_, MessageError> {
        let (split, warnings) = split_serialized(&type_name, &data, max_size, schema.as_deref())?;
        let chunks = split
            .chunks
            .iter()
            .map(chunk_bytes)
            .collect::<Result<Vec<_>, _>>()?;
        Ok((chunks, split.message.encode_to_vec(), warnings))
    };
    let (chunks, message, warnings) = background::run(py, work)?.map_err(py_err)?;
    let chunks = chunks
        .iter()
        .map(|(segments, is_message)| Ok((to_py_bytes(py, segments)?, *is_message)))
        .collect::<PyResult<Vec<_>>>()?;
    Ok((chunks, PyBytes::new(py, &message), warnings))
}

/// Decodes a serialized `ChunkedMessage` and checks that its chunk indices are below
/// `chunk_count`.
fn chunked_message(data: &[u8], chunk_count: usize) -> PyResult<ChunkedMessage> {
    let message = ChunkedMessage::decode(data).map_err(|e| {
        raise(
            Kind::InvalidArgument,
            format!("chunked_message is not a ChunkedMessage: {e}"),
        )
    })?;
    fn check(m: &ChunkedMessage, count: usize) -> PyResult<()> {
        if let Some(i) = m.chunk_index {
            if i >= count as u64 {
                return Err(raise(
                    Kind::InvalidArgument,
                    format!("chunked_message refers to chunk {i}, but there are {count} chunks"),
                ));
            }
        }
        m.chunked_fields
            .iter()
            .filter_map(|f| f.message.as_ref())
            .try_for_each(|child| check(child, count))
    }
    check(&message, chunk_count)?;
    Ok(message)
}

/// Writes a split under `prefix`, atomically: `PREFIX.pb` (chunk 0 as is) when
/// `chunked_message` has no chunked fields, else `PREFIX.cpb`, one record per chunk and the
/// `ChunkMetadata` last, as TensorFlow's `Splitter.write`. Returns the path written.
#[pyfunction]
#[pyo3(signature = (prefix, chunks, chunked_message, compression = DEFAULT_COMPRESSION))]
fn write_chunks(
    py: Python<'_>,
    prefix: PathBuf,
    chunks: Vec<(PyBackedBytes, bool)>,
    chunked_message: &[u8],
    compression: &str,
) -> PyResult<String> {
    let options = writer_options(compression)?;
    let message = self::chunked_message(chunked_message, chunks.len())?;
    let chunks: Vec<Chunk> = chunks
        .into_iter()
        .map(|(data, is_message)| {
            let payload = Payload::Inline(shared(data));
            if is_message {
                Chunk::SerializedMessage(payload)
            } else {
                Chunk::Bytes(payload)
            }
        })
        .collect();
    let work = move || -> Result<PathBuf, unbound_chunked::ChunkedError> {
        if message.chunked_fields.is_empty() {
            let path = unbound_chunked::write::with_suffix(&prefix, "pb");
            let data = match chunks.first() {
                Some(Chunk::SerializedMessage(p) | Chunk::Bytes(p)) => p.bytes()?,
                _ => Bytes::new(),
            };
            unbound_io::write_atomically(&path, |out| {
                std::io::Write::write_all(out, &data).map_err(|e| unbound_io::IoError::os(&path, e))
            })?;
            return Ok(path);
        }
        let split = SplitOutput::new(chunks, message);
        Ok(write_split(&prefix, split, options, &mut |_| {})?.path)
    };
    let path = background::run(py, work)?.map_err(py_err)?;
    Ok(path.display().to_string())
}

/// TensorFlow's `Merger::Merge`: merges in-memory `chunks` (serialized) as `chunked_message`
/// places them into one message of type `type_name`; returns it serialized.
#[pyfunction]
#[pyo3(signature = (type_name, chunks, chunked_message, schema = None))]
fn merge_chunks<'py>(
    py: Python<'py>,
    type_name: String,
    chunks: Vec<PyBackedBytes>,
    chunked_message: &[u8],
    schema: Option<Vec<u8>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let root = self::chunked_message(chunked_message, chunks.len())?;
    let chunks: Vec<Bytes> = chunks.into_iter().map(shared).collect();
    let work = move || -> Result<Vec<Bytes>, MessageError> {
        let desc = message_type(&type_name, schema.as_deref())?;
        let source = MemoryChunks::new("chunks", chunks);
        let merged = Merger::new(&source).merge(&desc, &root)?;
        check_size(&merged, "the merged chunks")?;
        unbound_savedmodel::verify::check_schema(&merged, &desc, "the merged chunks")?;
        message_segments(&merged, "the merged chunks")
    };
    let segments = background::run(py, work)?.map_err(py_err)?;
    to_py_bytes(py, &segments)
}

/// TensorFlow's `Merger::Read` for a type unbound may not know (`schema`): the serialized
/// message under `prefix` and the format read (`"cpb"` or `"pb"`).
#[pyfunction]
#[pyo3(signature = (prefix, type_name, schema = None))]
fn read_into_bytes<'py>(
    py: Python<'py>,
    prefix: PathBuf,
    type_name: String,
    schema: Option<Vec<u8>>,
) -> PyResult<(Bound<'py, PyBytes>, String)> {
    let (segments, format) = background::run(py, move || {
        read_message_bytes(&prefix, &type_name, schema.as_deref())
    })?
    .map_err(py_err)?;
    Ok((to_py_bytes(py, &segments)?, format))
}

/// The schema of `tensorflow.proto_splitter.ChunkedMessage` (its file and dependencies, as a
/// serialized `FileDescriptorSet`), for building the Python class when no module provides it.
#[pyfunction]
fn chunk_schema<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
    let pool = unbound_proto::descriptor_pool();
    let desc = pool
        .get_message_by_name("tensorflow.proto_splitter.ChunkedMessage")
        .ok_or_else(|| {
            raise(
                Kind::Other,
                "unbound: ChunkedMessage is missing from the schemas (a bug)",
            )
        })?;
    let mut files = Vec::new();
    with_dependencies_first(&desc.parent_file(), &mut files);
    let set = prost_reflect::prost_types::FileDescriptorSet { file: files };
    Ok(PyBytes::new(py, &set.encode_to_vec()))
}

/// Appends `file`'s dependencies (each once, their own first), then `file`: the order in which
/// a descriptor pool accepts them.
fn with_dependencies_first(
    file: &prost_reflect::FileDescriptor,
    out: &mut Vec<prost_reflect::prost_types::FileDescriptorProto>,
) {
    if out.iter().any(|f| f.name() == file.name()) {
        return;
    }
    for dependency in file.dependencies() {
        with_dependencies_first(&dependency, out);
    }
    out.push(file.file_descriptor_proto().clone());
}

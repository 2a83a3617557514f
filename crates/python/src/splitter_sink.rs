//! `unbound._unbound.ChunkSink`: the chunk metadata of a Python `unbound.Splitter`.
//!
//! The Python splitter holds the message and its chunks (which may still change after they
//! are added, as TensorFlow's repeated-field splitter fills a chunk after placing it); this
//! class holds where each chunk goes: it turns each `add_chunk` path into field tags by the
//! schema (TensorFlow's `get_field_tag`) at once, so a bad path fails where it is given, and
//! on `finish` gives the `ChunkedMessage` with every chunk index fixed to the chunk's final
//! position (TensorFlow's `_fix_chunks`), via [`unbound_chunked::ChunkSink`].

use std::sync::Mutex;

use bytes::Bytes;
use prost::Message as _;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyInt, PyString};
use unbound_chunked::{Chunk, ChunkSink, ChunkedError, KeyValue, PathElem};
use unbound_wire::WireMessage;

use crate::errors::{py_err, raise, Kind};
use crate::splitter_types::message_type;
use crate::toolkit_message::MessageError;

/// The chunk list and chunked fields of one split, by position and path.
#[pyclass(name = "ChunkSink", module = "unbound._unbound")]
pub struct PyChunkSink {
    /// The sink; `None` once finished.
    sink: Mutex<Option<ChunkSink>>,
}

#[pymethods]
impl PyChunkSink {
    /// A sink for a message of type `type_name` (`schema`: a serialized `FileDescriptorSet`
    /// for types unbound does not know). With `proto_as_initial_chunk`, the message itself is
    /// chunk 0.
    #[new]
    #[pyo3(signature = (type_name, proto_as_initial_chunk = true, schema = None))]
    fn new(type_name: &str, proto_as_initial_chunk: bool, schema: Option<&[u8]>) -> PyResult<Self> {
        let desc = message_type(type_name, schema)
            .map_err(MessageError::from)
            .map_err(py_err)?;
        Ok(Self {
            sink: Mutex::new(Some(ChunkSink::new(desc, proto_as_initial_chunk))),
        })
    }

    /// Places a new chunk at `path` (field names, numbers, indices and map keys from the root
    /// message), appended, or inserted at position `index` of the chunk list. Returns whether
    /// the path ends at a repeated element or a map value: TensorFlow's C++ Merger aborts on a
    /// bytes chunk there (it takes bytes only for singular fields).
    #[pyo3(signature = (path, index = None))]
    fn add_chunk(&self, path: Vec<Bound<'_, PyAny>>, index: Option<usize>) -> PyResult<bool> {
        let path = path.iter().map(path_elem).collect::<PyResult<Vec<_>>>()?;
        let mut guard = self.sink.lock().map_err(|_| poisoned())?;
        let sink = guard.as_mut().ok_or_else(finished)?;
        let placeholder = Chunk::from(Bytes::new());
        let element = ends_at_element(sink.descriptor(), &path);
        sink.add_chunk(placeholder, &path, index)
            .map_err(|e| match e {
                ChunkedError::Schema { .. } => {
                    raise(Kind::InvalidArgument, format!("add_chunk: {e}"))
                }
                other => py_err(other),
            })?;
        Ok(element)
    }

    /// Number of chunks placed so far, the message itself included when it is chunk 0.
    fn __len__(&self) -> PyResult<usize> {
        let guard = self.sink.lock().map_err(|_| poisoned())?;
        Ok(guard.as_ref().map_or(0, |s| s.chunk_count()))
    }

    /// Ends the split: the serialized `ChunkedMessage` placing every chunk by its final
    /// position. The sink takes no more chunks afterwards.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let mut guard = self.sink.lock().map_err(|_| poisoned())?;
        let sink = guard.take().ok_or_else(finished)?;
        let output = sink.finish(WireMessage::default());
        Ok(PyBytes::new(py, &output.message.encode_to_vec()))
    }
}

/// The error for a sink used after `finish`.
fn finished() -> PyErr {
    raise(
        Kind::InvalidArgument,
        "this splitter's chunks were finished already (split() runs once)",
    )
}

/// The error for a sink whose lock a panicking thread held (a bug).
fn poisoned() -> PyErr {
    raise(
        Kind::Other,
        "unbound: a splitter's state was left inconsistent by an earlier failure",
    )
}

/// One element of a field path from Python: a `bool` is a map key; a non-negative `int` a
/// field number, index or unsigned key (by what precedes it); a negative `int` a signed key; a
/// `str` a field name or string key.
fn path_elem(item: &Bound<'_, PyAny>) -> PyResult<PathElem> {
    if item.is_instance_of::<PyBool>() {
        return Ok(PathElem::Key(KeyValue::Bool(item.extract()?)));
    }
    if item.is_instance_of::<PyInt>() {
        if let Ok(n) = item.extract::<u32>() {
            return Ok(PathElem::Number(n));
        }
        if let Ok(n) = item.extract::<u64>() {
            return Ok(PathElem::Index(n));
        }
        if let Ok(n) = item.extract::<i64>() {
            return Ok(PathElem::Key(KeyValue::Signed(n)));
        }
        return Err(raise(
            Kind::InvalidArgument,
            format!("field path element {item} is out of range"),
        ));
    }
    if item.is_instance_of::<PyString>() {
        return Ok(PathElem::Name(item.extract()?));
    }
    Err(raise(
        Kind::InvalidArgument,
        format!(
            "field path elements are str (field names, string keys), int (field numbers, indices, integer keys) or bool (keys), not {}",
            item.get_type().name()?
        ),
    ))
}

/// Whether `path` (valid or not) ends at an element of a repeated or map field: its field
/// tags end with an index or a map key.
fn ends_at_element(desc: &prost_reflect::MessageDescriptor, path: &[PathElem]) -> bool {
    use unbound_proto::tensorflow::proto_splitter::field_index::Kind as TagKind;
    match unbound_chunked::tags::field_tags(desc, path) {
        Ok(tags) => matches!(
            tags.last().and_then(|t| t.kind.as_ref()),
            Some(TagKind::Index(_) | TagKind::MapKey(_))
        ),
        Err(_) => false,
    }
}

//! Bindings for checkpoints (tensor bundles): `CheckpointReader`, the native side of
//! `unbound.Checkpoint`, and `CheckpointWriter` (in `checkpoint_writer.rs`).
//!
//! The reader hands tensors to Python as `(dtype name, shape, kind, payload)`, where kind is
//! `"view"` (a read-only `uint8` array over the mapped data file), `"copy"` (an owned `uint8`
//! array) or `"strings"` (a list of `bytes`); `unbound/_checkpoint.py` turns the payload into
//! an array of the right dtype and shape without copying it again.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use unbound_bundle::BundleReader;

use crate::background;
use crate::errors::py_err;

// This binding's own files (declared here so that `lib.rs` stays as the skeleton left it).
#[path = "checkpoint_read.rs"]
mod checkpoint_read;
#[path = "checkpoint_view.rs"]
mod checkpoint_view;
#[path = "checkpoint_writer.rs"]
mod checkpoint_writer;

use checkpoint_read::{ReadTensor, Values};
use checkpoint_view::{owned_array, readonly_view, MappedBytes};
use checkpoint_writer::CheckpointWriter;

/// Adds this file's functions and classes to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CheckpointReader>()?;
    m.add_class::<MappedBytes>()?;
    m.add_class::<CheckpointWriter>()?;
    Ok(())
}

/// An open checkpoint: the index parsed, data files mapped on first use.
#[pyclass(frozen, module = "unbound._unbound")]
pub struct CheckpointReader {
    /// The bundle, shared with the worker threads that read it.
    reader: Arc<BundleReader>,
}

#[pymethods]
impl CheckpointReader {
    /// Opens the checkpoint at `prefix` (reads `prefix.index`).
    #[new]
    fn new(py: Python<'_>, prefix: PathBuf) -> PyResult<Self> {
        let reader = background::run(py, move || BundleReader::open(&prefix))?.map_err(py_err)?;
        Ok(Self {
            reader: Arc::new(reader),
        })
    }

    /// The checkpoint prefix.
    #[getter]
    fn prefix(&self) -> PathBuf {
        self.reader.prefix().to_path_buf()
    }

    /// The keys of the tensors (partitioned ones once, under their own key), sorted.
    fn keys(&self) -> Vec<String> {
        self.reader
            .tensor_keys()
            .map(unbound_bundle::display_key)
            .collect()
    }

    /// `(dtype name, full shape, stored whole)` of tensor `key`.
    fn describe(&self, key: &str) -> PyResult<(String, Vec<i64>, bool)> {
        checkpoint_read::describe(&self.reader, key.as_bytes()).map_err(py_err)
    }

    /// Reads tensor `key` whole: `(dtype name, shape, kind, payload)` (see the module doc).
    #[pyo3(signature = (key, verify = true))]
    fn read<'py>(&self, py: Python<'py>, key: &str, verify: bool) -> PyResult<Bound<'py, PyTuple>> {
        let reader = self.reader.clone();
        let key = key.as_bytes().to_vec();
        let t = background::run(py, move || {
            checkpoint_read::read_whole(&reader, &key, verify)
        })?
        .map_err(py_err)?;
        to_python(py, t)
    }

    /// Reads box `spec` (TensorFlow's `shape_and_slice` text) of tensor `key`.
    fn read_box<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        spec: &str,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let reader = self.reader.clone();
        let (key, spec) = (key.as_bytes().to_vec(), spec.to_string());
        let t = background::run(py, move || checkpoint_read::read_box(&reader, &key, &spec))?
            .map_err(py_err)?;
        to_python(py, t)
    }
}

/// `(dtype name, shape, kind, payload)` for a tensor read.
fn to_python(py: Python<'_>, t: ReadTensor) -> PyResult<Bound<'_, PyTuple>> {
    let (kind, payload): (&str, Bound<'_, PyAny>) = match t.values {
        Values::Mapped(bytes) => ("view", readonly_view(py, bytes)?.into_any()),
        Values::Owned(bytes) => ("copy", owned_array(py, bytes).into_any()),
        Values::Strings(values) => {
            let items = values.iter().map(|b| PyBytes::new(py, b));
            ("strings", PyList::new(py, items)?.into_any())
        }
    };
    PyTuple::new(
        py,
        [
            t.dtype.into_pyobject(py)?.into_any(),
            PyList::new(py, &t.shape)?.into_any(),
            kind.into_pyobject(py)?.into_any(),
            payload,
        ],
    )
}

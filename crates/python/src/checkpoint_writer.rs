//! `CheckpointWriter`: the native side of `unbound.CheckpointWriter`, a TensorFlow tensor
//! bundle written tensor by tensor ([`unbound_bundle::BundleWriter`]).
//!
//! Values go to a temporary data file as they are written; `close` renames it into place and
//! writes the index last, atomically, so a reader never sees a partial checkpoint. A writer
//! dropped (or interrupted) before `close` leaves no file behind. An interrupt during `close`
//! itself can come after the data file was renamed into place: the index is then not written,
//! so no checkpoint appears, but the data file stays. The prefix is refused when its index or
//! its one data file exists already.

use std::path::PathBuf;
use std::sync::Mutex;

use bytes::Bytes;
use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use unbound_bundle::dtype::{storage, tf_name, Storage};
use unbound_bundle::{data_path, index_path, BundleWriter, Tensor, TensorData};

use crate::background;
use crate::errors::{py_err, raise, Kind};

/// Writes a checkpoint at a prefix.
#[pyclass(frozen, module = "unbound._unbound")]
pub struct CheckpointWriter {
    /// The prefix written.
    prefix: PathBuf,
    /// The writer; `None` once closed, or after an interrupted write abandoned it.
    writer: Mutex<Option<BundleWriter>>,
}

#[pymethods]
impl CheckpointWriter {
    /// Starts a checkpoint at `prefix`; refuses an existing one.
    #[new]
    fn new(py: Python<'_>, prefix: PathBuf) -> PyResult<Self> {
        for existing in [index_path(&prefix), data_path(&prefix, 0, 1)] {
            if existing.exists() {
                return Err(raise(
                    Kind::Exists,
                    format!(
                        "{}: exists already; unbound never overwrites an output",
                        existing.display()
                    ),
                ));
            }
        }
        let at = prefix.clone();
        let writer = background::run(py, move || BundleWriter::create(&at))?.map_err(py_err)?;
        Ok(Self {
            prefix,
            writer: Mutex::new(Some(writer)),
        })
    }

    /// The checkpoint prefix.
    #[getter]
    fn prefix(&self) -> PathBuf {
        self.prefix.clone()
    }

    /// Adds a fixed-size tensor: `data` is its little-endian element bytes, row-major.
    fn write_raw(
        &self,
        py: Python<'_>,
        key: String,
        dtype: &str,
        shape: Vec<i64>,
        data: PyReadonlyArray1<'_, u8>,
    ) -> PyResult<()> {
        let dtype = dtype_value(dtype)?;
        if !matches!(storage(dtype), Storage::Fixed(_)) {
            return Err(raise(
                Kind::InvalidArgument,
                format!("{} is not a fixed-size dtype", tf_name(dtype)),
            ));
        }
        let bytes = Bytes::from(data.as_slice()?.to_vec());
        let tensor = Tensor {
            dtype,
            shape,
            data: TensorData::Raw(bytes),
        };
        self.add(py, key, tensor)
    }

    /// Adds a string tensor: one byte string per element, row-major.
    fn write_strings(
        &self,
        py: Python<'_>,
        key: String,
        shape: Vec<i64>,
        values: Vec<Vec<u8>>,
    ) -> PyResult<()> {
        self.add(py, key, Tensor::strings(shape, values))
    }

    /// Finishes the checkpoint: the data file renamed into place, the index written.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let Some(writer) = self.take()? else {
            return Ok(());
        };
        background::run(py, move || writer.finish())?.map_err(py_err)
    }

    /// Abandons the checkpoint: the temporary data file is removed, nothing is written.
    fn abort(&self) -> PyResult<()> {
        drop(self.take()?);
        Ok(())
    }

    /// Whether `close` or `abort` has run.
    #[getter]
    fn closed(&self) -> bool {
        self.writer.lock().map(|w| w.is_none()).unwrap_or(true)
    }
}

impl CheckpointWriter {
    fn take(&self) -> PyResult<Option<BundleWriter>> {
        let mut guard = self
            .writer
            .lock()
            .map_err(|_| raise(Kind::Other, "the checkpoint writer was poisoned by a panic"))?;
        Ok(guard.take())
    }

    /// Checks and writes `tensor` under `key` on a worker thread, the writer moved there and
    /// back (an interrupt abandons it: the checkpoint is then never written).
    fn add(&self, py: Python<'_>, key: String, tensor: Tensor) -> PyResult<()> {
        tensor
            .check_consistent()
            .map_err(|f| raise(Kind::InvalidArgument, format!("tensor {key}: {}", f.0)))?;
        let Some(mut writer) = self.take()? else {
            return Err(raise(
                Kind::InvalidArgument,
                format!("{}: the checkpoint writer is closed", self.prefix.display()),
            ));
        };
        let (writer, result) = background::run(py, move || {
            let result = writer.add(&key, &tensor);
            (writer, result)
        })?;
        if let Ok(mut guard) = self.writer.lock() {
            *guard = Some(writer);
        }
        result.map_err(py_err)
    }
}

/// The `tensorflow.DataType` value of TensorFlow's Python dtype name.
fn dtype_value(name: &str) -> PyResult<i32> {
    (1..100).find(|&v| tf_name(v) == name).ok_or_else(|| {
        raise(
            Kind::Unsupported,
            format!("no TensorFlow dtype named {name:?}"),
        )
    })
}

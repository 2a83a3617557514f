//! Host arrays across the boundary: `(shape, itemsize, uint8 array)` for fixed-size
//! elements, `(shape, 0, list of bytes)` for strings.

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use unbound_dtensor::{Elements, HostArray};

use crate::errors::py_err;

/// A host array from its Python form (the bytes are copied once).
pub fn from_python(value: &Bound<'_, PyAny>) -> PyResult<HostArray> {
    let (shape, itemsize, payload): (Vec<i64>, usize, Bound<'_, PyAny>) = value.extract()?;
    if itemsize == 0 {
        let strings: Vec<Vec<u8>> = payload.extract()?;
        return HostArray::from_strings(shape, strings).map_err(py_err);
    }
    let bytes: PyReadonlyArray1<'_, u8> = payload.extract()?;
    HostArray::from_bytes(shape, itemsize, bytes.as_slice()?.to_vec()).map_err(py_err)
}

/// The Python form of a host array (no copy of the bytes).
pub fn to_python(py: Python<'_>, array: HostArray) -> PyResult<Bound<'_, PyAny>> {
    let (shape, elements) = array.into_parts();
    let (itemsize, payload): (usize, Bound<'_, PyAny>) = match elements {
        Elements::Fixed { itemsize, bytes } => (
            itemsize,
            PyArray1::from_vec(py, bytes.into_vec()).into_any(),
        ),
        Elements::Strings(values) => {
            let items = values.iter().map(|b| PyBytes::new(py, b));
            (0, PyList::new(py, items)?.into_any())
        }
    };
    Ok(PyTuple::new(
        py,
        [
            PyList::new(py, &shape)?.into_any(),
            itemsize.into_pyobject(py)?.into_any(),
            payload,
        ],
    )?
    .into_any())
}

/// A list of host arrays in their Python form.
pub fn list_to_python(py: Python<'_>, arrays: Vec<HostArray>) -> PyResult<Bound<'_, PyList>> {
    let items = arrays
        .into_iter()
        .map(|a| to_python(py, a))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

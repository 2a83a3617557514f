//! Read-only NumPy arrays over memory-mapped bytes, and owned arrays over vectors, with no
//! copy either way.
//!
//! The extension is built for the stable ABI from Python 3.9, where the buffer protocol is
//! not available to extension classes (it entered the limited API in 3.11). So the mapping is
//! handed to NumPy directly: a one-dimensional `uint8` array borrows the mapped bytes and
//! names a [`MappedBytes`] object, which holds the mapping, as its base. NumPy keeps the base
//! alive as long as any array (or view of one) uses the bytes, and the mapping stays valid as
//! long as its holder lives. The array is made read-only, and cannot be made writeable again
//! (NumPy refuses because its base offers no writeable buffer).

use bytes::Bytes;
use numpy::ndarray::ArrayView1;
use numpy::PyArray1;
use pyo3::prelude::*;

/// Holds mapped (or otherwise immutable) bytes for the NumPy arrays that view them.
#[pyclass(frozen, module = "unbound._unbound")]
pub struct MappedBytes {
    /// The bytes the arrays point into; never changed while this object lives.
    bytes: Bytes,
}

#[pymethods]
impl MappedBytes {
    /// The number of bytes held.
    fn __len__(&self) -> usize {
        self.bytes.len()
    }
}

/// A read-only `uint8` array viewing `bytes` in place (no copy); the array's base owns them.
pub fn readonly_view(py: Python<'_>, bytes: Bytes) -> PyResult<Bound<'_, PyArray1<u8>>> {
    let owner = Bound::new(py, MappedBytes { bytes })?;
    let view = ArrayView1::from(owner.get().bytes.as_ref());
    // SAFETY: the array points into `owner.bytes`, which is immutable (a frozen class around
    // `Bytes`, whose contents never change) and stays alive as long as `owner` does; NumPy
    // holds a reference to `owner` as the array's base for the array's whole life, and the
    // array is made read-only below before anyone else sees it.
    let array = unsafe { PyArray1::borrow_from_array(&view, owner.clone().into_any()) };
    array.getattr("flags")?.setattr("writeable", false)?;
    Ok(array)
}

/// An owned `uint8` array taking over `bytes` (no copy).
pub fn owned_array(py: Python<'_>, bytes: Vec<u8>) -> Bound<'_, PyArray1<u8>> {
    PyArray1::from_vec(py, bytes)
}

//! Bindings: see the crate documentation.

use pyo3::prelude::*;

/// Adds this file's functions and classes to the extension module.
pub fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}

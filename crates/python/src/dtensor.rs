//! Bindings for DTensor: meshes and layouts in TensorFlow's string forms, splitting arrays
//! into per-device components and joining them (`unbound.pack` / `unbound.unpack`),
//! relayouts, and resharding checkpoints (`unbound.reshard`).
//!
//! The functions are stateless and speak strings: a mesh or layout crosses the boundary as
//! TensorFlow's text, which `unbound/_dtensor.py` keeps in its `Mesh` and `Layout` classes.
//! Arrays cross as `(shape, itemsize, uint8 array)` for fixed-size elements, or
//! `(shape, 0, list of bytes)` for strings.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use unbound_dtensor::{Chunking, Layout, LayoutType, Mesh, Sharding};

use crate::background;
use crate::errors::py_err;

#[path = "dtensor_arrays.rs"]
mod dtensor_arrays;
#[path = "dtensor_reshard.rs"]
mod dtensor_reshard;

/// Adds this file's functions and classes to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(mesh_info, m)?)?;
    m.add_function(wrap_pyfunction!(layout_info, m)?)?;
    m.add_function(wrap_pyfunction!(layout_new, m)?)?;
    m.add_function(wrap_pyfunction!(dtensor_split, m)?)?;
    m.add_function(wrap_pyfunction!(dtensor_join, m)?)?;
    m.add_function(wrap_pyfunction!(dtensor_relayout, m)?)?;
    m.add_function(wrap_pyfunction!(dtensor_reshard::reshard, m)?)?;
    Ok(())
}

/// A mesh from TensorFlow's mesh string, its short form `|x=2,y=4|*CPU`, or only the
/// dimensions `x=2,y=4` (CPU devices 0 to n-1), as `unbound reshard --mesh` reads it.
fn parse_mesh(text: &str) -> PyResult<Mesh> {
    unbound_reshard::parse_mesh(text).map_err(py_err)
}

/// The parts of a mesh: its TensorFlow string, dimension names and sizes, device ids and
/// local devices, device type.
#[pyfunction]
fn mesh_info<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyDict>> {
    let mesh = parse_mesh(text)?;
    let d = PyDict::new(py);
    d.set_item("string", mesh.to_string())?;
    d.set_item("name", mesh.name())?;
    d.set_item("dim_names", mesh.dim_names())?;
    d.set_item("shape", mesh.shape())?;
    d.set_item("global_device_ids", mesh.global_device_ids())?;
    d.set_item("local_device_ids", mesh.local_device_ids())?;
    d.set_item("local_devices", mesh.local_devices())?;
    d.set_item("device_type", mesh.device_type())?;
    d.set_item("num_devices", mesh.num_devices())?;
    Ok(d)
}

/// The parts of a layout (TensorFlow's layout string): its string, specs, mesh string.
#[pyfunction]
fn layout_info<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyDict>> {
    let layout = Layout::parse(text).map_err(py_err)?;
    let d = PyDict::new(py);
    d.set_item("string", layout.to_string())?;
    d.set_item("specs", layout.specs())?;
    d.set_item("mesh", layout.mesh().to_string())?;
    Ok(d)
}

/// The string of the static layout with `specs` on the mesh `mesh` (any form
/// [`parse_mesh`] reads).
#[pyfunction]
fn layout_new(specs: Vec<String>, mesh: &str) -> PyResult<String> {
    let mesh = parse_mesh(mesh)?;
    Ok(Layout::new(LayoutType::Static, specs, mesh)
        .map_err(py_err)?
        .to_string())
}

/// The (even, as DTensor shards) sharding of a layout string.
fn sharding(layout: &str) -> PyResult<Sharding> {
    let layout = Layout::parse(layout).map_err(py_err)?;
    Sharding::from_layout(&layout, Chunking::Even).map_err(py_err)
}

/// Splits a global array into the components of the local devices of `layout`'s mesh.
#[pyfunction]
fn dtensor_split<'py>(
    py: Python<'py>,
    layout: &str,
    array: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    let sharding = sharding(layout)?;
    let global = dtensor_arrays::from_python(array)?;
    sharding.check_shape(global.shape()).map_err(py_err)?;
    let parts = background::run(py, move || unbound_dtensor::unpack(&global, &sharding))?
        .map_err(py_err)?;
    dtensor_arrays::list_to_python(py, parts)
}

/// Joins components (local-device order) of `layout` into the global array.
#[pyfunction]
fn dtensor_join<'py>(
    py: Python<'py>,
    layout: &str,
    components: Vec<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let sharding = sharding(layout)?;
    let parts = components
        .iter()
        .map(dtensor_arrays::from_python)
        .collect::<PyResult<Vec<_>>>()?;
    let global = background::run(py, move || {
        let shape = unbound_dtensor::global_shape_of(&parts, &sharding)?;
        unbound_dtensor::pack(&parts, &sharding, &shape)
    })?
    .map_err(py_err)?;
    dtensor_arrays::to_python(py, global)
}

/// Moves components of layout `src` to components of layout `dst` on the same mesh.
#[pyfunction]
fn dtensor_relayout<'py>(
    py: Python<'py>,
    components: Vec<Bound<'py, PyAny>>,
    src: &str,
    dst: &str,
) -> PyResult<Bound<'py, PyList>> {
    let (from, to) = (sharding(src)?, sharding(dst)?);
    let parts = components
        .iter()
        .map(dtensor_arrays::from_python)
        .collect::<PyResult<Vec<_>>>()?;
    let moved = background::run(py, move || {
        let shape = unbound_dtensor::global_shape_of(&parts, &from)?;
        unbound_dtensor::relayout(&parts, &from, &to, &shape)
    })?
    .map_err(py_err)?;
    dtensor_arrays::list_to_python(py, moved)
}

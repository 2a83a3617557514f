//! `unbound.plan`: DTensor's layout propagation and collectives for a SavedModel signature,
//! as `unbound plan --json` reports them.

use std::collections::HashMap;
use std::path::PathBuf;

use pyo3::prelude::*;
use unbound_plan::{plan as run, PlanOptions};

use crate::background;
use crate::errors::{py_err, raise, Kind};

/// Registers the function.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    Ok(())
}

/// Plans signature `signature` of the SavedModel in `dir` on `mesh`, the inputs (by name) and
/// variables (by object path or regular expression; by name in TF1 models) laid out as given
/// (-> specs text); returns the report `unbound plan --json` prints, as JSON text.
#[pyfunction]
#[pyo3(signature = (dir, mesh, inputs, variables, shapes, signature = None, tags = None))]
#[allow(clippy::too_many_arguments)]
pub fn plan(
    py: Python<'_>,
    dir: PathBuf,
    mesh: String,
    inputs: Vec<(String, String)>,
    variables: Vec<(String, String)>,
    shapes: HashMap<String, Vec<i64>>,
    signature: Option<String>,
    tags: Option<String>,
) -> PyResult<String> {
    let options = PlanOptions {
        mesh,
        inputs,
        variables,
        signature,
        tags,
        shapes: shapes.into_iter().collect(),
    };
    background::run(py, move || -> PyResult<String> {
        let report = run(&dir, &options).map_err(py_err)?;
        serde_json::to_string(&report)
            .map_err(|e| raise(Kind::Other, format!("cannot render the report: {e}")))
    })?
}

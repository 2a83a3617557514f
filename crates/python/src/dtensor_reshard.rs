//! `unbound.reshard`: a checkpoint rewritten for other layouts on another mesh, as
//! `unbound reshard` does (TensorFlow checkpoints in and out).

use std::path::{Path, PathBuf};

use pyo3::prelude::*;
use unbound_bundle::Variables;
use unbound_reshard::{parse_mesh, parse_specs, plan, run, LayoutRule, ReshardOptions};

use crate::background;
use crate::errors::{py_err, raise, Kind};

/// Reshards checkpoint `src` into `dst` on `mesh` (`--mesh`), with `layouts` rules
/// (`KEY_OR_REGEX=SPECS`, `--layout`), `default` specs (`--default`) and `jobs` workers;
/// returns the report (or, with `dry_run`, the plan) as JSON text.
#[pyfunction]
#[pyo3(signature = (src, dst, mesh, layouts, default = None, jobs = 2, dry_run = false))]
#[allow(clippy::too_many_arguments)]
pub fn reshard(
    py: Python<'_>,
    src: PathBuf,
    dst: PathBuf,
    mesh: &str,
    layouts: Vec<String>,
    default: Option<String>,
    jobs: usize,
    dry_run: bool,
) -> PyResult<String> {
    non_empty(&src, "source prefix")?;
    non_empty(&dst, "output prefix")?;
    let options = ReshardOptions {
        mesh: parse_mesh(mesh).map_err(py_err)?,
        rules: layouts
            .iter()
            .map(|r| LayoutRule::parse(r))
            .collect::<Result<_, _>>()
            .map_err(py_err)?,
        default: default.as_deref().map(parse_specs),
        jobs: jobs.max(1),
    };
    let json = background::run(py, move || -> PyResult<String> {
        let vars = Variables::open(&src).map_err(py_err)?;
        let p = plan(&vars, &options).map_err(py_err)?;
        let value = if dry_run {
            let mut json = serde_json::to_value(&p).map_err(json_err)?;
            if let Some(o) = json.as_object_mut() {
                o.insert("bytes".into(), p.bytes().into());
                o.insert("read".into(), p.read().into());
                o.insert("read_amplification".into(), p.read_amplification().into());
            }
            json
        } else {
            let report = run(&vars, &p, &dst, &options, &|_| {}).map_err(py_err)?;
            serde_json::to_value(&report).map_err(json_err)?
        };
        serde_json::to_string(&value).map_err(json_err)
    })??;
    Ok(json)
}

fn json_err(e: serde_json::Error) -> PyErr {
    raise(Kind::Other, format!("cannot render the report: {e}"))
}

/// Refuses an empty path argument (a common slip when building prefixes).
fn non_empty(path: &Path, what: &str) -> PyResult<()> {
    if path.as_os_str().is_empty() {
        return Err(raise(
            Kind::InvalidArgument,
            format!("{what}: an empty path"),
        ));
    }
    Ok(())
}

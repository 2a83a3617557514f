//! `unbound.convert`: whole tensors between a TensorFlow checkpoint and Hugging Face's
//! sharded safetensors layout, as `unbound convert` does.

use std::path::PathBuf;

use pyo3::prelude::*;
use unbound_convert::{convert as run, parse_size, ConvertOptions, Names, Target};

use crate::background;
use crate::errors::{py_err, raise, Kind};

/// Registers the function.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(convert, m)?)?;
    Ok(())
}

/// Converts `src` to `dst` (`to`: `"safetensors"`, `"tf"` or `None` for the other format
/// than the source's); returns the report `unbound convert --json` prints, as JSON text.
#[pyfunction]
#[pyo3(signature = (src, dst, to = None, max_shard_size = "5GB", names = "paths", jobs = 2, dry_run = false))]
#[allow(clippy::too_many_arguments)]
pub fn convert(
    py: Python<'_>,
    src: PathBuf,
    dst: PathBuf,
    to: Option<&str>,
    max_shard_size: &str,
    names: &str,
    jobs: usize,
    dry_run: bool,
) -> PyResult<String> {
    let to = match to {
        None => None,
        Some("safetensors") => Some(Target::Safetensors),
        Some("tf") => Some(Target::Tf),
        Some(other) => {
            return Err(raise(
                Kind::InvalidArgument,
                format!("to={other:?}: expected \"safetensors\" or \"tf\""),
            ))
        }
    };
    let options = ConvertOptions {
        to,
        max_shard_size: parse_size(max_shard_size).map_err(py_err)?,
        names: Names::parse(names).map_err(py_err)?,
        jobs: jobs.max(1),
        dry_run,
    };
    background::run(py, move || -> PyResult<String> {
        let report = run(&src, &dst, &options, &|_| {}).map_err(py_err)?;
        serde_json::to_string(&report)
            .map_err(|e| raise(Kind::Other, format!("cannot render the report: {e}")))
    })?
}

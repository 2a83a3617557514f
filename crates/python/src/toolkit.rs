//! The toolkit (`unbound.split`, `merge`, `externalize`, `show`, `inspect`, `verify`,
//! `fingerprint`, `read_message`): the same library calls the CLI makes, each returning the report the CLI
//! renders, as its JSON text (the Python side, `unbound._reports`, turns it into objects).
//!
//! Reports with a serde form are serialized as the CLI's `--json` prints them; `split` and
//! `merge`, which the CLI reports only in text, get a JSON object of the same numbers
//! ([`split_json`], [`merge_json`]). Every call runs through [`background::run`].

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use serde_json::json;
use unbound_savedmodel::split::DEFAULT_MAX_SIZE;
use unbound_savedmodel::write::{self, MergeReport, SplitReport, WriteOptions};

use crate::background;
use crate::errors::{py_err, raise, Kind};
use crate::toolkit_message::read_message_bytes;
use crate::toolkit_options::{checked_max_size, writer_options, DEFAULT_COMPRESSION};

/// Adds this file's functions to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("DEFAULT_MAX_SIZE", DEFAULT_MAX_SIZE)?;
    m.add_function(wrap_pyfunction!(split, m)?)?;
    m.add_function(wrap_pyfunction!(merge, m)?)?;
    m.add_function(wrap_pyfunction!(show, m)?)?;
    m.add_function(wrap_pyfunction!(inspect, m)?)?;
    m.add_function(wrap_pyfunction!(verify, m)?)?;
    m.add_function(wrap_pyfunction!(fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(read_message, m)?)?;
    m.add(
        "DEFAULT_EXTERNALIZE_MIN_SIZE",
        unbound_externalize::DEFAULT_MIN_SIZE,
    )?;
    m.add_function(wrap_pyfunction!(externalize, m)?)?;
    Ok(())
}

/// Serializes a report as JSON (a bug, not bad input, if it fails).
fn to_json<T: serde::Serialize>(report: &T) -> PyResult<String> {
    serde_json::to_string(report).map_err(|e| {
        raise(
            Kind::Other,
            format!("unbound: cannot render a report as JSON: {e}"),
        )
    })
}

/// `split`'s report: the file written, its chunks and sizes, files carried over, warnings.
fn split_json(report: &SplitReport) -> serde_json::Value {
    json!({
        "path": report.written.path.display().to_string(),
        "chunked": report.written.chunked,
        "chunks": report.written.chunks,
        "data_bytes": report.written.data_bytes,
        "model_bytes": report.model_bytes,
        "copied_files": report.copied_files,
        "warnings": report.warnings,
    })
}

/// `merge`'s report: the file written, its size, files carried over.
fn merge_json(out: &std::path::Path, report: &MergeReport) -> serde_json::Value {
    json!({
        "path": out.join("saved_model.pb").display().to_string(),
        "model_bytes": report.model_bytes,
        "copied_files": report.copied_files,
    })
}

/// `unbound split SRC OUT`: writes `out` as an image-format SavedModel; returns the report
/// as JSON.
#[pyfunction]
#[pyo3(signature = (src_dir, out_dir, max_size = DEFAULT_MAX_SIZE, compression = DEFAULT_COMPRESSION))]
fn split(
    py: Python<'_>,
    src_dir: PathBuf,
    out_dir: PathBuf,
    max_size: u64,
    compression: &str,
) -> PyResult<String> {
    let max_size = checked_max_size(max_size)?;
    let options = writer_options(compression)?;
    let report = background::run(py, move || {
        write::split_dir(
            &src_dir,
            &out_dir,
            &WriteOptions::default()
                .with_max_size(max_size)
                .with_writer(options),
            &|_| {},
        )
    })?
    .map_err(py_err)?;
    to_json(&split_json(&report))
}

/// `unbound merge SRC OUT`: writes `out` with one `saved_model.pb`; returns the report as JSON.
#[pyfunction]
fn merge(py: Python<'_>, src_dir: PathBuf, out_dir: PathBuf) -> PyResult<String> {
    let out = out_dir.clone();
    let report = background::run(py, move || {
        write::merge_dir(&src_dir, &out_dir, &mut |_, _| {})
    })?
    .map_err(py_err)?;
    to_json(&merge_json(&out, &report))
}

/// `unbound externalize SRC OUT --json`: constants of at least `min_size` bytes moved into
/// variables (with `dry_run`, only reported); with `inline`, the reverse (`--inline`).
/// Returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (src_dir, out_dir, min_size = unbound_externalize::DEFAULT_MIN_SIZE, dry_run = false, inline = false))]
fn externalize(
    py: Python<'_>,
    src_dir: PathBuf,
    out_dir: PathBuf,
    min_size: u64,
    dry_run: bool,
    inline: bool,
) -> PyResult<String> {
    if inline {
        let report = background::run(py, move || {
            unbound_externalize::inline(&src_dir, &out_dir, dry_run)
        })?
        .map_err(py_err)?;
        return to_json(&report);
    }
    let options = unbound_externalize::ExternalizeOptions { min_size, dry_run };
    let report = background::run(py, move || {
        unbound_externalize::externalize(&src_dir, &out_dir, &options)
    })?
    .map_err(py_err)?;
    to_json(&report)
}

/// `unbound show DIR --json`.
#[pyfunction]
fn show(py: Python<'_>, dir: PathBuf) -> PyResult<String> {
    let info =
        background::run(py, move || unbound_savedmodel::show::show(&dir))?.map_err(py_err)?;
    to_json(&info)
}

/// `unbound inspect FILE --json` (a report with faults is returned, not raised): field paths
/// named from `tensorflow.SavedModel` for a `saved_model.cpb`, as the command names them.
#[pyfunction]
fn inspect(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    let saved_model = path.file_name().and_then(|n| n.to_str()) == Some("saved_model.cpb");
    let root = if saved_model {
        Some(unbound_savedmodel::dir::saved_model_descriptor().map_err(py_err)?)
    } else {
        None
    };
    let report = background::run(py, move || {
        unbound_chunked::inspect::inspect_as(&path, root.as_ref())
    })?
    .map_err(py_err)?;
    to_json(&report)
}

/// `unbound verify DIR`: the faults found and what was checked, as JSON.
#[pyfunction]
fn verify(py: Python<'_>, dir: PathBuf) -> PyResult<String> {
    let report = background::run(py, move || unbound_savedmodel::verify::verify_dir(&dir))?;
    to_json(&report)
}

/// `unbound fingerprint DIR --json`: the `FingerprintDef` fields, plus the model file read.
#[pyfunction]
fn fingerprint(py: Python<'_>, dir: PathBuf) -> PyResult<(String, String)> {
    let (report, index_fault) = background::run(py, move || {
        let report = unbound_savedmodel::fingerprint::fingerprint_report(&dir)?;
        let fault = unbound_savedmodel::fingerprint::checkpoint_index_fault(&dir);
        Ok::<_, unbound_savedmodel::SavedModelError>((report, fault))
    })?
    .map_err(py_err)?;
    if let Some(fault) = index_fault {
        // As the CLI and TensorFlow: checkpoint_hash 0, and a warning naming the index.
        let message = std::ffi::CString::new(format!(
            "{fault}: the checkpoint index cannot be read, so checkpoint_hash is 0 (TensorFlow \
             also gives 0, warning \"Failed to read checkpoint file\")"
        ))
        .unwrap_or_default();
        let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
        PyErr::warn(py, category.as_any(), &message, 1)?;
    }
    Ok((
        to_json(&report.fingerprint)?,
        report.model_file.display().to_string(),
    ))
}

/// TensorFlow's `Merger::Read(prefix)` for a message of type `type_name`: the serialized
/// message and the format read (`"cpb"` or `"pb"`).
#[pyfunction]
fn read_message<'py>(
    py: Python<'py>,
    prefix: PathBuf,
    type_name: String,
) -> PyResult<(Bound<'py, PyBytes>, String)> {
    let (segments, format) =
        background::run(py, move || read_message_bytes(&prefix, &type_name, None))?
            .map_err(py_err)?;
    Ok((crate::toolkit_message::to_py_bytes(py, &segments)?, format))
}

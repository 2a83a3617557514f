//! `unbound-python`: the extension module behind the `unbound` Python package.
//!
//! The Python package (`crates/python/python/unbound`) is a thin, typed layer over this
//! module, `unbound._unbound`. Each file here binds one concern of the Rust crates below and
//! registers its functions and classes into the module:
//!
//! - [`toolkit`]: `split`, `merge`, `show`, `inspect`, `verify`, `fingerprint`,
//!   `read_message`, the same typed reports the CLI prints, as JSON-ready dictionaries;
//! - [`splitter`]: the seed's generic `Splitter` / `Merger` API for any message type;
//! - [`checkpoint`]: tensor bundles as NumPy arrays (zero-copy where the bytes allow) and a
//!   bundle writer;
//! - [`dtensor`]: meshes, layouts, pack / unpack / relayout on arrays, resharding;
//! - [`tensorflow`]: the SavedModel image format by parts, for `unbound.tensorflow`
//!   (messages past 2 GiB are never serialized whole on either side).
//!
//! Two rules hold for every binding: long work runs with the GIL released and honours Ctrl-C
//! ([`background::run`]: the temporary output is removed and `KeyboardInterrupt` raised), and
//! every Rust error becomes one of the package's exceptions ([`errors`]), named after the
//! fault, with the message the CLI would print.

// The extension module has no Rust users: its documentation is for maintainers, and links to
// its private binding modules on purpose.
#![allow(rustdoc::private_intra_doc_links)]

mod background;
mod checkpoint;
mod convert;
mod dtensor;
mod errors;
mod plan;
mod splitter;
mod splitter_default;
mod splitter_sink;
mod splitter_types;
mod tensorflow;
mod toolkit;
mod toolkit_message;
mod toolkit_options;

use pyo3::prelude::*;

/// The `unbound._unbound` extension module.
#[pymodule]
fn _unbound(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    toolkit::register(m)?;
    splitter::register(m)?;
    checkpoint::register(m)?;
    convert::register(m)?;
    dtensor::register(m)?;
    plan::register(m)?;
    tensorflow::register(m)?;
    Ok(())
}

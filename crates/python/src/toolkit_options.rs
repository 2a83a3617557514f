//! Options shared by the toolkit's and the Splitter's writing calls: record compression by
//! name, and the checks on a maximum chunk size.
//!
//! The names and levels are those of the CLI's `--compression` (`brotli` level 6 as
//! TensorFlow writes, `zstd` level 3, the default, `snappy`, `none`); chunks that do not shrink
//! by a tenth are stored uncompressed whatever the choice, as the CLI does.

use pyo3::prelude::*;
use unbound_records::{Compression, WriterOptions};

use crate::errors::{raise, Kind};

/// The compression the CLI uses by default (`--compression zstd`).
pub const DEFAULT_COMPRESSION: &str = "zstd";

/// Writer options for the compression named `name`, or `InvalidArgumentError`.
pub fn writer_options(name: &str) -> PyResult<WriterOptions> {
    let compression = match name {
        "brotli" => Compression::Brotli { level: 6 },
        "zstd" => Compression::Zstd { level: 3 },
        "snappy" => Compression::Snappy,
        "none" => Compression::None,
        other => {
            return Err(raise(
                Kind::InvalidArgument,
                format!("unknown compression {other:?}: expected brotli, zstd, snappy or none"),
            ))
        }
    };
    Ok(WriterOptions {
        compression,
        store_incompressible: true,
        ..WriterOptions::default()
    })
}

/// `max_size` if it is at least 1 (as the CLI's `--max-size` requires), else
/// `InvalidArgumentError`.
pub fn checked_max_size(max_size: u64) -> PyResult<u64> {
    if max_size == 0 {
        return Err(raise(
            Kind::InvalidArgument,
            "max_size must be at least 1 byte",
        ));
    }
    Ok(max_size)
}

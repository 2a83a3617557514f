//! The `--compression` option shared by the splitting commands.

use clap::ValueEnum;
use unbound_records::{Compression, WriterOptions};

/// Compression of the records in a written `.cpb`.
///
/// The default, `zstd`, is read by TensorFlow's own Merger (checked in the interop suite) and is
/// many times faster than brotli; chunks that do not shrink by at least a tenth (typically
/// float tensor bytes) are stored uncompressed whatever the choice, so incompressible data never
/// pays for compression. `brotli` (level 6) is what TensorFlow itself writes.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum CompressionArg {
    /// Brotli level 6, as TensorFlow writes.
    Brotli,
    /// Zstandard level 3.
    Zstd,
    /// Snappy.
    Snappy,
    /// No compression.
    None,
}

impl CompressionArg {
    /// Writer options for this choice.
    pub fn writer_options(self) -> WriterOptions {
        let compression = match self {
            CompressionArg::Brotli => Compression::Brotli { level: 6 },
            CompressionArg::Zstd => Compression::Zstd { level: 3 },
            CompressionArg::Snappy => Compression::Snappy,
            CompressionArg::None => Compression::None,
        };
        WriterOptions {
            compression,
            store_incompressible: true,
            ..WriterOptions::default()
        }
    }
}

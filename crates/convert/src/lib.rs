//! `unbound-convert`: whole tensors between a TensorFlow checkpoint and Hugging Face's
//! sharded safetensors layout, both ways, without TensorFlow.
//!
//! To safetensors ([`to_safetensors`]): every tensor of a checkpoint (a prefix, or a
//! SavedModel directory's variables; plain, partitioned or DTensor-sharded: sliced variables
//! are assembled whole) in `model-0000i-of-0000N.safetensors` files filled up to a largest
//! size (a tensor larger than that alone in its file), with `model.safetensors.index.json`
//! (`metadata.total_size`, `weight_map`), or one `model.safetensors` when one file holds
//! everything. Names are object paths (`dense/kernel`) or checkpoint keys ([`Names`]); each
//! header's `__metadata__` carries `"format": "tf"`, the checkpoint key of each of its
//! tensors and the checkpoint's object graph, so that the way back restores into objects.
//! Dtypes safetensors has are kept bit for bit; strings and complex numbers are refused,
//! naming every such key, before anything is written.
//!
//! To a checkpoint ([`to_tf`]): a directory with an index, one file, a directory of plain
//! `.safetensors` files, or PyTorch Distributed Checkpoint's Hugging Face writer output,
//! whose pieces are assembled into whole tensors.
//!
//! ```no_run
//! use std::path::Path;
//! use unbound_convert::{convert, ConvertOptions};
//!
//! let report = convert(Path::new("ckpt/model-1"), Path::new("hf"), &ConvertOptions::default(), &|_| {})?;
//! println!("{} tensors, {} bytes in {} files", report.tensors.len(), report.bytes, report.files.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Invariants: memory stays at one block ([`layout::BLOCK`], 8 MiB) per worker whatever the
//! model's size (data moves by positional reads, never through a map of the data); every
//! byte read is covered by a checksum (the checkpoint's CRC32Cs going out; coming in, the
//! CRC32C of the bytes as read, checked against the data shards read back); output is
//! atomic (a directory renamed into place; a checkpoint's index written last, after its
//! data shards are read back).

#![forbid(unsafe_code)]

mod error;
mod from_safetensors;
pub mod layout;
mod options;
mod report;
mod to_safetensors;

use std::path::Path;

pub use error::{ConvertError, Result};
pub use from_safetensors::to_tf;
pub use options::{parse_size, ConvertOptions, Names, Target, DEFAULT_MAX_SHARD_SIZE};
pub use report::{ConvertReport, FileReport, TensorReport};
pub use to_safetensors::{source_prefix, to_safetensors};

/// The format a conversion of `src` writes when none is asked: a checkpoint (a prefix with
/// an index, or a SavedModel directory with variables) goes to safetensors, anything else
/// (a `.safetensors` file, a directory of them) to a checkpoint.
pub fn default_target(src: &Path) -> Target {
    if unbound_bundle::index_path(&source_prefix(src)).is_file() {
        Target::Safetensors
    } else {
        Target::Tf
    }
}

/// Converts `src` to `dst` in the format `options.to` (else [`default_target`]), calling
/// `progress` with the bytes of each block written.
pub fn convert(
    src: &Path,
    dst: &Path,
    options: &ConvertOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<ConvertReport> {
    match options.to.unwrap_or_else(|| default_target(src)) {
        Target::Safetensors => to_safetensors(src, dst, options, progress),
        Target::Tf => to_tf(src, dst, options, progress),
    }
}

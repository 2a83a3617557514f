//! `unbound-bundle`: tensor bundles, the `variables/` of a SavedModel and TensorFlow's V2
//! checkpoints (`tensorflow/core/util/tensor_bundle/`), and NumPy `.npy` output of their tensors.
//!
//! A bundle at prefix `P` is `P.index`, a sorted string table mapping each tensor key to a
//! `BundleEntryProto` (dtype, shape, shard, offset, size, masked CRC32C, slices; the key `""`
//! holds the `BundleHeaderProto`), plus data shards `P.data-00000-of-0000N` holding the
//! tensors' bytes.
//!
//! - [`BundleReader`] parses the index on open and maps data shards on first use; it reads
//!   one tensor without touching the others, verifies every checksum it reads, checks sizes
//!   and offsets against the files first, and reports damage as [`BundleError`]s naming the
//!   file and the key. [`BundleReader::verify`] checks everything and lists [`BundleFault`]s.
//! - [`BundleWriter`] writes every dtype (numeric, bool, half, bfloat16, complex, strings,
//!   variants as serialized protos), partitioned tensors as slices, and several shards; the
//!   index it writes is byte-for-byte what TensorFlow writes for the same entries.
//! - [`variables`] lists a bundle's tensors (key, object path, dtype, shape, size) as a
//!   serializable [`VarsReport`].
//! - [`npy`] writes one tensor as a NumPy `.npy` file, streamed and CRC-checked.
//! - [`BoxReader`] reads any box of a variable (TensorFlow's `shape_and_slice`,
//!   [`ShapeAndSlice`]) from whatever slices it is stored in, with bounded memory.
//!
//! The bundle needs nothing of SavedModels: DTensor checkpoints and any V2 checkpoint prefix
//! are read and written with this crate alone. [`dtype`] is the workspace's one table of
//! TensorFlow dtype names and storage sizes.
//!
//! ```no_run
//! use std::path::Path;
//! use unbound_bundle::{BundleReader, TensorData};
//!
//! let reader = BundleReader::open(Path::new("model/variables/variables"))?;
//! for key in reader.tensor_keys() {
//!     let t = reader.read(key)?;
//!     if let TensorData::Raw(bytes) = &t.data {
//!         println!("{}: {:?} {} bytes", String::from_utf8_lossy(key), t.shape, bytes.len());
//!     }
//! }
//! # Ok::<(), unbound_bundle::BundleError>(())
//! ```

#![forbid(unsafe_code)]

pub mod boxes;
mod coding;
pub mod crc;
mod data_files;
pub mod dtype;
mod error;
pub mod naming;
pub mod npy;
pub mod npy_header;
mod object_graph;
pub mod ordered_code;
mod partitioned;
mod raw;
mod reader;
pub mod shard_writer;
pub mod slices;
pub mod sstable;
pub mod strings;
mod tensor;
pub mod variables;
mod verify;
mod writer;

pub use boxes::{BoxReader, StoredPiece, StoredVariable};
pub use error::{BundleError, Fault, Result};
pub use naming::{data_path, index_path, saved_model_prefix};
pub use object_graph::object_paths;
pub use ordered_code::{decode_tensor_name_slice, encode_tensor_name_slice, is_slice_key};
pub use raw::CHUNK_SIZE;
pub use reader::BundleReader;
pub use shard_writer::{prepare_shards, write_index, EntrySink, FinishedShard, ShardWriter};
pub use slices::{ShapeAndSlice, SliceSpec};
pub use strings::encode_strings;
pub use tensor::{num_elements, shape_from_proto, shape_to_proto, Tensor, TensorData};
pub use variables::{infer_grid, NpyReport, StoredSlice, VariableEntry, Variables, VarsReport};
pub use verify::{verify_prefix, BundleFault};
pub use writer::BundleWriter;

/// The key of the serialized `TrackableObjectGraph` in object-based checkpoints.
pub const OBJECT_GRAPH_KEY: &str = "_CHECKPOINTABLE_OBJECT_GRAPH";

/// A printable form of a key: the key itself when it is UTF-8, a slice key as
/// `NAME[SLICE]` (e.g. `w[0,2:-]`), anything else with its bytes escaped.
pub fn display_key(key: &[u8]) -> String {
    if is_slice_key(key) {
        if let Some((name, slice)) = decode_tensor_name_slice(key) {
            return format!("{}[{slice}]", String::from_utf8_lossy(&name));
        }
    }
    match std::str::from_utf8(key) {
        Ok(s) => s.to_string(),
        Err(_) => key.escape_ascii().to_string(),
    }
}

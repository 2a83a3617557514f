//! Helpers shared by the tests and examples of the unbound workspace, in one place instead of
//! being borrowed across crates with `#[path]` or copied. Not published; use it as a
//! dev-dependency only.
//!
//! # Modules
//!
//! - [`data`]: deterministic pseudo-random bytes and float32 weights.
//! - [`highway`]: HighwayHash-64 with the Riegeli key (an implementation independent of the
//!   library's) and hand-made Riegeli chunk headers whose hashes are valid.
//! - [`chunks`]: chunked (`.cpb`) file builders: field tags, chunked fields, and `.cpb` or
//!   plain Riegeli files written one record per chunk.
//! - [`models`]: SavedModels built around already-serialized nodes (multi-gigabyte models held
//!   once), the FNV-1a checksum and the summary JSON of `interop/merger_harness.cc`.
//! - [`testdata`]: paths of the repository's `testdata/` and directory copies.
//! - [`cc`]: compiling C sources into shared objects with the system C compiler.
//!
//! Helpers panic on failure (they are for tests) unless they return a `Result`.

#![forbid(unsafe_code)]

pub mod cc;
pub mod chunks;
pub mod data;
pub mod highway;
pub mod models;
pub mod streamed_cpb;
pub mod testdata;

use prost_reflect::MessageDescriptor;

/// The message `name` (a full name, `"tensorflow.GraphDef"`) of unbound-proto's descriptor
/// pool. Panics when the pool has no such message.
pub fn descriptor(name: &str) -> MessageDescriptor {
    unbound_proto::descriptor_pool()
        .get_message_by_name(name)
        .unwrap_or_else(|| panic!("{name} is in the descriptor pool"))
}

/// A fingerprint's fields that depend on the model and its checkpoint, with the producer:
/// everything but the random uuid, for comparing two fingerprints of the same directory.
pub fn fingerprint_fields(def: &unbound_proto::tensorflow::FingerprintDef) -> [u64; 6] {
    [
        def.saved_model_checksum,
        def.graph_def_program_hash,
        def.signature_def_hash,
        def.saved_object_graph_hash,
        def.checkpoint_hash,
        def.version.as_ref().map_or(0, |v| v.producer as u64),
    ]
}

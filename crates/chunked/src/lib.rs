//! `unbound-chunked`: TensorFlow's chunked protobuf format (`.cpb`), generic over message types.
//!
//! - [`WireMessage`] holds any message at the wire level: lossless (unknown fields survive),
//!   zero-copy (values are slices of mapped files or lazy Riegeli records), and mutable through
//!   schema-typed navigation ([`navigate`]).
//! - The [`Merger`] rebuilds a message from chunks with TensorFlow's exact merge semantics.
//! - [`ChunkSink`] / [`Scope`] are the composable Splitter side; [`write_split`] writes the
//!   result as `.pb` or `.cpb`.
//! - [`read_prefix`] reads `PREFIX.cpb` or `PREFIX.pb` the way TensorFlow's `Merger::Read` does.
//!
//! Format-specific splitting algorithms (GraphDef, SavedModel) live in `unbound-savedmodel`.

pub mod error;
pub mod generic;
pub mod inspect;
pub mod merger;
pub mod prune;
pub mod read;
pub mod split;
pub mod tags;
pub mod write;

pub use error::{ChunkedError, Result};
pub use inspect::{inspect, InspectReport};
pub use merger::{ChunkSource, FileChunks, MemoryChunks, Merger};
pub use read::{read_cpb, read_cpb_partial, read_pb, read_prefix, ReadMessage, SourceFormat};
pub use split::{Chunk, ChunkHandle, ChunkSink, Scope, SplitOutput};
pub use tags::{KeyValue, PathElem};
pub use write::{write_message, write_message_with_progress, write_split, Written};

//! `unbound-chunked`: TensorFlow's chunked protobuf format (`.cpb`), generic over message types.
//!
//! A `.cpb` file is a Riegeli file whose records are chunks of one protobuf message and whose
//! last record is a `ChunkMetadata` saying where each chunk goes (field tags, repeated indices,
//! map keys). This crate is both sides of that format, for any message type in the descriptor
//! pool; messages are [`unbound_wire::WireMessage`]s, so unknown fields survive and large values
//! stay slices of the mapped file.
//!
//! - The [`Merger`] rebuilds a message from chunks with TensorFlow's exact merge semantics
//!   (`tensorflow/tools/proto_splitter/merge.cc`), whole, partially ([`prune`],
//!   [`read_cpb_partial`]) or from memory ([`MemoryChunks`]).
//! - [`ChunkSink`] / [`Scope`] are the composable Splitter side; [`generic`] is the
//!   type-agnostic splitting algorithm; [`write_split`] writes the result as `.pb` or `.cpb`,
//!   atomically.
//! - [`read_prefix`] reads `PREFIX.cpb` or `PREFIX.pb` the way TensorFlow's `Merger::Read` does.
//! - [`tags`] encodes and decodes the field tags of chunk metadata.
//! - [`check_layout`] / [`check_chunks`] check how the metadata fits the file's records: every
//!   merge from a file makes the first (and checks each chunk's size as it reads it), so a
//!   hash-valid file whose metadata lies is refused rather than merged into another message;
//!   `verify` makes the second.
//! - [`ChunkCache`] ([`FileChunks::keep_decoded`], [`check_chunks_deferring`]): the chunks a
//!   command reads several times (check, merge, fingerprint, on two threads) decoded once.
//!
//! ```
//! use unbound_chunked::{MemoryChunks, Merger};
//! use unbound_proto::tensorflow::proto_splitter::ChunkedMessage;
//!
//! // One chunk holding a whole (empty) GraphDef, described by a metadata tree pointing at it.
//! let chunks = MemoryChunks::new("example", vec![bytes::Bytes::new()]);
//! let root = ChunkedMessage { chunk_index: Some(0), ..Default::default() };
//! let desc = unbound_proto::descriptor_pool().get_message_by_name("tensorflow.GraphDef").unwrap();
//! let merged = Merger::new(&chunks).merge(&desc, &root)?;
//! assert!(merged.fields.is_empty());
//! # Ok::<(), unbound_chunked::ChunkedError>(())
//! ```
//!
//! Format-specific splitting algorithms (GraphDef, SavedModel) live in `unbound-savedmodel`.
//! Invariants: every index, position and size in chunk metadata is checked before use; output
//! is written to a temporary file and renamed ([`unbound_io::write_atomically`]).

#![forbid(unsafe_code)]

mod ahead;
pub mod cache;
pub mod check;
pub mod error;
mod fault;
pub mod generic;
pub mod inspect;
mod layout;
mod lazy;
pub mod merger;
pub mod prune;
pub mod read;
pub mod split;
mod streamed;
pub mod tags;
mod tap_thread;
pub mod write;
mod write_ahead;

pub use cache::ChunkCache;
pub use check::{
    check_chunks, check_chunks_deferring, check_chunks_leaving, check_deferred, check_layout,
    complete_deferred, ChunkFault, ChunkReport,
};
pub use error::{ChunkedError, Result};
pub use inspect::{inspect, InspectReport};
pub use lazy::RecordFile;
pub use merger::{read_metadata, ChunkSource, FileChunks, MemoryChunks, Merger};
pub use read::{
    parse_pb, read_cpb, read_cpb_partial, read_pb, read_prefix, ReadMessage, SourceFormat,
};
pub use split::{Chunk, ChunkHandle, ChunkSink, Scope, SplitOutput};
pub use streamed::{BothTaps, StreamTap, StreamedChunk, TapSink};
pub use tags::{KeyValue, PathElem};
pub use tap_thread::TapThread;
pub use write::{
    copy_unchunked, write_chunked, write_message, write_message_with_progress, write_split,
    write_unchunked, Written,
};

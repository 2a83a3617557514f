//! # unbound-records: Riegeli/records files
//!
//! TensorFlow writes large protos (`saved_model.cpb`) as Riegeli/records
//! files: a 64-byte signature, then chunks of records, with a 24-byte block
//! header at every 64 KiB. This crate reads and writes that format.
//!
//! * [`RecordReader`] reads a memory-mapped (or owned) file by **numeric
//!   record position** (`chunk_begin + index`, the value TensorFlow stores in
//!   `ChunkInfo.offset`), with Riegeli's seek semantics. Records of
//!   uncompressed chunks are zero-copy [`bytes::Bytes`] slices of the mapped
//!   file; [`RecordReader::copy_record_to`] streams a huge record to a writer
//!   without holding it in memory. Simple chunks (any compression: none,
//!   Brotli, Zstd, Snappy) and transposed chunks are readable.
//! * [`RecordWriter`] writes simple chunks with Riegeli's chunk boundary rule
//!   and returns each record's numeric position.
//!
//! ```
//! use unbound_records::{RecordReader, RecordWriter, WriterOptions};
//!
//! let mut writer = RecordWriter::new(Vec::new(), WriterOptions::default())?;
//! let first = writer.write_record(b"chunk one")?;
//! assert_eq!(first, 64); // the first chunk begins right after the 64-byte signature
//! let second = writer.write_record(b"chunk two")?; // 65: same chunk, next index
//! let file = writer.finish()?;
//!
//! let reader = RecordReader::from_bytes(file.into(), "example.cpb")?;
//! assert_eq!(reader.read_record_at(second)?.1, &b"chunk two"[..]);
//! assert_eq!(reader.read_record_at(first + 1)?.0, second);
//! assert_eq!(reader.last_record()?, (second, bytes::Bytes::from_static(b"chunk two")));
//! let mut out = Vec::new();
//! reader.copy_record_to(first, &mut out)?;
//! assert_eq!(out, b"chunk one");
//! # Ok::<(), unbound_records::RecordsError>(())
//! ```
//!
//! Untrusted input never panics: every size, offset and count read from the
//! file is checked against what the file can hold before it is used, and
//! errors ([`RecordsError`]) name the file, the offset and the fault.
//!
//! ## Relation to the `riegeli` crate
//!
//! The crates.io `riegeli` crate (0.2.1) implements the whole format and
//! reads and writes files compatible with the C++ implementation. It is used
//! here only as a dev-dependency: an independent reader and writer for the
//! interop tests (files it writes, including transposed chunks and metadata,
//! must read back here, and files written here must read back there). What
//! was taken from it is the evidence, not the code: its behaviour served as
//! a second opinion on the format facts from Google's specification and C++
//! sources (block layout, chunk padding, compressed buffer prefixes, raw
//! Snappy, the transposed state machine).
//!
//! This crate is written separately because the rest of `unbound` needs an
//! API that one does not offer:
//! * **record positions**: its writer does not report the numeric position
//!   of a written record (`LastPos`), which `ChunkInfo.offset` needs, and
//!   positions are the primary key of every read here;
//! * **zero copy**: its reader returns an owned `Vec<u8>` per record, copying
//!   every record, while multi-gigabyte models must be served as slices of
//!   the mapped file and streamed, never held twice;
//! * **speed on incompressible Brotli**: TensorFlow compresses float tensors
//!   with Brotli quality 6, which stores them as uncompressed meta-blocks;
//!   this crate recognises such streams and copies the bytes straight from
//!   the file instead of running them through a decoder.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod block;
mod brotli_raw;
mod chunk_bytes;
mod chunk_decoder;
mod chunk_header;
mod chunk_reader;
mod chunk_writer;
mod compression;
mod error;
mod hash;
mod limits;
mod options;
mod own_chunk;
mod reader;
mod simple_chunk;
mod transposed;
mod varint;
mod writer;

pub use chunk_header::ChunkType;
pub use compression::{Compression, CompressionType};
pub use error::{DecodeLimitKind, HashedPart, RecordsError};
pub use limits::{
    default_budget, parse_size, set_default_budget, DecodeLimits, MEMORY_LIMIT_ENV,
    MIN_DEFAULT_BUDGET,
};
pub use options::WriterOptions;
pub use own_chunk::{encode_own_chunk, EncodedChunk};
pub use reader::{ChunkSummary, RecordReader};
pub use writer::RecordWriter;

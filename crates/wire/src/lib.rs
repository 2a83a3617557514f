//! `unbound-wire`: protobuf messages held at the wire level, losslessly and without copies.
//!
//! A [`WireMessage`] is a message's fields in wire order. Length-delimited values stay byte
//! slices ([`Payload`]) — of a memory-mapped file, or lazy references to records of a
//! [`RecordSource`] (a Riegeli file, through `unbound-chunked`) — until
//! something needs to look inside them; only then are they expanded into nested messages. That
//! gives the three properties the rest of unbound builds on:
//!
//! - **lossless**: fields the schema does not know survive a read and a write unchanged;
//! - **zero-copy**: a multi-gigabyte `tensor_content` is never copied to be passed through;
//! - **merge is append**: merging serialized bytes into a message appends their fields, exactly
//!   protobuf's `MergeFromString`.
//!
//! [`codec`] holds the primitives (varints, keys, one-level scans) every reader of untrusted
//! protobuf bytes in the workspace uses; [`navigate`] walks and edits messages by schema
//! ([`prost_reflect`] descriptors); [`scalar`] converts scalar values between text, typed values
//! and the wire; [`write_prefetched`] serializes a message whose lazy records are decoded ahead
//! on worker threads.
//!
//! ```
//! use unbound_wire::WireMessage;
//! // Field 1 (varint 150), then field 2 ("hi"), with no schema at all.
//! let bytes = [0x08, 0x96, 0x01, 0x12, 0x02, b'h', b'i'];
//! let message = WireMessage::parse(&bytes.to_vec().into(), None)?;
//! assert_eq!(message.fields.len(), 2);
//! let mut out = Vec::new();
//! message.write_to(&mut out)?;
//! assert_eq!(out, bytes); // lossless
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! This crate is pure Rust with no C dependency: it knows record files only through
//! [`RecordSource`].
//!
//! Invariants: every length, count and nesting depth read from bytes is checked before use
//! (errors carry the byte offset); nothing here panics on input.

#![forbid(unsafe_code)]

pub mod codec;
mod error;
mod fields_apart;
pub mod lenient;
mod message;
pub mod navigate;
mod prefetch;
pub mod scalar;
mod source;
pub mod text_depth;

pub use error::{DecodeError, Result, WireError};
pub use fields_apart::{fields_apart_of, FieldsApart};
pub use lenient::decode_lenient;
pub use message::{
    check_record_len, wire_type_fits, Payload, RecordRef, WireField, WireMessage, WireValue,
};
pub use prefetch::write_prefetched;
pub use source::{RecordSource, SourceError};

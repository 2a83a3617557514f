//! Canonical form of protobuf messages: what protobuf C++ writes when it serializes a message
//! deterministically (`SetSerializationDeterministic(true)`) after parsing it, computed from
//! the serialized bytes and a schema, without building the message. No TensorFlow knowledge:
//! any message type of any descriptor pool.
//!
//! TensorFlow hashes that form (SavedModel fingerprints are FarmHash `Fingerprint64` of it),
//! so a tool must produce it byte for byte from models written by any writer: fields out of
//! number order, map entries without their default key, unknown fields, a message sent in
//! several parts, packed and unpacked runs, padded varints.
//!
//! # The form
//! - Known fields in field-number order, then unknown fields in the order read (a known number
//!   with another wire type is unknown, as in C++).
//! - A singular scalar is its last occurrence, written unless it is the default and the field
//!   has no presence; varints are normalized by type (`int32` and enums sign-extended to 64
//!   bits, `uint32` and `sint32` truncated to 32, `bool` 0 or 1).
//! - A singular message merges its occurrences; a oneof keeps the member set last.
//! - Repeated numbers are packed when the schema says so, however they were read.
//! - Map entries: the last entry of a key wins, sorted by key (strings bytewise, integers by
//!   value), each written with both key and value, defaults included; unknown fields inside
//!   entries are dropped.
//!
//! # Use
//! ```
//! use prost_reflect::DescriptorPool;
//! use unbound_canonical::{encode, farmhash, Schema};
//!
//! let pool = unbound_proto::descriptor_pool();
//! let desc = pool.get_message_by_name("tensorflow.VersionDef").unwrap();
//! let schema = Schema::new(&desc);
//! // `min_consumer` (2) before `producer` (1), and `producer` written twice.
//! let bytes = [0x10, 0x05, 0x08, 0x01, 0x08, 0x1b];
//! let mut out = Vec::new();
//! encode(&schema, schema.root(), &[&bytes], &mut out).unwrap();
//! assert_eq!(out, [0x08, 0x1b, 0x10, 0x05]);
//!
//! // Hashed as it is written, never held whole:
//! let mut hash = farmhash::Fingerprint64::new();
//! encode(&schema, schema.root(), &[&bytes], &mut hash).unwrap();
//! assert_eq!(hash.finish(), farmhash::fingerprint64(&out));
//! # let _ = DescriptorPool::new();
//! ```
//!
//! # Modules
//! - [`schema`]: message types compiled from descriptors for the encoder.
//! - [`encode`](mod@encode): the encoder (two streaming passes for large messages, one buffered
//!   pass for small ones, most of them written as they are read; canonical input is found so
//!   and copied).
//! - [`sink`]: where the bytes go (a `Vec`, a hash, a count).
//! - [`farmhash`]: FarmHash `Fingerprint64`, streaming, as TensorFlow computes it.

#![forbid(unsafe_code)]

pub mod encode;
pub mod error;
pub mod farmhash;
pub mod schema;
pub mod sink;

pub use encode::{
    encode, encode_elements_to_vec, encode_streaming_from, encode_to_vec, encode_to_vec_validated,
    is_canonical, MAX_DEPTH,
};
pub use error::{CanonicalError, Result};
pub use schema::{Schema, TypeId};
pub use sink::Sink;

/// FarmHash `Fingerprint64` of the canonical form of the message of type `ty` made of `parts`,
/// hashed as it is encoded.
pub fn fingerprint64(schema: &Schema, ty: TypeId, parts: &[&[u8]]) -> Result<u64> {
    let mut hash = farmhash::Fingerprint64::new();
    encode(schema, ty, parts, &mut hash)?;
    Ok(hash.finish())
}

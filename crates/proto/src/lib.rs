//! Protobuf schemas of TensorFlow SavedModels and of the proto splitter's
//! chunked format, compiled at build time with protox and prost-build (no
//! system `protoc`).
//!
//! # Modules
//!
//! - [`tensorflow`]: package `tensorflow` — [`tensorflow::SavedModel`],
//!   [`tensorflow::MetaGraphDef`], [`tensorflow::GraphDef`],
//!   [`tensorflow::TensorProto`], [`tensorflow::SavedObjectGraph`],
//!   [`tensorflow::FingerprintDef`], the tensor bundle index entries, ...
//! - [`tensorflow::proto_splitter`]: package `tensorflow.proto_splitter` —
//!   [`tensorflow::proto_splitter::ChunkMetadata`] and friends.
//! - [`tensorflow::dtensor`]: package `tensorflow.dtensor` —
//!   [`tensorflow::dtensor::MeshProto`] and [`tensorflow::dtensor::LayoutProto`].
//! - [`xla`]: package `xla` — [`xla::OpSharding`] and the messages it references.
//! - [`unbound::test`]: package `unbound.test` — messages for tests.
//! - [`fields`]: the field number of every field of every message above, as
//!   constants generated from the same descriptors, for code that works on
//!   the wire format.
//!
//! Field numbers, types, labels, oneofs, maps and enum values match
//! TensorFlow 2.21; `interop/proto_schema_check.py` verifies this against
//! TensorFlow's own descriptors:
//!
//! ```text
//! cargo run -p unbound-proto --example dump_descriptors -- /tmp/unbound.binpb
//! $TF_VENV/bin/python interop/proto_schema_check.py /tmp/unbound.binpb
//! ```
//!
//! # Representation
//!
//! - Every `bytes` field is a [`bytes::Bytes`], so decoding from a `Bytes`
//!   buffer (for instance a memory-mapped file) slices it instead of copying.
//! - Every map field is a [`BTreeMap`](std::collections::BTreeMap): encoding
//!   writes entries in key order, as protobuf's deterministic serialization
//!   does.
//! - `google.protobuf.Any` and `google.protobuf.BoolValue` come from
//!   [`prost_types`].
//! - Every message implements [`prost::Name`] and
//!   [`prost_reflect::ReflectMessage`] (descriptors from [`descriptor_pool`]).
//!
//! [`prost_reflect::DynamicMessage`] keeps map entries in a hash map, so its
//! encoding of maps is not in key order; encode through the generated types
//! when byte-for-byte determinism matters.
//!
//! Unknown fields are dropped by prost's generated types. Code that must be
//! lossless over data it does not understand should work on
//! [`prost_reflect::DynamicMessage`] (which keeps unknown fields) or on the
//! wire format.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

use std::sync::OnceLock;

use prost_reflect::DescriptorPool;

/// Encoded `google.protobuf.FileDescriptorSet` of every schema in this crate,
/// including the well-known types they import (`google/protobuf/any.proto`,
/// `google/protobuf/wrappers.proto`). Source info (comments) is not included.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/file_descriptor_set.bin"));

/// The descriptor pool built from [`FILE_DESCRIPTOR_SET`], decoded once on
/// first use.
///
/// Use it for reflection: looking messages up by full name
/// (`"tensorflow.GraphDef"`), walking fields, map key kinds, or decoding into
/// a [`prost_reflect::DynamicMessage`].
pub fn descriptor_pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(FILE_DESCRIPTOR_SET)
            .expect("embedded FILE_DESCRIPTOR_SET is valid (checked at build time)")
    })
}

/// Field numbers of every message of the schemas, generated at build time from
/// their descriptors, for code that reads or writes the wire format without
/// decoding whole messages.
///
/// One module per protobuf package and, inside it, one module per message
/// named like prost's module for that message (the message name in
/// `snake_case`); nested messages, map entries included, are nested modules.
/// Each field is a `u32` constant named after the field in `SHOUTY_SNAKE_CASE`,
/// documented with its full name and declared type:
///
/// ```
/// use unbound_proto::fields::tensorflow::{graph_def, meta_graph_def, node_def, saved_model};
///
/// assert_eq!(graph_def::NODE, 1);
/// assert_eq!(graph_def::LIBRARY, 2);
/// assert_eq!(node_def::ATTR, 5);
/// assert_eq!(node_def::attr_entry::KEY, 1);
/// assert_eq!(saved_model::META_GRAPHS, 2);
/// assert_eq!(meta_graph_def::GRAPH_DEF, 2);
/// assert_eq!(unbound_proto::fields::tensorflow::proto_splitter::chunk_info::TYPE, 1);
/// ```
///
/// The well-known types the schemas import are included
/// (`fields::google::protobuf::any::TYPE_URL`).
pub mod fields {
    include!(concat!(env!("OUT_DIR"), "/fields.rs"));
}

/// Generated types, one module per protobuf package.
#[allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    rustdoc::bare_urls,
    rustdoc::broken_intra_doc_links,
    rustdoc::invalid_html_tags
)]
pub mod tensorflow {
    include!(concat!(env!("OUT_DIR"), "/tensorflow.rs"));

    /// Package `tensorflow.proto_splitter`: metadata of chunked (`.cpb`) files.
    pub mod proto_splitter {
        include!(concat!(env!("OUT_DIR"), "/tensorflow.proto_splitter.rs"));
    }

    /// Package `tensorflow.dtensor`: DTensor's `MeshProto` and `LayoutProto`.
    pub mod dtensor {
        include!(concat!(env!("OUT_DIR"), "/tensorflow.dtensor.rs"));
    }
}

/// Package `xla`: `OpSharding` and the messages it references (reduced where
/// unbound reads only part of them).
#[allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    rustdoc::bare_urls,
    rustdoc::broken_intra_doc_links,
    rustdoc::invalid_html_tags
)]
pub mod xla {
    include!(concat!(env!("OUT_DIR"), "/xla.rs"));
}

/// Package `unbound`: this project's own schemas.
pub mod unbound {
    /// Package `unbound.test`: messages for splitter, merger and reflection
    /// tests.
    #[allow(
        missing_docs,
        clippy::all,
        clippy::pedantic,
        rustdoc::bare_urls,
        rustdoc::broken_intra_doc_links,
        rustdoc::invalid_html_tags
    )]
    pub mod test {
        include!(concat!(env!("OUT_DIR"), "/unbound.test.rs"));
    }
}

//! Message types by full name: unbound's descriptor pool (TensorFlow's and the proto
//! splitter's schemas), extended, for types it does not know, with the schema the Python
//! message carries (its `FileDescriptorProto`s, sent as a serialized `FileDescriptorSet`).
//!
//! Files the pool has already (by name) are kept as they are: TensorFlow's Python modules and
//! unbound describe the same `.proto` files, and the pool's copy is the one the rest of unbound
//! is built on.

use prost::Message as _;
use prost_reflect::prost_types::FileDescriptorSet;
use prost_reflect::{DescriptorPool, MessageDescriptor};

/// Why a message type could not be found.
#[derive(Debug, thiserror::Error)]
pub enum TypeError {
    /// No schema of that name, neither in unbound's pool nor in the one given.
    #[error("unknown message type {0:?}: not among unbound's schemas (TensorFlow's) and no schema of it was given")]
    Unknown(String),
    /// The schema given with the message does not decode or does not fit the pool.
    #[error("the schema given for message type {name:?} is invalid: {fault}")]
    BadSchema {
        /// The type asked for.
        name: String,
        /// What was wrong.
        fault: String,
    },
}

/// The descriptor of `name`, from unbound's pool or else from `schema` (a serialized
/// `FileDescriptorSet` holding the type's file and its dependencies).
pub fn message_type(name: &str, schema: Option<&[u8]>) -> Result<MessageDescriptor, TypeError> {
    let base = unbound_proto::descriptor_pool();
    if let Some(desc) = base.get_message_by_name(name) {
        return Ok(desc);
    }
    let Some(schema) = schema else {
        return Err(TypeError::Unknown(name.to_string()));
    };
    let bad = |fault: String| TypeError::BadSchema {
        name: name.to_string(),
        fault,
    };
    let set = FileDescriptorSet::decode(schema).map_err(|e| bad(e.to_string()))?;
    let mut pool: DescriptorPool = base.clone();
    let new_files: Vec<_> = set
        .file
        .into_iter()
        .filter(|f| pool.get_file_by_name(f.name()).is_none())
        .collect();
    pool.add_file_descriptor_protos(new_files)
        .map_err(|e| bad(e.to_string()))?;
    pool.get_message_by_name(name)
        .ok_or_else(|| TypeError::Unknown(name.to_string()))
}

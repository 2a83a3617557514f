//! The GraphDef and SavedModel splitters: TensorFlow's Python algorithm
//! (`tools/proto_splitter/split_graph_def.py`, `python/saved_model.py`) on wire-level messages.
//!
//! Thresholds are TensorFlow's: a message is "large" when its size exceeds `max_size / 3`
//! (integer division), "above max" when it exceeds `max_size`. One deliberate difference:
//! where TensorFlow gives up (a node larger than the maximum that is not a `Const`, or a `Const`
//! whose value cannot be turned into `tensor_content`), we chunk the node whole and record a
//! warning, so splitting a valid model never fails, whatever the maximum.
//!
//! One opt-in extension: [`MetaGraphSplitting::Every`] splits every MetaGraphDef's graph, not
//! only the first one's (for models holding one graph under several tag-sets).

mod every_meta_graph;
mod graph_def;
mod nodes;
mod repeated;
mod saved_model;
mod tensor_bytes;

pub use every_meta_graph::{
    message_chunk_over, split_every_meta_graph, split_saved_model_with, MetaGraphSplitting,
};
pub use graph_def::split_graph_def;
pub use saved_model::{split_graph_def_root, split_message, split_saved_model};
pub use tensor_bytes::typed_values_to_bytes;

use prost_reflect::{FieldDescriptor, MessageDescriptor};

/// TensorFlow's default maximum chunk size for the Python splitter: 1 GiB.
pub const DEFAULT_MAX_SIZE: u64 = 1 << 30;

/// Settings and findings of one split.
#[derive(Debug)]
pub struct SplitContext {
    /// Maximum size of a chunk (TensorFlow's `constants.max_size()`).
    pub max_size: u64,
    /// What the split had to do differently from TensorFlow, for the user.
    pub warnings: Vec<String>,
}

impl SplitContext {
    /// A context with the given maximum.
    pub fn new(max_size: u64) -> Self {
        Self {
            max_size,
            warnings: Vec::new(),
        }
    }

    /// `_GREEDY_SPLIT`: larger than a third of the maximum.
    pub fn is_large(&self, size: u64) -> bool {
        size > self.max_size / 3
    }

    /// `_ABOVE_MAX_SIZE`.
    pub fn is_above_max(&self, size: u64) -> bool {
        size > self.max_size
    }
}

/// Looks up a field of a schema message by name; the schemas are ours, so a missing field is
/// a programming error reported as a schema error rather than a panic.
pub(crate) fn field(desc: &MessageDescriptor, name: &str) -> crate::Result<FieldDescriptor> {
    desc.get_field_by_name(name)
        .ok_or_else(|| crate::SavedModelError::Schema {
            message: desc.full_name().to_string(),
            fault: format!("schema has no field {name:?}"),
        })
}

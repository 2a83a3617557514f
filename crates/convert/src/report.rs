//! What a conversion wrote (or, dry, would write): a typed report the front ends render.

use serde::Serialize;

use crate::options::Target;

/// One tensor converted.
#[derive(Debug, Clone, Serialize)]
pub struct TensorReport {
    /// Its name in the safetensors files.
    pub name: String,
    /// Its checkpoint key.
    pub key: String,
    /// TensorFlow's dtype name (`float32`, `bfloat16`, ...).
    pub dtype: String,
    /// The whole tensor's shape.
    pub shape: Vec<u64>,
    /// Bytes of data.
    pub bytes: u64,
    /// The safetensors file holding it (to safetensors) or it was read from (the first
    /// piece's file, from safetensors).
    pub file: String,
    /// How many stored pieces it was assembled from (slices of a partitioned variable, or
    /// a PyTorch DCP checkpoint's pieces); 1 for a whole one.
    pub pieces: usize,
}

/// One file written.
#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    /// Its name in the output (a file name, or a data shard's).
    pub name: String,
    /// Tensors in it.
    pub tensors: usize,
    /// Bytes of tensor data in it.
    pub bytes: u64,
}

/// What a conversion wrote.
#[derive(Debug, Clone, Serialize)]
pub struct ConvertReport {
    /// The format written.
    pub to: Target,
    /// The source.
    pub src: String,
    /// The output (a directory of safetensors files, or a checkpoint prefix).
    pub dst: String,
    /// Whether nothing was written (a dry run).
    pub dry_run: bool,
    /// Bytes of tensor data over all tensors (the index's `metadata.total_size`).
    pub bytes: u64,
    /// The files written.
    pub files: Vec<FileReport>,
    /// Every tensor, in name order.
    pub tensors: Vec<TensorReport>,
    /// Whether the object graph was carried (restoring into objects works).
    pub object_graph: bool,
    /// Seconds taken.
    pub seconds: f64,
}

//! What an externalize did (or, with a dry run, would do): a typed, serializable report.

use serde::Serialize;

/// One constant moved into a variable.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct MovedConstant {
    /// The MetaGraphDef's position in the model.
    pub meta_graph: usize,
    /// The library function holding the `Const` node, `None` for the graph itself.
    pub function: Option<String>,
    /// The `Const` node's name (now an `Identity` of the variable's value).
    pub node: String,
    /// Its dtype, as TensorFlow's Python names it (`float32`).
    pub dtype: String,
    /// Its shape.
    pub shape: Vec<i64>,
    /// The bytes of its value (as stored in the checkpoint).
    pub bytes: u64,
    /// The new variable's name (its `VarHandleOp`'s `shared_name`).
    pub variable: String,
    /// Its key in `variables/`.
    pub checkpoint_key: String,
}

/// A constant at least the minimum size that stays a constant, and why.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct KeptConstant {
    /// The MetaGraphDef's position in the model.
    pub meta_graph: usize,
    /// The library function holding it, `None` for the graph.
    pub function: Option<String>,
    /// The `Const` node's name.
    pub node: String,
    /// Its size in the model proto.
    pub bytes: u64,
    /// Why it is kept.
    pub reason: String,
}

/// What [`crate::externalize`] did.
#[derive(Debug, Clone, Serialize)]
pub struct ExternalizeReport {
    /// The constants moved, in the order they were found.
    pub moved: Vec<MovedConstant>,
    /// Constants at least the minimum size left as they are.
    pub kept: Vec<KeptConstant>,
    /// Size of the source's model proto.
    pub model_bytes_before: u64,
    /// Size of the `saved_model.pb` written (or that would be written).
    pub model_bytes_after: u64,
    /// Bytes of constant values moved into `variables/`.
    pub moved_bytes: u64,
    /// Whether the output was written (false for a dry run).
    pub written: bool,
}

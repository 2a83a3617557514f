//! The one error type of this crate.

use thiserror::Error;

/// Why a mesh, layout, sharding or array could not be used. Every variant names the input
/// it is about and what is wrong with it.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DTensorError {
    /// A mesh string or `MeshProto` is not a valid mesh. `fault` is TensorFlow's message
    /// where TensorFlow rejects the input too.
    #[error("invalid mesh {input:?}: {fault}")]
    Mesh {
        /// The mesh as given (string, or `proto` for a decoded message).
        input: String,
        /// What is wrong.
        fault: String,
    },
    /// A layout string or `LayoutProto` is not a valid layout.
    #[error("invalid layout {input:?}: {fault}")]
    Layout {
        /// The layout as given.
        input: String,
        /// What is wrong.
        fault: String,
    },
    /// Bytes that should hold a protobuf message do not decode.
    #[error("cannot decode {message} from {input}: {fault}")]
    Proto {
        /// The message type expected (`tensorflow.dtensor.LayoutProto`, `xla.OpSharding`).
        message: &'static str,
        /// Where the bytes came from.
        input: String,
        /// The decoder's complaint.
        fault: String,
    },
    /// A global or local shape does not fit a layout.
    #[error("shape {shape:?} does not fit layout {layout}: {fault}")]
    Shape {
        /// The shape given.
        shape: Vec<i64>,
        /// The layout (as a string).
        layout: String,
        /// What is wrong.
        fault: String,
    },
    /// An XLA `OpSharding` cannot be converted (either direction).
    #[error("OpSharding {input}: {fault}")]
    OpSharding {
        /// The sharding (HLO text, or a description of the layout it came from).
        input: String,
        /// What is wrong.
        fault: String,
    },
    /// A JAX PartitionSpec, HLO sharding text or PyTorch placement text does not parse.
    #[error("cannot parse {what} {input:?}: {fault}")]
    Syntax {
        /// What kind of text (`PartitionSpec`, `HLO sharding`).
        what: &'static str,
        /// The text given.
        input: String,
        /// What is wrong.
        fault: String,
    },
    /// Arrays or components do not fit the layout they are used with.
    #[error("{what}: {fault}")]
    Data {
        /// Which array or component (`component 3`, `global array`).
        what: String,
        /// What is wrong.
        fault: String,
    },
    /// No relayout exists between two layouts.
    #[error("cannot relayout {from} to {to}: {fault}")]
    Relayout {
        /// The source layout.
        from: String,
        /// The target layout.
        to: String,
        /// Why not.
        fault: String,
    },
}

/// Results of this crate.
pub type Result<T, E = DTensorError> = std::result::Result<T, E>;

pub(crate) fn mesh_err(input: &str, fault: impl Into<String>) -> DTensorError {
    DTensorError::Mesh {
        input: input.to_string(),
        fault: fault.into(),
    }
}

pub(crate) fn layout_err(input: &str, fault: impl Into<String>) -> DTensorError {
    DTensorError::Layout {
        input: input.to_string(),
        fault: fault.into(),
    }
}

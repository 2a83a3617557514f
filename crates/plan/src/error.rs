//! The one error type of the planner.

use std::path::PathBuf;

use thiserror::Error;

/// Why a plan could not be made. A refusal ([`PlanError::Refused`]) is DTensor's own: the
/// program would not run under DTensor either.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The SavedModel could not be read.
    #[error(transparent)]
    SavedModel(#[from] unbound_savedmodel::SavedModelError),
    /// A mesh, layout or sharding argument is invalid.
    #[error(transparent)]
    Layout(#[from] unbound_dtensor::ToolError),
    /// The model does not hold what was asked for (tag-set, signature, input, function), or
    /// holds something malformed.
    #[error("{}: {fault}", dir.display())]
    Model {
        /// The SavedModel directory.
        dir: PathBuf,
        /// What is missing or wrong.
        fault: String,
    },
    /// An argument does not fit the model (an input it lacks, a layout of the wrong rank).
    #[error("{fault}")]
    Argument {
        /// What is wrong, naming the argument.
        fault: String,
    },
    /// DTensor refuses the program at this op.
    #[error("op {node} ({op}): DTensor refuses it: {rule}")]
    Refused {
        /// The node, with the functions it sits in (`f/g/node`).
        node: String,
        /// Its op type.
        op: String,
        /// DTensor's rule and message.
        rule: String,
    },
}

/// Results of this crate.
pub type Result<T, E = PlanError> = std::result::Result<T, E>;

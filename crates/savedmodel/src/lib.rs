//! `unbound-savedmodel`: SavedModel directories and the TensorFlow-specific splitters.
//!
//! - [`split`]: TensorFlow's GraphDef and SavedModel splitting algorithms.
//! - [`dir`]: locating and reading a SavedModel directory (`saved_model.cpb`, then `.pb`,
//!   then `.pbtxt`); [`model_file`], the one place that decides which file holds the model.
//! - [`show`], [`verify`], [`fingerprint`], [`vars`]: reports, as typed serializable structs.
//! - [`write`]: split or merged copies of a directory, and copies holding a new model.
//! - [`SavedModelError`]: this crate's errors, wrapping those of the layers below.

pub mod dir;
pub mod error;
pub mod fingerprint;
mod format;
mod recent_bytes;
pub mod rewrite;
mod shared_cpb;
pub mod show;
pub mod split;
pub mod vars;
pub mod verify;
pub mod write;

pub use dir::{model_file, ModelFile};
pub use error::{Fault, Result, SavedModelError};
pub use format::{ModelFormat, FINGERPRINT_FILE, MAX_PROTO_SIZE};

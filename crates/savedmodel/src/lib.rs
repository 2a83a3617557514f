//! `unbound-savedmodel`: SavedModel directories and the TensorFlow-specific splitters.
//!
//! - [`split`]: TensorFlow's GraphDef and SavedModel splitting algorithms.
//! - [`dir`]: reading a SavedModel directory (`saved_model.cpb`, then `.pb`, then `.pbtxt`)
//!   and writing split or merged copies of it; [`ModelFormat`] and [`model_file`], the one
//!   place that decides which file of a directory holds the model.
//! - [`show`], [`verify`], [`fingerprint`], [`vars`]: reports, as typed serializable structs.
//! - [`SavedModelError`]: this crate's errors, wrapping those of the layers below.

pub mod dir;
pub mod error;
pub mod fingerprint;
mod recent_bytes;
pub mod rewrite;
mod shared_cpb;
pub mod show;
pub mod split;
pub mod vars;
pub mod verify;

pub use dir::{model_file, ModelFile, ModelFormat};
pub use error::{Result, SavedModelError};

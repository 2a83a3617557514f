//! `unbound-savedmodel`: SavedModel directories and the TensorFlow-specific splitters.
//!
//! - [`split`]: TensorFlow's GraphDef and SavedModel splitting algorithms.
//! - [`dir`]: reading a SavedModel directory (`saved_model.cpb`, then `.pb`, then `.pbtxt`)
//!   and writing split or merged copies of it.

pub mod dir;
pub mod fingerprint;
pub mod rewrite;
pub mod show;
pub mod split;
pub mod verify;

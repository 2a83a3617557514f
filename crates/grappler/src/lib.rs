//! Host for TensorFlow graph-optimizer plugins.
//!
//! Plugins are shared libraries written against TensorFlow's pluggable graph optimizer C API
//! (`grappler.h`): they export `TF_InitGraph`, register one optimizer for one device type, and
//! are handed serialized `GraphDef`s. This crate loads them, validates their registration with
//! TensorFlow's rules and messages, runs them on a model's graphs, and exports the util C API
//! (`TF_Buffer`, `TF_Status`, grappler item, graph properties, function library) that plugins
//! call back into. Reading and writing the SavedModel around them is `unbound-savedmodel`'s
//! ([`unbound_savedmodel::rewrite`]); [`saved_model`] only plugs the plugins into it. Errors that
//! stop a run are [`GrapplerError`]s.
//!
//! The pass ([`pass`]) works on serialized graphs, for models of millions of nodes and
//! thousands of functions: the main graph goes to plugins as the bytes it was read as
//! ([`serialized`] scans them at the wire level), functions are decoded and converted one at
//! a time, and a graph no plugin changed is never decoded or re-encoded.
//!
//! With `--isolate` ([`isolate`]) each plugin runs in a worker process, an executable named by
//! [`host::HostOptions::worker`], `UNBOUND_WORKER`, or this process's own.
//!
//! The util C API is exported from the executable that links this crate: its binary must be
//! linked with `-Wl,--export-dynamic-symbol=TF_*` (the `unbound` CLI's build script does this),
//! so a plugin's undefined `TF_*` symbols resolve to ours when it is loaded.

pub use unbound_grappler_abi as abi;
pub mod buffer;
pub mod configs;
pub mod elf;
pub mod error;
pub mod exports;
pub mod host;
pub mod isolate;
pub mod item;
pub mod pass;
pub mod plugin;
pub mod runner;
pub mod saved_model;
pub mod serialized;
mod shims;
pub mod status;
pub mod util_api;
pub mod util_properties;

pub use error::{GrapplerError, PluginFault};

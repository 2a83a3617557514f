//! TensorFlow SavedModels for TPU inference, offline: MetaGraphDef tag-sets, the TPU rewrite
//! RFC 171 describes (and the TPU Inference Converter performs), and its reverse.
//!
//! - [`tags`]: list, add (duplicate a MetaGraphDef under a new tag-set, sharing the
//!   variables), replace and remove tag-sets; duplicate tag-sets are refused.
//! - [`export::export_tpu`]: choose functions by `function_aliases` alias, concrete name or
//!   signature ([`select`]); wrap each in a one-replica `_tpu_replicate` cluster laid out as
//!   `tpu.rewrite` lays it out ([`wrapper`]); turn its call sites into `TPUPartitionedCall` fed
//!   by a `TPUOrdinalSelector`, optionally behind `BatchFunction` ([`rewrite`]); recompute the
//!   stripped op list through every function attribute ([`oplist`]); check the result
//!   ([`check`]); write a `{serve, tpu}` MetaGraphDef beside the CPU one (or instead of it).
//! - [`export::export_cpu`]: the reverse ([`to_cpu`]), so a TPU model runs on CPU for tests.
//!
//! Models are handled at the wire level ([`model`]): nodes and functions are decoded one by
//! one from slices of the mapped input, only what changes is re-encoded, and the second
//! MetaGraphDef shares every unchanged byte with the first, so a model past 2 GiB (read from
//! `.cpb`, written split) is never held twice.
//!
//! ```no_run
//! use std::path::Path;
//! use unbound_tpu::export::{export_tpu, ExportOptions};
//! use unbound_tpu::options::TpuOptions;
//!
//! let options = ExportOptions {
//!     functions: vec!["serving_default".into()],
//!     tags: vec!["serve".into(), "tpu".into()],
//!     source_tags: None,
//!     tpu_only: false,
//!     tpu: TpuOptions::default(),
//!     batch: Vec::new(),
//!     dry_run: false,
//!     max_size: 1 << 30,
//!     writer: Default::default(),
//! };
//! let report = export_tpu(Path::new("model"), Path::new("model_tpu"), &options)?;
//! for f in &report.functions {
//!     println!("{} -> {} at {:?}", f.function, f.wrapper, f.call_sites);
//! }
//! # Ok::<(), unbound_tpu::TpuError>(())
//! ```
//!
//! Invariants: nothing is written when any step fails; every written graph passed
//! [`check::check_graph`]; the original functions are never changed except at call sites.

#![forbid(unsafe_code)]

pub mod attrs;
pub mod check;
pub mod error;
pub mod export;
pub mod model;
pub mod oplist;
pub mod options;
pub mod rewrite;
pub mod select;
pub mod tags;
pub mod to_cpu;
pub mod wrapper;

pub use error::{CheckFault, CpuFault, Result, TpuError};

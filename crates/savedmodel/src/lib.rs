//! `unbound-savedmodel`: SavedModel directories, read, reported on, checked and written again,
//! and TensorFlow's algorithms for splitting a SavedModel into the chunked format.
//!
//! A SavedModel directory holds one model file (`saved_model.cpb`, else `saved_model.pb`, else
//! `saved_model.pbtxt`: TensorFlow's order), `variables/` (a tensor bundle), `assets/` and
//! `fingerprint.pb`. Every command of the `unbound` binary and the Python package that works on
//! such a directory goes through this crate, and data flows one way through its modules:
//!
//! 1. **Open** ([`dir`]): [`SavedModel::open`] resolves the directory once: which model file
//!    is read and which are passed over, the variables' index, the assets, the fingerprint;
//!    the model file is mapped once, on first use, and every reader works from that mapping
//!    ([`SavedModel::read`] for the whole proto). [`format`](ModelFormat) and [`error`] sit
//!    below it: the file names, protobuf's size limit, the one error type.
//! 2. **Read and report**: [`show`] (what `saved_model_cli show` says, and more),
//!    [`vars`] (the variables), [`fingerprint`] (TensorFlow's `fingerprint.pb`, hash for
//!    hash). Each returns a typed, serializable report and prints nothing; each reads only
//!    what it needs.
//! 3. **Verify** ([`verify`]): every file of the directory checked, every problem reported
//!    with its file; it runs the reports above, so whatever another command refuses, verify
//!    refuses.
//! 4. **Write** ([`write`](mod@write)): split ([`write::split_dir`]) or merged ([`write::merge_dir`])
//!    copies of a verified directory, or a copy holding a new model proto
//!    ([`write::write_model_dir`]), all as one [`write::WriteOptions`] says; written to a
//!    temporary and renamed, every other file carried over byte for byte, a fingerprint
//!    computed from the bytes written. [`split`] holds TensorFlow's splitting algorithms
//!    the writers use.
//! 5. **Rewrite** ([`rewrite`]): a model's graphs handed to a rewrite (graph-optimizer
//!    plugins, the TPU export) and the result written as above.
//!
//! No module imports one later in that list (`scripts/check_module_cycles.py` checks it). Facts
//! one pass learns (a fingerprint, whether the bytes are canonical) are reused by another only
//! about the very bytes they were learnt from.
//!
//! ```
//! use std::path::Path;
//! use unbound_savedmodel::write::{split_dir, WriteOptions};
//! use unbound_savedmodel::{fingerprint, show, verify, ModelFormat, SavedModel};
//!
//! let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/models/tf2_multi_sig");
//! let model = SavedModel::open(&dir)?;
//! assert_eq!(model.format(), ModelFormat::Pb);
//!
//! // Reports: what the model holds, and its fingerprint, equal to the one stored beside it.
//! let info = show::show_model(&model)?;
//! assert!(info.meta_graphs.iter().any(|mg| mg.tags == ["serve"]));
//! let computed = fingerprint::fingerprint_model(&model)?;
//! let stored = fingerprint::read_fingerprint(&dir)?;
//! assert_eq!(computed.saved_model_checksum, stored.saved_model_checksum);
//! assert!(verify::verify_model(&model).faults.is_empty());
//!
//! // Writing: a chunked copy, split at 5000 bytes, which verifies and reads back the same.
//! let tmp = tempfile::tempdir()?;
//! let out = tmp.path().join("split");
//! let report = split_dir(&dir, &out, &WriteOptions::default().with_max_size(5000), &|_| {})?;
//! assert!(report.written.chunked);
//! let copy = SavedModel::open(&out)?;
//! assert_eq!(copy.format(), ModelFormat::Cpb);
//! assert!(verify::verify_model(&copy).faults.is_empty());
//! // The same message: compared in canonical form, because this model, written by
//! // TensorFlow's Python, is mostly not in it, and a split is made of that form.
//! let schema = unbound_canonical::Schema::new(&unbound_savedmodel::dir::saved_model_descriptor()?);
//! let canonical = |m: &SavedModel| -> Result<Vec<u8>, Box<dyn std::error::Error>> {
//!     let bytes = m.read()?.message.to_vec()?;
//!     Ok(unbound_canonical::encode_to_vec(&schema, schema.root(), &[&bytes])?)
//! };
//! assert_eq!(canonical(&copy)?, canonical(&model)?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Invariants: the model file and everything in the directory are untrusted input (sizes,
//! nesting and counts are checked before use; special files are refused before they are
//! opened); outputs never overwrite anything and appear atomically; unknown fields and unknown
//! files pass through unchanged.

#![forbid(unsafe_code)]

mod carry_over;
pub mod dir;
pub mod error;
pub mod fingerprint;
mod format;
mod recent_bytes;
pub mod rewrite;
pub mod scan;
mod shared_cpb;
pub mod show;
pub mod split;
pub mod vars;
pub mod verify;
pub mod write;

pub use dir::{model_file, ModelFile, SavedModel};
pub use error::{Fault, Result, SavedModelError};
pub use format::{ModelFormat, FINGERPRINT_FILE, MAX_PROTO_SIZE};

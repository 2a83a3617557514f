//! `unbound-externalize`: a SavedModel's large constants moved into variables, so that a model
//! too big for one protobuf (2 GiB) becomes a plain `saved_model.pb` of kilobytes beside a
//! checkpoint, which every TensorFlow loader reads: the C++ `LoadSavedModel` (TensorFlow
//! Serving), `tf.saved_model.load`, the TF1 loader. Most models past 2 GiB are big because of
//! constants (frozen weights, embedded tables), and a constant can live in a variable instead.
//!
//! [`externalize`] reads any model unbound reads (`.pb` or `.cpb`, TF1 or TF2), verified first
//! as every writer does, and for every `Const` whose value is at least
//! [`ExternalizeOptions::min_size`] bytes, in the graph and in every function of every
//! MetaGraphDef:
//!
//! 1. the value becomes a new resource variable, wired as TensorFlow would have written it
//!    (`graph_edit`): a graph-level `VarHandleOp`; the `Const` replaced by an `Identity` of a
//!    `ReadVariableOp` under the same name; inside functions a new captured resource argument,
//!    fed at every call site, nested calls included;
//! 2. the restore path is extended (`restore`): the `SaverDef`'s restore op restores the new
//!    variables, a TF1 `Saver`'s save op saves them (a `SaverDef` is made for a graph without
//!    one), and a TF2 model's object graph
//!    gets them (`SavedVariable`s bound to the concrete functions that capture them);
//! 3. the values are written to `OUT/variables/` beside the model's own variables
//!    (`variables`: the source's data shards carried over byte for byte, the new values
//!    streamed into one more shard), with the model file, atomically, with a fingerprint
//!    computed from the bytes written. The values of a `.cpb`'s chunks too large to keep
//!    decoded are written as the verification streams those chunks (`spool`): a
//!    compressed source is decompressed once.
//!
//! The result is refused, saying why, when it would still pass 2 GiB. Names say where each
//! value came from: `externalized/FUNCTION/NODE` (or `externalized/NODE` for the graph).
//!
//! ```
//! use std::path::Path;
//! use unbound_externalize::{externalize, ExternalizeOptions};
//!
//! let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/models/tf1_large_consts");
//! let tmp = tempfile::tempdir()?;
//! let options = ExternalizeOptions { min_size: 1000, dry_run: false };
//! let report = externalize(&src, &tmp.path().join("out"), &options)?;
//! assert!(!report.moved.is_empty());
//! assert!(report.model_bytes_after < report.model_bytes_before);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The model is read once, at the wire level (`strip`): the constants' values stay where they
//! are read (a slice of the mapped `.pb`, a lazy reference into the `.cpb`'s records, streamed
//! into the checkpoint: the model is never merged into memory) and the rest is decoded; the
//! rewritten model is written over the one read (`splice`), so every message the rewrite does
//! not change is written as read, and the fields our schema does not know (a newer
//! TensorFlow's) are kept at every depth.
//!
//! Invariants: the model is untrusted input (nothing here panics on its contents); the value of
//! a constant is never copied into memory whole; the output appears atomically or not at all,
//! and is never written over an existing path; unknown fields are passed through.

#![forbid(unsafe_code)]

mod error;
mod graph_edit;
mod inline;
mod one_pass;
mod report;
mod restore;
mod splice;
mod spool;
mod strip;
mod variables;

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use prost::Message;
use unbound_savedmodel::write::{write_model_dir_with_variables, WriteOptions};
use unbound_savedmodel::{SavedModel, SavedModelError, MAX_PROTO_SIZE};

pub use error::{ExternalizeError, Result};
pub use inline::{inline, InlineReport, InlinedVariable, KeptVariable};
pub use report::{ExternalizeReport, KeptConstant, MovedConstant};

/// The default minimum size of a constant moved: 1 MiB.
pub const DEFAULT_MIN_SIZE: u64 = 1 << 20;

/// What [`externalize`] moves, and whether it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExternalizeOptions {
    /// A constant moves when its value is at least this many bytes.
    pub min_size: u64,
    /// Report what would move, and the resulting model size; write nothing.
    pub dry_run: bool,
}

impl Default for ExternalizeOptions {
    fn default() -> Self {
        Self {
            min_size: DEFAULT_MIN_SIZE,
            dry_run: false,
        }
    }
}

/// Writes `out` (which must not exist) as the SavedModel in `src` with its constants of at
/// least `options.min_size` bytes moved into variables, as the crate doc says; with
/// `options.dry_run`, only reports what would move.
pub fn externalize(
    src: &Path,
    out: &Path,
    options: &ExternalizeOptions,
) -> Result<ExternalizeReport> {
    if !options.dry_run && std::fs::symlink_metadata(out).is_ok() {
        return Err(SavedModelError::OutputExists {
            path: out.to_path_buf(),
        }
        .into());
    }
    let opened = SavedModel::open(src)?;
    let source_name = src.display().to_string();
    let spool = if options.dry_run {
        None
    } else {
        Some(spool::Spool::beside(out, options.min_size.max(1))?)
    };
    let read = read_source(&opened, &source_name, true, spool.clone())?;
    let spooled = spool.map(spool::Spool::into_values).transpose()?;
    let model_bytes_before = read.source.root.encoded_len();
    let mut model = read.model;
    let mut taken: HashSet<String> = HashSet::new();
    let mut report = ExternalizeReport {
        moved: Vec::new(),
        kept: Vec::new(),
        model_bytes_before,
        model_bytes_after: 0,
        moved_bytes: 0,
        written: false,
    };
    let mut pending = Vec::new();
    let mut object_based_graphs = 0;
    let object_based = model.meta_graphs.iter().any(|m| {
        m.object_graph_def
            .as_ref()
            .is_some_and(|g| !g.nodes.is_empty())
    });
    for (index, meta) in model.meta_graphs.iter_mut().enumerate() {
        let name = format!("{source_name} (meta_graphs[{index}])");
        let mut graph = meta.graph_def.take().unwrap_or_default();
        let saver_roots: Vec<String> = meta
            .saver_def
            .iter()
            .flat_map(|s| [&s.restore_op_name, &s.save_tensor_name])
            .filter(|n| !n.is_empty())
            .map(|n| graph_edit::tensor_node(n).to_string())
            .collect();
        let outcome = graph_edit::externalize_graph(
            &mut graph,
            &read.source.values,
            index,
            &saver_roots,
            options.min_size,
            &mut taken,
            &name,
        )?;
        meta.graph_def = Some(graph);
        report.kept.extend(outcome.kept);
        if outcome.variables.is_empty() {
            continue;
        }
        if restore::extend_object_graph(meta, &outcome.variables, &outcome.function_variables) {
            object_based_graphs += 1;
            if object_based_graphs > 1 {
                return Err(ExternalizeError::invalid(
                    &name,
                    "a second MetaGraphDef with an object graph and constants to move: the one \
                     checkpoint's object graph can describe only one",
                ));
            }
        }
        let keys: Vec<String> = outcome
            .variables
            .iter()
            .map(|v| variables::checkpoint_key(v, object_based))
            .collect();
        restore::extend_restore(meta, &outcome.variables, &keys, &mut taken, &name)?;
        for (var, key) in outcome.variables.into_iter().zip(keys) {
            report.moved_bytes += var.bytes;
            report.moved.push(MovedConstant {
                meta_graph: index,
                function: var.function.clone(),
                node: var.node.clone(),
                dtype: unbound_bundle::dtype::python_name(var.dtype),
                shape: var.shape.clone(),
                bytes: var.bytes,
                variable: var.name.clone(),
                checkpoint_key: key.clone(),
            });
            pending.push((key, var));
        }
    }
    let wire = write_over(&read.source, &model, &source_name)?;
    drop(model);
    let encoded = wire.encoded_len();
    report.model_bytes_after = encoded;
    if encoded > MAX_PROTO_SIZE {
        let hint = if options.min_size > 1 {
            format!(
                " (a smaller --min-size than {} may move more)",
                options.min_size
            )
        } else {
            String::new()
        };
        return Err(ExternalizeError::TooLarge {
            path: out.to_path_buf(),
            size: encoded,
            limit: MAX_PROTO_SIZE,
            hint,
        });
    }
    if options.dry_run {
        return Ok(report);
    }
    let pending = variables::PendingVariables {
        source: opened
            .variables_index()
            .map(|_| unbound_bundle::saved_model_prefix(src)),
        variables: pending,
        object_based,
        spooled,
    };
    write_model_dir_with_variables(
        src,
        out,
        wire,
        &WriteOptions::default().with_max_size(u64::MAX),
        Box::new(move |dir| variables::write_variables(dir, pending).map_err(into_saved_model)),
    )?;
    report.written = true;
    Ok(report)
}

/// A model read for a rewrite: as read ([`strip::Source`]), and decoded.
pub(crate) struct ReadModel {
    /// The model as read.
    pub source: strip::Source,
    /// The model decoded (with markers for large values when stripped).
    pub model: unbound_proto::tensorflow::SavedModel,
}

/// Reads and verifies the model of `opened` (as every writer does), the large values of its
/// constants left where they are read when `strip_values` ([`strip`]), and decodes it.
pub(crate) fn read_source(
    opened: &SavedModel,
    source_name: &str,
    strip_values: bool,
    spool: Option<Arc<spool::Spool>>,
) -> Result<ReadModel> {
    let root = match spool {
        Some(spool) => unbound_savedmodel::verify::verified_model_tapped(opened, spool)?,
        None => unbound_savedmodel::verify::verified_model(opened)?,
    };
    let source = if strip_values {
        strip::strip(root, source_name)?
    } else {
        strip::Source {
            stripped: root.clone(),
            root,
            values: strip::Values::none(),
        }
    };
    let bytes = source
        .stripped
        .to_vec()
        .map_err(|e| ExternalizeError::SavedModel(e.into()))?;
    let model = unbound_wire::decode_lenient::<unbound_proto::tensorflow::SavedModel>(
        Bytes::from(bytes),
        unbound_proto::descriptor_pool(),
    )
    .map_err(|e| ExternalizeError::invalid(source_name, format!("not a SavedModel: {e}")))?;
    Ok(ReadModel { source, model })
}

/// The rewritten `model` written over the source read ([`splice`]): what it did not change
/// is as read, unknown fields included.
pub(crate) fn write_over(
    source: &strip::Source,
    model: &unbound_proto::tensorflow::SavedModel,
    source_name: &str,
) -> Result<unbound_wire::WireMessage> {
    let desc = unbound_savedmodel::dir::saved_model_descriptor()?;
    let encoded = Bytes::from(model.encode_to_vec());
    let original = splice::Original {
        root: &source.root,
        stripped: &source.stripped,
    };
    splice::splice(original, &encoded, &desc, &source.values).map_err(|e| {
        ExternalizeError::invalid(
            source_name,
            format!("the rewritten model could not be written over the source: {e}"),
        )
    })
}

/// An error of this crate as the SavedModel writer's callback returns it.
fn into_saved_model(e: ExternalizeError) -> SavedModelError {
    match e {
        ExternalizeError::SavedModel(e) => e,
        ExternalizeError::Bundle(e) => SavedModelError::Bundle(e),
        other => SavedModelError::invalid("externalize", other.to_string()),
    }
}

//! [`TpuError`]: what can go wrong listing or changing tag-sets and rewriting a model for TPU
//! inference (or back to CPU). Every variant names the model directory and the fault.

use std::path::PathBuf;

use unbound_savedmodel::SavedModelError;

/// An error of the tag-set operations or the TPU rewrite. Nothing is written when one occurs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TpuError {
    /// The SavedModel could not be read or the result written.
    #[error(transparent)]
    Model(#[from] SavedModelError),
    /// A part of the model does not decode as what the schema says it is.
    #[error("{}: {part} is not valid protobuf: {fault}", dir.display())]
    Decode {
        /// The model directory.
        dir: PathBuf,
        /// Which part (`meta_graphs[0].graph_def.node[3]`, ...).
        part: String,
        /// The decoder's message.
        fault: String,
    },
    /// The model has no MetaGraphDef at all.
    #[error("{}: the SavedModel has no MetaGraphDef", dir.display())]
    NoMetaGraph {
        /// The model directory.
        dir: PathBuf,
    },
    /// No MetaGraphDef has the tag-set asked for.
    #[error("{}: no MetaGraphDef is tagged {{{}}} (it has {})", dir.display(), tags.join(","), describe_tag_sets(available))]
    NoSuchTagSet {
        /// The model directory.
        dir: PathBuf,
        /// The tag-set asked for.
        tags: Vec<String>,
        /// The tag-sets the model has.
        available: Vec<Vec<String>>,
    },
    /// Several MetaGraphDefs could be meant and none was named.
    #[error("{}: the SavedModel has {count} MetaGraphDefs and none is tagged {{serve}}: name one with --source-tags", dir.display())]
    AmbiguousMetaGraph {
        /// The model directory.
        dir: PathBuf,
        /// How many MetaGraphDefs it has.
        count: usize,
    },
    /// The tag-set to create already exists (loaders match tag-sets exactly, so two equal
    /// ones would make the model ambiguous).
    #[error("{}: a MetaGraphDef tagged {{{}}} already exists", dir.display(), tags.join(","))]
    TagSetExists {
        /// The model directory.
        dir: PathBuf,
        /// The tag-set.
        tags: Vec<String>,
    },
    /// A tag-set argument is empty or holds an empty or repeated tag.
    #[error("bad tag-set {text:?}: {fault}")]
    BadTagSet {
        /// The text given.
        text: String,
        /// What is wrong with it.
        fault: String,
    },
    /// `--function` named no alias, concrete function or signature of the model.
    #[error("{}: no function alias, concrete function or signature is named {name:?} ({hint})", dir.display())]
    UnknownFunction {
        /// The model directory.
        dir: PathBuf,
        /// The name given.
        name: String,
        /// What names exist.
        hint: String,
    },
    /// The chosen functions cannot be rewritten as asked.
    #[error("{}: {fault}", dir.display())]
    Unsupported {
        /// The model directory.
        dir: PathBuf,
        /// What prevents the rewrite.
        fault: String,
    },
    /// A `--batch` option is malformed.
    #[error("bad --batch {text:?}: {fault}")]
    BadBatchOption {
        /// The text given.
        text: String,
        /// What is wrong with it.
        fault: String,
    },
    /// A structural check of the rewritten graph failed: a defect of the rewrite or of the
    /// input model; nothing was written.
    #[error("{}: the rewritten MetaGraphDef {{{}}} fails a structural check: {fault}", dir.display(), tags.join(","))]
    Check {
        /// The model directory.
        dir: PathBuf,
        /// The MetaGraphDef's tags.
        tags: Vec<String>,
        /// The check that failed and where.
        fault: String,
    },
}

/// `{serve}, {serve,tpu}` or `none`.
fn describe_tag_sets(sets: &[Vec<String>]) -> String {
    if sets.is_empty() {
        return "none".to_string();
    }
    sets.iter()
        .map(|s| format!("{{{}}}", s.join(",")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Results of this crate.
pub type Result<T, E = TpuError> = std::result::Result<T, E>;

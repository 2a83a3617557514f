//! `show`: what a SavedModel directory holds, as `saved_model_cli show --all` reports it (tag-sets,
//! signatures with their inputs and outputs, the ops, the concrete functions with their
//! arguments) plus the format, sizes, library functions, the object graph's concrete functions
//! and variables, assets, `function_aliases` and the checkpoint's keys.
//!
//! Only what is needed is read: a `.pb` is mapped and decoded lazily (the graph's nodes are
//! scanned for their names and ops, tensor contents are never touched), and of a `.cpb` only the
//! chunks other than large `BYTES` chunks (tensor contents) are read and merged.
//!
//! [`SavedModelInfo`] serializes (serde) to the JSON shape `unbound show --json` prints, and
//! [`text::render`] gives the text form.

mod checkpoint;
mod graph;
mod load_order;
pub(crate) mod objects;
mod plain_entries;
pub(crate) mod read;
mod signature;
mod structured;
pub mod text;
pub(crate) mod unmerged;
pub(crate) mod wire;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::dir::SavedModel;
use crate::format::ModelFormat;
use crate::Result;
use unbound_wire::WireMessage;

pub(crate) use graph::ScannedChunks;
pub use objects::saved_object_paths;
pub use structured::ArgValue;

/// Everything `unbound show` reports about a SavedModel directory.
#[derive(Debug, Clone, Serialize)]
pub struct SavedModelInfo {
    /// The directory, as given.
    pub dir: String,
    /// The model file's format (`"pb"`, `"cpb"` or `"pbtxt"` in JSON).
    pub format: ModelFormat,
    /// File name of the model file (`saved_model.pb`, ...).
    pub model_file: String,
    /// Size of the model file in bytes.
    pub model_file_bytes: u64,
    /// Number of chunks of a `.cpb` (`ChunkMetadata.chunks`); `None` for other formats.
    pub chunks: Option<u64>,
    /// `SavedModel.saved_model_schema_version`.
    pub saved_model_schema_version: i64,
    /// Total size of the files under `variables/` (0 when there is none).
    pub variables_bytes: u64,
    /// Number of files under `variables/`.
    pub variables_files: u64,
    /// The MetaGraphs, sorted by tag list as `saved_model_cli` shows them.
    pub meta_graphs: Vec<MetaGraphInfo>,
    /// The checkpoint in `variables/`, when there is one and it can be read.
    pub checkpoint: Option<CheckpointInfo>,
}

/// One MetaGraphDef.
#[derive(Debug, Clone, Serialize)]
pub struct MetaGraphInfo {
    /// `meta_info_def.tags`.
    pub tags: Vec<String>,
    /// `meta_info_def.tensorflow_version`.
    pub tensorflow_version: String,
    /// `meta_info_def.tensorflow_git_version`.
    pub tensorflow_git_version: String,
    /// `meta_info_def.stripped_default_attrs`.
    pub stripped_default_attrs: bool,
    /// `meta_info_def.function_aliases`: alias to function name.
    pub function_aliases: BTreeMap<String, String>,
    /// Number of nodes of `graph_def` (library functions not counted).
    pub graph_nodes: u64,
    /// `graph_def.versions.producer`.
    pub graph_producer: i64,
    /// The ops the graph uses, as `saved_model_cli` lists them (nodes of the graph and of the
    /// library functions they reach; function names excluded), sorted.
    pub ops: Vec<String>,
    /// Names of the functions in `graph_def.library`, in library order.
    pub library_functions: Vec<String>,
    /// Total number of nodes in the library functions.
    pub library_function_nodes: u64,
    /// Signatures by key.
    pub signatures: BTreeMap<String, SignatureInfo>,
    /// `asset_file_def`, in order.
    pub assets: Vec<AssetInfo>,
    /// Keys of `collection_def`, sorted (TF1 models).
    pub collections: Vec<String>,
    /// The object graph (TF2 models); `None` when the MetaGraph has none.
    pub object_graph: Option<ObjectGraphInfo>,
}

/// One SignatureDef.
#[derive(Debug, Clone, Serialize)]
pub struct SignatureInfo {
    /// `method_name`.
    pub method_name: String,
    /// Inputs by key.
    pub inputs: BTreeMap<String, TensorInfoView>,
    /// Outputs by key.
    pub outputs: BTreeMap<String, TensorInfoView>,
    /// `defaults`: default values of optional inputs, by key (dtype and shape of the value).
    pub defaults: BTreeMap<String, TensorInfoView>,
}

/// A `TensorInfo`: a dense tensor name, a sparse tensor's three tensors, or a composite
/// tensor's components.
#[derive(Debug, Clone, Serialize)]
pub struct TensorInfoView {
    /// `DT_FLOAT`, ... (the DataType enum name; `DT_<number>` for unknown values).
    pub dtype: String,
    /// Dimensions, `-1` for unknown ones; `None` for unknown rank.
    pub shape: Option<Vec<i64>>,
    /// The tensor name (`"x:0"`); empty for sparse and composite tensors.
    pub name: String,
    /// `"name"`, `"coo_sparse"`, `"composite_tensor"` or `"none"`.
    pub encoding: String,
    /// For `coo_sparse`: the values, indices and dense shape tensor names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coo_sparse: Option<[String; 3]>,
    /// For `composite_tensor`: its components.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<TensorInfoView>,
}

/// One `AssetFileDef`.
#[derive(Debug, Clone, Serialize)]
pub struct AssetInfo {
    /// File name relative to `assets/`.
    pub filename: String,
    /// The tensor that holds the asset path.
    pub tensor_name: String,
}

/// The `SavedObjectGraph` of a MetaGraph.
#[derive(Debug, Clone, Serialize)]
pub struct ObjectGraphInfo {
    /// Number of object nodes.
    pub nodes: u64,
    /// `concrete_functions`, sorted by name.
    pub concrete_functions: Vec<ConcreteFunctionInfo>,
    /// The functions reachable as children of the root object, sorted by name: what
    /// `saved_model_cli show --all` lists under "Concrete Functions".
    pub functions: Vec<FunctionInfo>,
    /// Variables (`SavedVariable` nodes), in node order.
    pub variables: Vec<VariableInfo>,
}

/// One entry of `SavedObjectGraph.concrete_functions`.
#[derive(Debug, Clone, Serialize)]
pub struct ConcreteFunctionInfo {
    /// The function's name in the library.
    pub name: String,
    /// Number of `bound_inputs` (captured variables and resources).
    pub bound_inputs: u64,
}

/// A function child of the root object (a `tf.function` or a bare concrete function).
#[derive(Debug, Clone, Serialize)]
pub struct FunctionInfo {
    /// The child's name (the attribute name on the root object).
    pub name: String,
    /// Its concrete functions, sorted by name.
    pub concrete_functions: Vec<CallableInfo>,
}

/// One concrete function of a [`FunctionInfo`] with its input signature.
#[derive(Debug, Clone, Serialize)]
pub struct CallableInfo {
    /// The concrete function's name.
    pub name: String,
    /// Positional arguments (`structured_input_signature[0]`), or for bare concrete functions
    /// without one, the argument keywords as strings.
    pub args: Vec<ArgValue>,
    /// Keyword arguments (`structured_input_signature[1]`), by name.
    pub kwargs: BTreeMap<String, ArgValue>,
}

/// One variable of the object graph.
#[derive(Debug, Clone, Serialize)]
pub struct VariableInfo {
    /// The object path from the root object: child names joined with `/` (as `unbound vars`
    /// shows them).
    pub path: String,
    /// `SavedVariable.name`.
    pub name: String,
    /// DataType enum name.
    pub dtype: String,
    /// Dimensions, `None` for unknown rank.
    pub shape: Option<Vec<i64>>,
    /// `SavedVariable.trainable`.
    pub trainable: bool,
    /// The variable's key in the checkpoint (from the checkpoint's object graph), when known.
    pub checkpoint_key: Option<String>,
}

/// The tensor bundle in `variables/`.
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointInfo {
    /// The bundle prefix, relative to the directory (`variables/variables`).
    pub prefix: String,
    /// Number of data shards.
    pub shards: u64,
    /// Every key but the header, sorted.
    pub keys: Vec<CheckpointKey>,
}

/// One key of the checkpoint.
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointKey {
    /// The key (`w/.ATTRIBUTES/VARIABLE_VALUE`, `_CHECKPOINTABLE_OBJECT_GRAPH`, ...).
    pub key: String,
    /// DataType enum name.
    pub dtype: String,
    /// Dimensions.
    pub shape: Option<Vec<i64>>,
    /// Size of the stored value in bytes.
    pub bytes: u64,
}

/// Reads what `unbound show` reports about the SavedModel in `dir`.
pub fn show(dir: &Path) -> Result<SavedModelInfo> {
    show_model(&SavedModel::open(dir)?)
}

/// [`show`] of a SavedModel already opened.
pub fn show_model(model: &SavedModel) -> Result<SavedModelInfo> {
    show_parts(model.dir(), read::read_model(model)?, None)
}

/// [`show`] of the opened SavedModel `opened` whose `.cpb` model file was read already
/// (whole, into `model`, with `chunks` chunks): what `verify` asks, so the chunks are not
/// merged again. What `scanned` found of the chunks `model` leaves unmerged is taken instead
/// of reading them again.
pub(crate) fn show_merged_cpb(
    opened: &SavedModel,
    model: &WireMessage,
    chunks: u64,
    scanned: Option<&ScannedChunks>,
) -> Result<SavedModelInfo> {
    let path = &opened.model_file().path;
    show_parts(
        opened.dir(),
        read::model_parts(path, ModelFormat::Cpb, model, Some(chunks))?,
        scanned,
    )
}

/// What `show` reports, from the model's parts (and what `scanned` found of chunks they leave
/// unmerged).
fn show_parts(
    dir: &Path,
    model: read::ModelParts<'_>,
    scanned: Option<&ScannedChunks>,
) -> Result<SavedModelInfo> {
    let (variables_bytes, variables_files) = dir_size(&dir.join("variables"));
    let checkpoint = checkpoint::read_checkpoint(dir);
    let mut meta_graphs = Vec::new();
    // Errors name the model file with its directory, as every error names its input.
    let model_path = dir.join(&model.file_name).display().to_string();
    for mg in &model.meta_graphs {
        let mut info = read::meta_graph_info(mg, &model_path, scanned)?;
        if let (Some(og), Some(ck)) = (&mut info.object_graph, &checkpoint) {
            objects::attach_checkpoint_keys(og, &ck.object_graph);
        }
        meta_graphs.push(info);
    }
    meta_graphs.sort_by(|a, b| a.tags.cmp(&b.tags));
    Ok(SavedModelInfo {
        dir: dir.display().to_string(),
        format: model.format,
        model_file: model.file_name.clone(),
        model_file_bytes: model.file_bytes,
        chunks: model.chunks,
        saved_model_schema_version: model.schema_version,
        variables_bytes,
        variables_files,
        meta_graphs,
        checkpoint: checkpoint.map(|c| c.info),
    })
}

/// Total size and number of the regular files under `dir` (recursively, symbolic links
/// followed as every command follows them; a link back to a directory being counted is
/// counted once); zeros when absent.
fn dir_size(dir: &Path) -> (u64, u64) {
    let mut ancestors = Vec::new();
    dir_size_within(dir, &mut ancestors)
}

/// [`dir_size`] of `dir`, inside the directories `ancestors` (their real paths).
fn dir_size_within(dir: &Path, ancestors: &mut Vec<PathBuf>) -> (u64, u64) {
    let Ok(real) = std::fs::canonicalize(dir) else {
        return (0, 0);
    };
    if ancestors.contains(&real) {
        return (0, 0);
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (0, 0);
    };
    ancestors.push(real);
    let (mut bytes, mut files) = (0, 0);
    for entry in entries.flatten() {
        let Ok(meta) = std::fs::metadata(entry.path()) else {
            continue;
        };
        if meta.is_dir() {
            let (b, f) = dir_size_within(&entry.path(), ancestors);
            bytes += b;
            files += f;
        } else if meta.is_file() {
            bytes += meta.len();
            files += 1;
        }
    }
    ancestors.pop();
    (bytes, files)
}

//! Reading only what `show` needs: the top of a mapped `.pb`, or the chunks of a `.cpb` other
//! than large `BYTES` chunks (tensor contents), merged.

use std::borrow::Cow;
use std::path::Path;

use unbound_chunked::{merger::MAX_NESTING, Merger};
use unbound_proto::fields::tensorflow::{meta_graph_def, saved_model};
use unbound_proto::tensorflow::proto_splitter::{
    chunk_info::Type as ChunkType, ChunkInfo, ChunkedField, ChunkedMessage,
};
use unbound_proto::tensorflow::MetaGraphDef;
use unbound_wire::{WireMessage, WireValue};

use super::unmerged::{leavable, LeavingGraphChunks};
use super::{graph, objects, signature, wire, AssetInfo, MetaGraphInfo};
use crate::dir::{saved_model_descriptor, SavedModel};
use crate::format::ModelFormat;
use crate::{Result, SavedModelError};

/// `BYTES` chunks larger than this are not read: they hold tensor contents (or other large
/// strings) that `show` does not report.
const LARGE_BYTES_CHUNK: u64 = 64 * 1024;

/// The parts of a model file `show` works from.
pub struct ModelParts<'a> {
    /// The model file's format.
    pub format: ModelFormat,
    /// The model file's name.
    pub file_name: String,
    /// Its size.
    pub file_bytes: u64,
    /// Chunk count of a `.cpb`.
    pub chunks: Option<u64>,
    /// `saved_model_schema_version`.
    pub schema_version: i64,
    /// The MetaGraphDefs, decoded one level (nested messages may still be bytes); borrowed
    /// from a model already read.
    pub meta_graphs: Vec<Cow<'a, WireMessage>>,
}

/// Reads the model file of `model` (its `.cpb`, else `.pb`, else `.pbtxt`) as cheaply as
/// possible for `show`: of a `.cpb`, the large chunks of its graphs are left unmerged
/// ([`super::unmerged`]), for the graph's scan to read one at a time.
pub fn read_model(model: &SavedModel) -> Result<ModelParts<'static>> {
    read_model_leaving(model, true)
}

/// [`read_model`] with every chunk merged: for a reader that walks the graph's nodes as
/// messages (`scan`).
pub fn read_model_whole(model: &SavedModel) -> Result<ModelParts<'static>> {
    read_model_leaving(model, false)
}

/// [`read_model`], leaving a `.cpb`'s graph and library chunks unmerged
/// ([`super::unmerged`]) or not.
pub(crate) fn read_model_leaving(model: &SavedModel, leave: bool) -> Result<ModelParts<'static>> {
    let file = model.model_file();
    let path = &file.path;
    let desc = saved_model_descriptor()?;
    let (root, chunks) = match file.format {
        ModelFormat::Cpb => {
            let (mut chunks, metadata) = model.chunks()?;
            let tree = metadata.message.clone().unwrap_or_default();
            let pruned = without_large_bytes(&tree, &metadata.chunks, 0);
            let root = match leave.then(|| leavable(&pruned, &desc)) {
                // The chunks left are read by the graph's scan, on every core: streaming
                // them ahead of the merge would read them for nothing.
                Some(leave) if !leave.is_empty() => {
                    // Opening the chunks read the header of every 64 KiB block, and the
                    // kernel mapped the pages around each: the whole file, resident to the
                    // end. Each chunk is mapped again when it is read (and released once
                    // decoded: `unmerged.rs`), so resident memory holds a few chunks.
                    if let Ok(data) = model.data() {
                        unbound_io::release_pages(&data);
                    }
                    Merger::new(&LeavingGraphChunks {
                        chunks: &chunks,
                        leave,
                    })
                    .merge(&desc, &pruned)?
                }
                _ => {
                    chunks.stream_ahead(&desc, &pruned);
                    Merger::new(&chunks).merge(&desc, &pruned)?
                }
            };
            (root, Some(metadata.chunks.len() as u64))
        }
        ModelFormat::Pb => (model.read_pb(&desc)?, None),
        ModelFormat::Pbtxt => (model.read_text(&desc)?, None),
    };
    let parts = model_parts(path, file.format, &root, chunks)?;
    Ok(ModelParts {
        meta_graphs: parts
            .meta_graphs
            .into_iter()
            .map(|m| Cow::Owned(m.into_owned()))
            .collect(),
        ..parts
    })
}

/// The parts of `root`, the model read from `path` (of `format`, with `chunks` chunks for a
/// `.cpb`): its MetaGraphDefs borrowed where they are already parsed.
pub fn model_parts<'a>(
    path: &Path,
    format: ModelFormat,
    root: &'a WireMessage,
    chunks: Option<u64>,
) -> Result<ModelParts<'a>> {
    let file_bytes = std::fs::metadata(path)
        .map_err(|e| SavedModelError::io(path, e))?
        .len();
    let name = path.display().to_string();
    // As `wire::messages` reads them, borrowing those already parsed.
    let mut meta_graphs = Vec::new();
    for f in &root.fields {
        if f.number != saved_model::META_GRAPHS {
            continue;
        }
        meta_graphs.push(match &f.value {
            WireValue::Message(m) => Cow::Borrowed(m),
            WireValue::Bytes(p) => Cow::Owned(wire::parse(p, &name)?),
            // A known number of another wire type: an unknown field to protobuf C++.
            _ => continue,
        });
    }
    Ok(ModelParts {
        format,
        file_name: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        file_bytes,
        chunks,
        schema_version: wire::varint(root, saved_model::SAVED_MODEL_SCHEMA_VERSION) as i64,
        meta_graphs,
    })
}

/// `cm` without the chunked fields whose chunk is a large `BYTES` chunk.
pub fn without_large_bytes(
    cm: &ChunkedMessage,
    infos: &[ChunkInfo],
    depth: usize,
) -> ChunkedMessage {
    if depth > MAX_NESTING {
        // The Merger refuses such nesting anyway; keep it for it to report.
        return cm.clone();
    }
    let large = |cf: &ChunkedField| {
        cf.message
            .as_ref()
            .and_then(|c| c.chunk_index)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| infos.get(i))
            .is_some_and(|info| {
                info.r#type == ChunkType::Bytes as i32 && info.size > LARGE_BYTES_CHUNK
            })
    };
    ChunkedMessage {
        chunk_index: cm.chunk_index,
        chunked_fields: cm
            .chunked_fields
            .iter()
            .filter(|cf| !large(cf))
            .map(|cf| ChunkedField {
                field_tag: cf.field_tag.clone(),
                message: cf
                    .message
                    .as_ref()
                    .map(|c| without_large_bytes(c, infos, depth + 1)),
            })
            .collect(),
    }
}

/// Everything `show` reports about one MetaGraphDef.
/// What `scanned` found of the graph's chunks left unmerged is taken instead of reading them
/// again.
pub(crate) fn meta_graph_info(
    mg: &WireMessage,
    file: &str,
    scanned: Option<&graph::ScannedChunks>,
) -> Result<MetaGraphInfo> {
    let small = unbound_wire::decode_lenient::<MetaGraphDef>(
        wire::encode_without(mg, meta_graph_def::GRAPH_DEF)?,
        unbound_proto::descriptor_pool(),
    )
    .map_err(|e| SavedModelError::invalid(file, format!("MetaGraphDef does not decode: {e}")))?;
    let stats = graph::graph_stats(mg, file, scanned)?;
    let info = small.meta_info_def.clone().unwrap_or_default();
    let mut collections: Vec<String> = small.collection_def.keys().cloned().collect();
    collections.sort();
    Ok(MetaGraphInfo {
        tags: info.tags,
        tensorflow_version: info.tensorflow_version,
        tensorflow_git_version: info.tensorflow_git_version,
        stripped_default_attrs: info.stripped_default_attrs,
        function_aliases: info.function_aliases.into_iter().collect(),
        graph_nodes: stats.nodes,
        graph_producer: stats.producer,
        ops: stats.ops,
        library_functions: stats.functions,
        library_function_nodes: stats.function_nodes,
        signatures: small
            .signature_def
            .iter()
            .map(|(k, s)| (k.clone(), signature::signature_info(s)))
            .collect(),
        assets: small
            .asset_file_def
            .iter()
            .map(|a| AssetInfo {
                filename: a.filename.clone(),
                tensor_name: a
                    .tensor_info
                    .as_ref()
                    .map(|t| signature::tensor_info(t).name)
                    .unwrap_or_default(),
            })
            .collect(),
        collections,
        object_graph: small
            .object_graph_def
            .as_ref()
            .map(|og| objects::object_graph(og, &stats.load_order)),
    })
}

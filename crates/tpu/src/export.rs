//! The commands as library calls: [`export_tpu`] (add or make the `{serve, tpu}` MetaGraphDef),
//! [`export_cpu`] (the reverse rewrite of every MetaGraphDef) and [`functions`] (the
//! candidates). Each reads the model, rewrites, checks the result structurally
//! ([`crate::check`]) and only then writes, atomically, with a fresh fingerprint; a dry run
//! stops before writing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use unbound_proto::fields::tensorflow::meta_graph_def;
use unbound_records::WriterOptions;
use unbound_savedmodel::write::SplitReport;

use crate::check::check_graph;
use crate::error::{Result, TpuError};
use crate::model::{DecodedMeta, Graph, Model};
use crate::oplist::stripped_op_list;
use crate::options::{BatchOptions, TpuOptions};
use crate::rewrite::{rewrite_for_tpu, RewrittenFunction};
use crate::select::{list_functions, select_functions, FunctionInfo};
use crate::tags::{find, refuse_existing};
use crate::to_cpu::{rewrite_to_cpu, CpuCounts};

/// What to export and how.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// Aliases, concrete function names or signature names to run on TPU; empty: every
    /// signature's functions.
    pub functions: Vec<String>,
    /// The tag-set of the TPU MetaGraphDef (`serve,tpu` by default).
    pub tags: Vec<String>,
    /// The MetaGraphDef to rewrite; `None`: the one tagged `{serve}`, or the only one.
    pub source_tags: Option<Vec<String>>,
    /// Replace the source MetaGraphDef instead of adding one beside it. The TPU MetaGraphDef
    /// then has no object graph, so that TensorFlow's TF2 loader runs its signatures rather
    /// than restoring the original functions (it does that only for a model of one
    /// MetaGraphDef with an object graph; with two it never does).
    pub tpu_only: bool,
    /// Cluster and metadata options.
    pub tpu: TpuOptions,
    /// Batching, per function or for all.
    pub batch: Vec<BatchOptions>,
    /// Stop before writing.
    pub dry_run: bool,
    /// Split the written model when it reaches this many bytes (every MetaGraphDef's graph,
    /// see [`Model::write`](crate::model::Model::write)).
    pub max_size: u64,
    /// Record options of a split model.
    pub writer: WriterOptions,
}

/// The file an export wrote.
#[derive(Debug, Clone, Serialize)]
pub struct WrittenFile {
    /// Its path.
    pub path: PathBuf,
    /// Whether it is a chunked `.cpb`.
    pub chunked: bool,
    /// Its chunks (0 for a `.pb`).
    pub chunks: usize,
    /// Size of the model proto.
    pub model_bytes: u64,
    /// Other files carried over.
    pub copied_files: usize,
}

impl From<SplitReport> for WrittenFile {
    fn from(r: SplitReport) -> Self {
        Self {
            path: r.written.path,
            chunked: r.written.chunked,
            chunks: r.written.chunks,
            model_bytes: r.model_bytes,
            copied_files: r.copied_files,
        }
    }
}

/// What the graph rewrite changed.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct GraphChanges {
    /// Top-level nodes added.
    pub nodes_added: usize,
    /// Top-level nodes changed.
    pub nodes_changed: usize,
    /// Top-level nodes removed.
    pub nodes_removed: usize,
    /// Library functions added.
    pub functions_added: usize,
    /// Library functions changed.
    pub functions_changed: usize,
}

impl GraphChanges {
    fn of(graph: &Graph) -> Self {
        let (nodes_added, nodes_changed, nodes_removed, functions_added, functions_changed) =
            graph.change_counts();
        Self {
            nodes_added,
            nodes_changed,
            nodes_removed,
            functions_added,
            functions_changed,
        }
    }

    fn any(&self) -> bool {
        *self != Self::default()
    }
}

/// What [`export_tpu`] did (or, in a dry run, would do).
#[derive(Debug, Clone, Serialize)]
pub struct ExportReport {
    /// The tags of the MetaGraphDef rewritten.
    pub source_tags: Vec<String>,
    /// The tags of the TPU MetaGraphDef.
    pub tags: Vec<String>,
    /// Whether the source MetaGraphDef was replaced (else kept beside the new one).
    pub tpu_only: bool,
    /// Each chosen function and what became of it.
    pub functions: Vec<RewrittenFunction>,
    /// The graph changes.
    pub changes: GraphChanges,
    /// The output's tag-sets, in order.
    pub tag_sets: Vec<Vec<String>>,
    /// Ops of the TPU MetaGraphDef's recomputed stripped op list.
    pub ops: Vec<String>,
    /// What was written; `None` in a dry run.
    pub written: Option<WrittenFile>,
}

/// Exports the model in `src` for TPU inference into `out` (which must not exist).
pub fn export_tpu(src: &Path, out: &Path, options: &ExportOptions) -> Result<ExportReport> {
    let model = Model::open_verified(src)?;
    let tag_sets = model.tag_sets()?;
    let index = source_index(src, &tag_sets, options.source_tags.as_deref())?;
    let except = options.tpu_only.then_some(index);
    refuse_existing(src, &tag_sets, &options.tags, except)?;
    let DecodedMeta { info, mut graph } = model.decode(index)?;
    let chosen = select_functions(src, &info, &graph, &options.functions)?;
    let mut batch: HashMap<String, BatchOptions> = HashMap::new();
    for b in &options.batch {
        let targets = match &b.function {
            None => chosen.clone(),
            Some(name) => select_functions(src, &info, &graph, std::slice::from_ref(name))?,
        };
        for t in targets {
            if !chosen.contains(&t) {
                return Err(TpuError::Unsupported {
                    dir: src.to_path_buf(),
                    fault: format!("--batch names {t}, which is not a function chosen for TPU"),
                });
            }
            batch.insert(t, b.clone());
        }
    }
    let captures: HashMap<String, usize> = info
        .object_graph_def
        .as_ref()
        .map(|o| {
            o.concrete_functions
                .iter()
                .map(|(name, f)| (name.clone(), f.bound_inputs.len()))
                .collect()
        })
        .unwrap_or_default();
    let functions = rewrite_for_tpu(src, &mut graph, &chosen, &options.tpu, &batch, &captures)?;
    let by_batch_fn: HashMap<String, BatchOptions> = functions
        .iter()
        .filter_map(|f| {
            let b = batch.get(&f.function)?;
            Some((f.batch_function.clone()?, b.clone()))
        })
        .collect();
    check_graph(&graph, &by_batch_fn).map_err(|fault| TpuError::Check {
        dir: src.to_path_buf(),
        tags: options.tags.clone(),
        fault: Box::new(fault),
    })?;
    let original_ops = info
        .meta_info_def
        .as_ref()
        .and_then(|m| m.stripped_op_list.as_ref());
    let ops = stripped_op_list(&graph, original_ops);
    let mut meta = model.with_graph(index, &graph)?;
    if options.tpu_only {
        // TensorFlow's TF2 loader restores the functions of a lone MetaGraphDef's object graph
        // (the original, CPU ones) instead of running its graph's signatures; without an object
        // graph it loads the graph as TF1's loader does, which runs the TPU path.
        meta.fields
            .retain(|f| f.number != meta_graph_def::OBJECT_GRAPH_DEF);
    }
    Model::set_tags(&mut meta, &options.tags)?;
    Model::set_stripped_op_list(&mut meta, &ops)?;
    // No size refusal here: the output is written with every MetaGraphDef's graph split
    // (`Model::write`), so a second MetaGraphDef past 2 GiB is chunked like the first; a chunk
    // protobuf could still not parse is refused by the writer.
    let changes = GraphChanges::of(&graph);
    // The decoded graph and meta info hold slices of the mapped input: gone before writing.
    drop(graph);
    drop(info);
    let mut out_sets = tag_sets.clone();
    let mut metas = model.meta_graphs.clone();
    if options.tpu_only {
        metas[index] = meta;
        out_sets[index] = options.tags.clone();
    } else {
        metas.push(meta);
        out_sets.push(options.tags.clone());
    }
    let written = if options.dry_run {
        None
    } else {
        Some(
            model
                .write(metas, out, options.max_size, options.writer)?
                .into(),
        )
    };
    Ok(ExportReport {
        source_tags: tag_sets[index].clone(),
        tags: options.tags.clone(),
        tpu_only: options.tpu_only,
        functions,
        changes,
        tag_sets: out_sets,
        ops: ops.op.into_iter().map(|o| o.name).collect(),
        written,
    })
}

/// What [`export_cpu`] did to one MetaGraphDef.
#[derive(Debug, Clone, Serialize)]
pub struct CpuMetaReport {
    /// Its tags.
    pub tags: Vec<String>,
    /// The node conversions.
    pub counts: CpuCounts,
    /// The graph changes.
    pub changes: GraphChanges,
}

/// What [`export_cpu`] did.
#[derive(Debug, Clone, Serialize)]
pub struct CpuReport {
    /// Per MetaGraphDef.
    pub meta_graphs: Vec<CpuMetaReport>,
    /// What was written; `None` in a dry run.
    pub written: Option<WrittenFile>,
}

/// Writes `out` as the model in `src` with every MetaGraphDef rewritten to run on CPU
/// (tag-sets unchanged). `unbatch` also turns `BatchFunction` into plain calls.
pub fn export_cpu(
    src: &Path,
    out: &Path,
    unbatch: bool,
    dry_run: bool,
    max_size: u64,
    writer: WriterOptions,
) -> Result<CpuReport> {
    let model = Model::open_verified(src)?;
    let tag_sets = model.tag_sets()?;
    if tag_sets.is_empty() {
        return Err(TpuError::NoMetaGraph {
            dir: src.to_path_buf(),
        });
    }
    let mut metas = Vec::new();
    let mut reports = Vec::new();
    for (index, tags) in tag_sets.iter().enumerate() {
        let DecodedMeta { info, mut graph } = model.decode(index)?;
        let counts =
            rewrite_to_cpu(&mut graph, unbatch).map_err(|fault| TpuError::Unsupported {
                dir: src.to_path_buf(),
                fault: fault.to_string(),
            })?;
        let changes = GraphChanges::of(&graph);
        if changes.any() {
            check_graph(&graph, &HashMap::new()).map_err(|fault| TpuError::Check {
                dir: src.to_path_buf(),
                tags: tags.clone(),
                fault: Box::new(fault),
            })?;
            let original_ops = info
                .meta_info_def
                .as_ref()
                .and_then(|m| m.stripped_op_list.as_ref());
            let mut meta = model.with_graph(index, &graph)?;
            Model::set_stripped_op_list(&mut meta, &stripped_op_list(&graph, original_ops))?;
            metas.push(meta);
        } else {
            metas.push(model.meta_graphs[index].clone());
        }
        reports.push(CpuMetaReport {
            tags: tags.clone(),
            counts,
            changes,
        });
    }
    let written = if dry_run {
        None
    } else {
        Some(model.write(metas, out, max_size, writer)?.into())
    };
    Ok(CpuReport {
        meta_graphs: reports,
        written,
    })
}

/// The functions of the MetaGraphDef `source_tags` picks (as [`ExportOptions::source_tags`]),
/// with its tags.
pub fn functions(
    src: &Path,
    source_tags: Option<&[String]>,
) -> Result<(Vec<String>, Vec<FunctionInfo>)> {
    let model = Model::open(src)?;
    let tag_sets = model.tag_sets()?;
    let index = source_index(src, &tag_sets, source_tags)?;
    let DecodedMeta { info, graph } = model.decode(index)?;
    Ok((tag_sets[index].clone(), list_functions(&info, &graph)))
}

/// The MetaGraphDef to rewrite: the one tagged `source_tags`; else the one tagged `{serve}`;
/// else the only one.
fn source_index(
    dir: &Path,
    tag_sets: &[Vec<String>],
    source_tags: Option<&[String]>,
) -> Result<usize> {
    if let Some(tags) = source_tags {
        return find(dir, tag_sets, tags);
    }
    match find(dir, tag_sets, &["serve".to_string()]) {
        Ok(i) => Ok(i),
        Err(TpuError::NoSuchTagSet { .. }) if tag_sets.len() == 1 => Ok(0),
        Err(TpuError::NoSuchTagSet { .. }) => Err(TpuError::AmbiguousMetaGraph {
            dir: dir.to_path_buf(),
            count: tag_sets.len(),
        }),
        Err(e) => Err(e),
    }
}

//! `scan`: the ops of a denylist found in each MetaGraphDef's graph and library functions, as
//! `saved_model_cli scan` looks for them (default denylist `ReadFile`, `WriteFile`,
//! `PrintV2`), with where each is: the graph node, or the function and its node.
//!
//! TensorFlow's scan (`meta_graph.ops_used_by_graph_def`) follows only the functions a node's
//! op or a `PartitionedCall`'s `f` names; this one looks into every function of the library
//! (a `While` body or an `If` branch included), so it finds at least what TensorFlow finds.
//! Nodes are read one level at a time: tensor values are never decoded.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::dir::SavedModel;
use crate::show::read::read_model_whole;
use crate::show::wire::{messages, string};
use crate::{Result, SavedModelError};
use meta_graph_def::meta_info_def;
use unbound_proto::fields::tensorflow::{
    function_def, function_def_library, graph_def, meta_graph_def, node_def, op_def,
};
use unbound_wire::{WireMessage, WireValue};

/// `saved_model_cli scan`'s default denylist (`_OP_DENYLIST`).
pub const DEFAULT_OP_DENYLIST: [&str; 3] = ["ReadFile", "WriteFile", "PrintV2"];

/// One denylisted op found.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    /// The op.
    pub op: String,
    /// The library function holding the node; `None` for a node of the graph itself.
    pub function: Option<String>,
    /// The node's name.
    pub node: String,
}

/// What one MetaGraphDef holds of the denylist.
#[derive(Debug, Clone, Serialize)]
pub struct MetaGraphScan {
    /// Its position in the SavedModel.
    pub index: usize,
    /// Its tags.
    pub tags: Vec<String>,
    /// The denylisted ops found, sorted.
    pub ops: Vec<String>,
    /// Every node running one, graph first, then functions in library order.
    pub findings: Vec<Finding>,
}

/// What `unbound scan` reports.
#[derive(Debug, Clone, Serialize)]
pub struct ScanReport {
    /// The directory, as given.
    pub dir: String,
    /// The ops looked for, sorted.
    pub denylist: Vec<String>,
    /// Each MetaGraphDef scanned.
    pub meta_graphs: Vec<MetaGraphScan>,
    /// Whether any denylisted op was found.
    pub found: bool,
}

/// The repeated string field `number` of `m`.
fn strings(m: &WireMessage, number: u32) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for f in m.fields.iter().filter(|f| f.number == number) {
        if let WireValue::Bytes(p) = &f.value {
            out.push(String::from_utf8_lossy(&p.bytes()?).into_owned());
        }
    }
    Ok(out)
}

/// The denylisted nodes among the `NodeDef`s in field `number` of `m`.
fn scan_nodes(
    m: &WireMessage,
    number: u32,
    function: Option<&str>,
    denylist: &BTreeSet<String>,
    file: &str,
    out: &mut Vec<Finding>,
) -> Result<()> {
    for node in messages(m, number, file) {
        let node = node?;
        let op = string(&node, node_def::OP)?;
        if denylist.contains(&op) {
            out.push(Finding {
                op,
                function: function.map(str::to_string),
                node: string(&node, node_def::NAME)?,
            });
        }
    }
    Ok(())
}

/// Scans the MetaGraphDefs of `model` (those whose tag set is `tags` exactly, when given) for
/// the ops of `denylist`. Fails naming the tags when no MetaGraphDef has them.
pub fn scan(
    model: &SavedModel,
    denylist: &[String],
    tags: Option<&[String]>,
) -> Result<ScanReport> {
    let parts = read_model_whole(model)?;
    let file = parts.file_name.clone();
    let deny: BTreeSet<String> = denylist
        .iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let want: Option<BTreeSet<&str>> = tags.map(|t| {
        t.iter()
            .map(String::as_str)
            .filter(|s| !s.is_empty())
            .collect()
    });
    let mut meta_graphs = Vec::new();
    for (index, mg) in parts.meta_graphs.iter().enumerate() {
        let mut mg_tags = Vec::new();
        for info in messages(mg, meta_graph_def::META_INFO_DEF, &file) {
            mg_tags.extend(strings(&*info?, meta_info_def::TAGS)?);
        }
        if let Some(want) = &want {
            let have: BTreeSet<&str> = mg_tags.iter().map(String::as_str).collect();
            if &have != want {
                continue;
            }
        }
        let mut findings = Vec::new();
        for graph in messages(mg, meta_graph_def::GRAPH_DEF, &file) {
            let graph = graph?;
            scan_nodes(&graph, graph_def::NODE, None, &deny, &file, &mut findings)?;
            for lib in messages(&graph, graph_def::LIBRARY, &file) {
                let lib = lib?;
                for fun in messages(&lib, function_def_library::FUNCTION, &file) {
                    let fun = fun?;
                    let mut name = String::new();
                    for sig in messages(&fun, function_def::SIGNATURE, &file) {
                        name = string(&*sig?, op_def::NAME)?;
                    }
                    scan_nodes(
                        &fun,
                        function_def::NODE_DEF,
                        Some(&name),
                        &deny,
                        &file,
                        &mut findings,
                    )?;
                }
            }
        }
        let ops: BTreeSet<String> = findings.iter().map(|f| f.op.clone()).collect();
        meta_graphs.push(MetaGraphScan {
            index,
            tags: mg_tags,
            ops: ops.into_iter().collect(),
            findings,
        });
    }
    if let (Some(t), true) = (tags, meta_graphs.is_empty()) {
        return Err(SavedModelError::invalid(
            &file,
            format!(
                "no MetaGraphDef has the tag set {:?} (unbound tags lists them)",
                t.join(",")
            ),
        ));
    }
    Ok(ScanReport {
        dir: model.dir().display().to_string(),
        denylist: deny.iter().cloned().collect(),
        found: meta_graphs.iter().any(|m| !m.findings.is_empty()),
        meta_graphs,
    })
}

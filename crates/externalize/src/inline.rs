//! The reverse of externalizing (`unbound externalize --inline`): the variables the
//! signatures only read become constants, as `saved_model_cli freeze_model` users want. Each
//! `ReadVariableOp` of such a variable, in the graph and in every function the resource flows
//! into, becomes a `Const` of the value in the checkpoint (same name; references to its
//! `value` output in functions are renamed to the constant's `output`).
//!
//! A variable is inlined when its key is known from the restore path (a `RestoreV2` whose
//! output an `AssignVariableOp` stores into its handle, in the graph or in the function the
//! `SaverDef`'s restore op calls) and, outside the save and restore path, its resource is only
//! read (`ReadVariableOp`, `VarIsInitializedOp`) or passed to calls by what the signatures run
//! (their outputs, what those depend on, the functions they call; an initializer's assignment
//! run only by an init op does not count): a variable the signatures assign is kept, and so is
//! one reaching a function argument that other call sites feed another variable.
//!
//! The variables, their handles and the restore path stay as they are (the checkpoint is
//! carried over): the signatures no longer depend on them, and every loader still restores
//! them. The model is written over the one read (`crate::splice`: unknown fields kept), as one
//! `saved_model.pb`, or as `saved_model.cpb` when it passes protobuf's 2 GiB.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde::Serialize;
use unbound_bundle::{BundleReader, TensorData};
use unbound_proto::tensorflow::{
    attr_value, AttrValue, FunctionDef, GraphDef, NodeDef, TensorProto,
};
use unbound_savedmodel::write::{write_model_dir, WriteOptions};
use unbound_savedmodel::{SavedModel, SavedModelError, MAX_PROTO_SIZE};

use crate::error::Result;
use crate::graph_edit::{ancestors, tensor_node, type_attr};

/// One variable inlined.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct InlinedVariable {
    /// The MetaGraphDef's position.
    pub meta_graph: usize,
    /// The variable's graph-level handle (`VarHandleOp`).
    pub variable: String,
    /// Its key in the checkpoint.
    pub checkpoint_key: String,
    /// Its dtype (Python's name).
    pub dtype: String,
    /// Its shape.
    pub shape: Vec<i64>,
    /// Bytes of its value.
    pub bytes: u64,
    /// How many reads became constants.
    pub reads: usize,
}

/// A variable left as it is, and why.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct KeptVariable {
    /// The MetaGraphDef's position.
    pub meta_graph: usize,
    /// The variable's handle.
    pub variable: String,
    /// Why it stays a variable.
    pub reason: String,
}

/// What [`inline`] did.
#[derive(Debug, Clone, Serialize)]
pub struct InlineReport {
    /// The variables inlined.
    pub inlined: Vec<InlinedVariable>,
    /// Variables kept.
    pub kept: Vec<KeptVariable>,
    /// Size of the source's model proto.
    pub model_bytes_before: u64,
    /// Size of the model proto written (or that would be).
    pub model_bytes_after: u64,
    /// Whether the model is (or would be) written as `saved_model.cpb` (past 2 GiB).
    pub chunked: bool,
    /// Whether the output was written.
    pub written: bool,
}

/// Ops that use a variable without changing it.
const READ_ONLY_OPS: [&str; 2] = ["ReadVariableOp", "VarIsInitializedOp"];

/// Ops through which a resource passes to a function.
const CALL_OPS: [&str; 2] = ["PartitionedCall", "StatefulPartitionedCall"];

/// Writes `out` as the SavedModel in `src` with the variables its signatures only read turned
/// into constants, as the module doc says; with `dry_run`, only reports.
pub fn inline(src: &Path, out: &Path, dry_run: bool) -> Result<InlineReport> {
    if !dry_run && std::fs::symlink_metadata(out).is_ok() {
        return Err(SavedModelError::OutputExists {
            path: out.to_path_buf(),
        }
        .into());
    }
    let opened = SavedModel::open(src)?;
    let source_name = src.display().to_string();
    let read = crate::read_source(&opened, &source_name, false, None)?;
    let mut report = InlineReport {
        inlined: Vec::new(),
        kept: Vec::new(),
        model_bytes_before: read.source.root.encoded_len(),
        model_bytes_after: 0,
        chunked: false,
        written: false,
    };
    let mut model = read.model;
    let reader = match opened.variables_index() {
        Some(_) => Some(BundleReader::open(&unbound_bundle::saved_model_prefix(
            src,
        ))?),
        None => None,
    };
    for (index, meta) in model.meta_graphs.iter_mut().enumerate() {
        let Some(reader) = &reader else { break };
        let saver_roots: Vec<String> = meta
            .saver_def
            .iter()
            .flat_map(|s| [&s.restore_op_name, &s.save_tensor_name])
            .filter(|n| !n.is_empty())
            .map(|n| tensor_node(n).to_string())
            .collect();
        let Some(graph) = meta.graph_def.as_mut() else {
            continue;
        };
        let signature_roots: Vec<String> = meta
            .signature_def
            .values()
            .flat_map(|s| s.outputs.values())
            .filter_map(|t| match &t.encoding {
                Some(unbound_proto::tensorflow::tensor_info::Encoding::Name(name)) => {
                    Some(tensor_node(name).to_string())
                }
                _ => None,
            })
            .collect();
        inline_graph(
            graph,
            index,
            &saver_roots,
            &signature_roots,
            reader,
            &mut report,
        )?;
    }
    let wire = crate::write_over(&read.source, &model, &source_name)?;
    drop(model);
    let encoded = wire.encoded_len();
    report.model_bytes_after = encoded;
    report.chunked = encoded > MAX_PROTO_SIZE;
    if dry_run {
        return Ok(report);
    }
    let options = if report.chunked {
        WriteOptions::default()
    } else {
        WriteOptions::default().with_max_size(u64::MAX)
    };
    write_model_dir(src, out, wire, &options)?;
    report.written = true;
    Ok(report)
}

/// A resource value: a graph-level handle node, or argument `j` of function `f`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Resource {
    Handle(String),
    Arg(usize, usize),
}

/// Inlines the read-only variables of one graph.
fn inline_graph(
    graph: &mut GraphDef,
    meta_graph: usize,
    saver_roots: &[String],
    signature_roots: &[String],
    reader: &BundleReader,
    report: &mut InlineReport,
) -> Result<()> {
    let mut library = graph.library.take().unwrap_or_default();
    let functions = &mut library.function;
    let index: HashMap<String, usize> = functions
        .iter()
        .enumerate()
        .filter_map(|(i, f)| Some((f.signature.as_ref()?.name.clone(), i)))
        .collect();
    let handles: HashSet<String> = graph
        .node
        .iter()
        .filter(|n| n.op == "VarHandleOp")
        .map(|n| n.name.clone())
        .collect();
    let arg_index: Vec<HashMap<String, usize>> = functions
        .iter()
        .map(|f| {
            f.signature
                .iter()
                .flat_map(|s| s.input_arg.iter().enumerate())
                .map(|(j, a)| (a.name.clone(), j))
                .collect()
        })
        .collect();
    // The resource a node input names, in the graph (`None`) or in function `f`.
    let resource_of = |place: Option<usize>, input: &str| -> Option<Resource> {
        let name = tensor_node(input);
        match place {
            None => handles
                .contains(name)
                .then(|| Resource::Handle(name.to_string())),
            Some(f) => arg_index[f].get(input).map(|&j| Resource::Arg(f, j)),
        }
    };

    // Which handle each function argument carries (None: several, or unknown).
    let mut carried: HashMap<(usize, usize), Option<String>> = HashMap::new();
    loop {
        let mut changed = false;
        let mut places: Vec<(Option<usize>, &Vec<NodeDef>)> = vec![(None, &graph.node)];
        places.extend(
            functions
                .iter()
                .enumerate()
                .map(|(i, f)| (Some(i), &f.node_def)),
        );
        for (place, nodes) in places {
            for node in nodes {
                let Some(callee) = called(node, &index) else {
                    continue;
                };
                for (j, input) in node
                    .input
                    .iter()
                    .filter(|i| !i.starts_with('^'))
                    .enumerate()
                {
                    let handle = match resource_of(place, input) {
                        Some(Resource::Handle(h)) => Some(h),
                        Some(Resource::Arg(f, k)) => match carried.get(&(f, k)) {
                            Some(h) => h.clone(),
                            None => continue, // not known yet
                        },
                        None => continue,
                    };
                    let entry = carried.entry((callee, j));
                    match entry {
                        std::collections::hash_map::Entry::Vacant(v) => {
                            v.insert(handle);
                            changed = true;
                        }
                        std::collections::hash_map::Entry::Occupied(mut o) => {
                            if o.get().is_some() && *o.get() != handle {
                                o.insert(None);
                                changed = true;
                            }
                        }
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    let handle_of = |r: &Resource| -> Option<String> {
        match r {
            Resource::Handle(h) => Some(h.clone()),
            Resource::Arg(f, j) => carried.get(&(*f, *j)).cloned().flatten(),
        }
    };

    // Keys, from the restore path; the save and restore path's nodes and functions.
    let saver_nodes = ancestors(&graph.node, saver_roots);
    let mut saver_functions: HashSet<usize> = graph
        .node
        .iter()
        .filter(|n| saver_nodes.contains(&n.name))
        .filter_map(|n| called(n, &index))
        .collect();
    close_over_calls(&mut saver_functions, functions, &index);
    // What the signatures run: their outputs' nodes, what those depend on, the functions
    // they call.
    let live_nodes = ancestors(&graph.node, signature_roots);
    let mut live_functions: HashSet<usize> = graph
        .node
        .iter()
        .filter(|n| live_nodes.contains(&n.name))
        .filter_map(|n| called(n, &index))
        .collect();
    close_over_calls(&mut live_functions, functions, &index);
    let mut keys: HashMap<String, String> = HashMap::new();
    let mut places: Vec<(Option<usize>, &Vec<NodeDef>)> = vec![(None, &graph.node)];
    places.extend(
        functions
            .iter()
            .enumerate()
            .map(|(i, f)| (Some(i), &f.node_def)),
    );
    for (place, nodes) in &places {
        for (handle_input, key) in restored_keys(nodes) {
            if let Some(h) = resource_of(*place, &handle_input)
                .as_ref()
                .and_then(handle_of)
            {
                keys.insert(h, key);
            }
        }
    }

    // Variables the signatures write (or use otherwise than reading them).
    let mut written: HashMap<String, String> = HashMap::new();
    for (place, nodes) in &places {
        if place.is_some_and(|f| !live_functions.contains(&f) || saver_functions.contains(&f)) {
            continue;
        }
        for node in nodes.iter() {
            if place.is_none()
                && (!live_nodes.contains(&node.name) || saver_nodes.contains(&node.name))
            {
                continue;
            }
            if READ_ONLY_OPS.contains(&node.op.as_str()) || called(node, &index).is_some() {
                continue;
            }
            for input in node.input.iter().filter(|i| !i.starts_with('^')) {
                if let Some(h) = resource_of(*place, input).as_ref().and_then(handle_of) {
                    written
                        .entry(h)
                        .or_insert_with(|| format!("{} ({}) uses it", node.name, node.op));
                }
            }
        }
    }
    drop(places);

    // The values, and the reads replaced.
    let mut inlinable: Vec<&String> = keys.keys().collect();
    inlinable.sort();
    let mut values: HashMap<String, TensorProto> = HashMap::new();
    for h in inlinable {
        if let Some(reason) = written.get(h) {
            report.kept.push(KeptVariable {
                meta_graph,
                variable: h.clone(),
                reason: format!("it is not only read: {reason}"),
            });
            continue;
        }
        let key = &keys[h];
        let tensor = reader.read(key)?;
        let mut proto = TensorProto {
            dtype: tensor.dtype,
            tensor_shape: Some(unbound_bundle::shape_to_proto(&tensor.shape)),
            ..TensorProto::default()
        };
        let bytes = match tensor.data {
            TensorData::Raw(b) => {
                let n = b.len() as u64;
                proto.tensor_content = b;
                n
            }
            TensorData::Strings(v) => {
                let n = v.iter().map(|s| s.len() as u64).sum();
                proto.string_val = v;
                n
            }
            TensorData::Variants(_) => {
                report.kept.push(KeptVariable {
                    meta_graph,
                    variable: h.clone(),
                    reason: "a variant value cannot be a constant".into(),
                });
                continue;
            }
        };
        report.inlined.push(InlinedVariable {
            meta_graph,
            variable: h.clone(),
            checkpoint_key: key.clone(),
            dtype: unbound_bundle::dtype::python_name(tensor.dtype),
            shape: tensor.shape.clone(),
            bytes,
            reads: 0,
        });
        values.insert(h.clone(), proto);
    }
    let mut reads: HashMap<String, usize> = HashMap::new();
    let replace = |place: Option<usize>,
                   nodes: &mut Vec<NodeDef>,
                   reads: &mut HashMap<String, usize>|
     -> HashSet<String> {
        let mut replaced = HashSet::new();
        for node in nodes.iter_mut() {
            if node.op != "ReadVariableOp" || (place.is_none() && saver_nodes.contains(&node.name))
            {
                continue;
            }
            let Some(input) = node.input.first() else {
                continue;
            };
            let Some(h) = resource_of(place, input).as_ref().and_then(handle_of) else {
                continue;
            };
            let Some(value) = values.get(&h) else {
                continue;
            };
            let control: Vec<String> = node
                .input
                .iter()
                .filter(|i| i.starts_with('^'))
                .cloned()
                .collect();
            let mut c = NodeDef {
                name: node.name.clone(),
                op: "Const".into(),
                input: control,
                device: node.device.clone(),
                ..NodeDef::default()
            };
            c.attr.insert("dtype".into(), type_attr(value.dtype));
            c.attr.insert(
                "value".into(),
                AttrValue {
                    value: Some(attr_value::Value::Tensor(value.clone())),
                },
            );
            *node = c;
            replaced.insert(node.name.clone());
            *reads.entry(h).or_default() += 1;
        }
        replaced
    };
    replace(None, &mut graph.node, &mut reads);
    for (i, f) in functions.iter_mut().enumerate() {
        if saver_functions.contains(&i) {
            continue;
        }
        let replaced = replace(Some(i), &mut f.node_def, &mut reads);
        rename_value_outputs(f, &replaced);
    }
    for inlined in report
        .inlined
        .iter_mut()
        .filter(|v| v.meta_graph == meta_graph)
    {
        inlined.reads = reads.get(&inlined.variable).copied().unwrap_or(0);
    }
    graph.library = Some(library);
    Ok(())
}

/// Adds to `set` every function called, directly or not, by one in it.
fn close_over_calls(
    set: &mut HashSet<usize>,
    functions: &[FunctionDef],
    index: &HashMap<String, usize>,
) {
    let mut stack: Vec<usize> = set.iter().copied().collect();
    while let Some(f) = stack.pop() {
        for node in &functions[f].node_def {
            if let Some(g) = called(node, index) {
                if set.insert(g) {
                    stack.push(g);
                }
            }
        }
    }
}

/// In function `f`, references to the `value` output of the nodes `replaced` (reads turned
/// into constants) renamed to the constant's `output`.
fn rename_value_outputs(f: &mut FunctionDef, replaced: &HashSet<String>) {
    if replaced.is_empty() {
        return;
    }
    let rename = |s: &mut String| {
        if let Some((node, rest)) = s.split_once(':') {
            if replaced.contains(node) {
                if let Some(port) = rest.strip_prefix("value:") {
                    *s = format!("{node}:output:{port}");
                }
            }
        }
    };
    for node in &mut f.node_def {
        node.input.iter_mut().for_each(rename);
    }
    f.ret.values_mut().for_each(rename);
}

/// The library function `node` calls.
fn called(node: &NodeDef, index: &HashMap<String, usize>) -> Option<usize> {
    if let Some(&i) = index.get(&node.op) {
        return Some(i);
    }
    if CALL_OPS.contains(&node.op.as_str()) {
        if let Some(attr_value::Value::Func(f)) = node.attr.get("f").and_then(|a| a.value.as_ref())
        {
            return index.get(&f.name).copied();
        }
    }
    None
}

/// `(resource input, checkpoint key)` of each `AssignVariableOp` among `nodes` that stores an
/// output of a `RestoreV2` (through `Identity`s) whose tensor names are a constant.
fn restored_keys(nodes: &[NodeDef]) -> Vec<(String, String)> {
    let by_name: HashMap<&str, &NodeDef> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut out = Vec::new();
    for node in nodes.iter().filter(|n| n.op == "AssignVariableOp") {
        let (Some(handle), Some(value)) = (node.input.first(), node.input.get(1)) else {
            continue;
        };
        let mut value = value.clone();
        // Follow Identity nodes back to the RestoreV2.
        for _ in 0..16 {
            let Some(n) = by_name.get(tensor_node(&value)) else {
                break;
            };
            if n.op != "Identity" {
                break;
            }
            let Some(i) = n.input.first() else { break };
            value = i.clone();
        }
        let Some(restore) = by_name
            .get(tensor_node(&value))
            .filter(|n| n.op == "RestoreV2")
        else {
            continue;
        };
        let position: Option<usize> = value.rsplit(':').next().and_then(|p| p.parse().ok());
        let position = if value.contains(':') {
            position
        } else {
            Some(0)
        };
        let Some(position) = position else { continue };
        let Some(names) = restore
            .input
            .get(1)
            .and_then(|n| by_name.get(tensor_node(n)))
            .and_then(
                |n| match n.attr.get("value").and_then(|v| v.value.as_ref()) {
                    Some(attr_value::Value::Tensor(t)) => Some(t.string_val.clone()),
                    _ => None,
                },
            )
        else {
            continue;
        };
        if let Some(key) = names.get(position) {
            out.push((handle.clone(), String::from_utf8_lossy(key).into_owned()));
        }
    }
    out
}

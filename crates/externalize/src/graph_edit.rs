//! The graph side of externalizing one MetaGraphDef: which `Const` nodes move (in the graph
//! and in every library function), the new variable each becomes, and the rewiring TensorFlow
//! would have written had the values been variables from the start:
//!
//! - in the graph, a `VarHandleOp` per variable, and each moved `Const` replaced by an
//!   `Identity` (same name, so every reference to it still holds) of a `ReadVariableOp`;
//! - in a function, a new trailing resource argument per variable it reads, itself or through
//!   the functions it calls (a captured input, as `tf.function` captures a variable), the
//!   `Const` replaced as in the graph, and every call site (`PartitionedCall`,
//!   `StatefulPartitionedCall`, a direct call) fed the callee's new arguments: from the
//!   caller's own new arguments in a function, from the `VarHandleOp`s in the graph.
//!
//! A function referenced other than by a call (the body of a `While`, a branch of an `If`, a
//! dataset function, a gradient) cannot take new arguments without changing what references
//! it; its constants, and those of every function it calls, stay constants
//! ([`crate::KeptConstant`]).

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use unbound_bundle::dtype::{storage, Storage};
use unbound_proto::tensorflow::{
    attr_value, function_def::ArgAttrs, op_def::ArgDef, AttrValue, DataType, FunctionDef, GraphDef,
    NodeDef, TensorShapeProto,
};
use unbound_wire::Payload;

use crate::error::{ExternalizeError, Result};
use crate::report::KeptConstant;
use crate::strip::Values;

/// The call ops whose `f` a function is fed through.
const CALL_OPS: [&str; 2] = ["PartitionedCall", "StatefulPartitionedCall"];

/// A constant's value, taken out of its node, to be written to the checkpoint.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    /// Fixed-size elements, little-endian (a `tensor_content`), where the model read holds
    /// them (a slice of the mapped `.pb`, a lazy reference into the `.cpb`'s records).
    Raw(Payload),
    /// `DT_STRING` elements.
    Strings(Vec<Bytes>),
}

/// A variable made of one constant.
#[derive(Debug, Clone)]
pub(crate) struct NewVariable {
    /// Its `VarHandleOp`'s name and `shared_name`, and `SavedVariable.name`.
    pub name: String,
    /// Its name as a child of the object graph's root (letters, digits and `_` only, so its
    /// checkpoint key needs no escaping).
    pub local_name: String,
    /// Its dtype (`DataType` value).
    pub dtype: i32,
    /// Its shape.
    pub shape: Vec<i64>,
    /// Its value.
    pub value: Value,
    /// The function the constant was in (`None`: the graph).
    pub function: Option<String>,
    /// The constant's node name.
    pub node: String,
    /// Bytes of the value.
    pub bytes: u64,
}

/// What externalizing one graph did.
#[derive(Debug, Default)]
pub(crate) struct GraphOutcome {
    /// The new variables, in the order their constants were found.
    pub variables: Vec<NewVariable>,
    /// For each function given new arguments, the variables they carry, in argument order.
    pub function_variables: HashMap<String, Vec<usize>>,
    /// Constants at least the minimum size that stay.
    pub kept: Vec<KeptConstant>,
}

/// Where a node sits: the graph or a library function (by index).
type Place = Option<usize>;

/// Moves every `Const` of `graph` (graph nodes and library functions) whose value is at least
/// `min_size` bytes into a new variable, rewiring as the module doc says. The checkpoint's
/// own save and restore path (the graph nodes `saver_roots` depend on, and the functions they
/// call) keeps its constants: a restore cannot read a variable it is to restore. `taken` holds the
/// names already used (by other MetaGraphDefs' variables); `source_name` names the model for
/// errors; `meta_graph` is the MetaGraphDef's position, for the report; `values` resolves the
/// markers standing for values ([`crate::strip`]).
pub(crate) fn externalize_graph(
    graph: &mut GraphDef,
    values: &Values,
    meta_graph: usize,
    saver_roots: &[String],
    min_size: u64,
    taken: &mut HashSet<String>,
    source_name: &str,
) -> Result<GraphOutcome> {
    let library = graph.library.take().unwrap_or_default();
    let mut functions = library.function;
    let index: HashMap<String, usize> = functions
        .iter()
        .enumerate()
        .filter_map(|(i, f)| Some((f.signature.as_ref()?.name.clone(), i)))
        .collect();

    // Call edges and functions referenced otherwise (pinned).
    let mut calls: Vec<(Place, usize)> = Vec::new();
    let mut pinned: HashSet<usize> = HashSet::new();
    scan_references(&graph.node, None, &index, &mut calls, &mut pinned);
    for (i, f) in functions.iter().enumerate() {
        scan_references(&f.node_def, Some(i), &index, &mut calls, &mut pinned);
    }
    for gradient in &library.gradient {
        for name in [&gradient.function_name, &gradient.gradient_func] {
            if let Some(&i) = index.get(name) {
                pinned.insert(i);
            }
        }
    }
    // The graph nodes of the save and restore path, and the functions they call.
    let saver_nodes = ancestors(&graph.node, saver_roots);
    let mut saver_functions: HashSet<usize> = graph
        .node
        .iter()
        .filter(|n| saver_nodes.contains(&n.name))
        .filter_map(|n| called_function(n, &index))
        .collect();
    // What a pinned (or saver) function calls is pinned too: its arguments would have to
    // come through it.
    close_over_calls(&mut pinned, &calls);
    close_over_calls(&mut saver_functions, &calls);

    // The constants that move, each a variable; graph node names are taken.
    taken.extend(graph.node.iter().map(|n| n.name.clone()));
    let mut outcome = GraphOutcome::default();
    let mut own: HashMap<Place, Vec<(usize, usize)>> = HashMap::new(); // place -> (node, var)
    let mut places: Vec<(Place, &mut Vec<NodeDef>)> = vec![(None, &mut graph.node)];
    let function_names: Vec<String> = functions.iter().map(function_name).collect();
    for (i, f) in functions.iter_mut().enumerate() {
        places.push((Some(i), &mut f.node_def));
    }
    for (place, nodes) in places {
        let fname = place.map(|i| function_names[i].clone());
        for (n, node) in nodes.iter_mut().enumerate() {
            if node.op != "Const" {
                continue;
            }
            let found = match constant_value(node, values) {
                Candidate::Small => continue,
                Candidate::Unmovable(bytes, reason) if bytes >= min_size => {
                    outcome.kept.push(KeptConstant {
                        meta_graph,
                        function: fname.clone(),
                        node: node.name.clone(),
                        bytes,
                        reason,
                    });
                    continue;
                }
                Candidate::Unmovable(..) => continue,
                Candidate::Movable(found) if found.bytes >= min_size => found,
                Candidate::Movable(_) => continue,
            };
            let in_saver = match place {
                Some(i) => saver_functions.contains(&i),
                None => saver_nodes.contains(&node.name),
            };
            if in_saver {
                outcome.kept.push(KeptConstant {
                    meta_graph,
                    function: fname.clone(),
                    node: node.name.clone(),
                    bytes: found.bytes,
                    reason: "it is part of the checkpoint's save or restore path".into(),
                });
                continue;
            }
            if place.is_some_and(|i| pinned.contains(&i)) {
                outcome.kept.push(KeptConstant {
                    meta_graph,
                    function: fname.clone(),
                    node: node.name.clone(),
                    bytes: found.bytes,
                    reason: "its function is referenced other than by a call (a loop body, a \
                             branch, a gradient, a dataset function), so it cannot take a new \
                             argument"
                        .into(),
                });
                continue;
            }
            let base = match &fname {
                Some(f) => format!("externalized/{f}/{}", node.name),
                None => format!("externalized/{}", node.name),
            };
            let name = unique(&base, taken);
            let local_name: String = name
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            let var = outcome.variables.len();
            // The value leaves the node here: the model holds it once, in the variable to be
            // written.
            if let Some(attr_value::Value::Tensor(t)) =
                node.attr.get_mut("value").and_then(|v| v.value.as_mut())
            {
                t.tensor_content = Bytes::new();
                t.string_val.clear();
            }
            outcome.variables.push(NewVariable {
                name,
                local_name,
                dtype: found.dtype,
                shape: found.shape,
                value: found.value,
                function: fname.clone(),
                node: node.name.clone(),
                bytes: found.bytes,
            });
            own.entry(place).or_default().push((n, var));
        }
    }
    if outcome.variables.is_empty() {
        graph.library = Some(unbound_proto::tensorflow::FunctionDefLibrary {
            function: functions,
            ..library
        });
        return Ok(outcome);
    }

    // What each place needs: its own variables, then its callees' (to a fixed point, so
    // recursion ends).
    let mut needs: HashMap<Place, Vec<usize>> = own
        .iter()
        .map(|(place, list)| (*place, list.iter().map(|&(_, v)| v).collect()))
        .collect();
    loop {
        let mut changed = false;
        for &(caller, callee) in &calls {
            let callee_needs = needs.get(&Some(callee)).cloned().unwrap_or_default();
            let caller_needs = needs.entry(caller).or_default();
            for v in callee_needs {
                if !caller_needs.contains(&v) {
                    caller_needs.push(v);
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }

    // New arguments of each function that needs variables.
    let mut arg_names: HashMap<usize, HashMap<usize, String>> = HashMap::new();
    for (i, f) in functions.iter_mut().enumerate() {
        let Some(vars) = needs.get(&Some(i)).filter(|v| !v.is_empty()) else {
            continue;
        };
        let mut used: HashSet<String> = f.node_def.iter().map(|n| n.name.clone()).collect();
        let signature = f.signature.get_or_insert_with(Default::default);
        used.extend(signature.input_arg.iter().map(|a| a.name.clone()));
        used.extend(signature.output_arg.iter().map(|a| a.name.clone()));
        let mut names = HashMap::new();
        for &v in vars {
            let var = &outcome.variables[v];
            let arg = unique(&format!("externalized_{}", var.local_name), &mut used);
            let position = signature.input_arg.len() as u32;
            signature.input_arg.push(ArgDef {
                name: arg.clone(),
                r#type: DataType::DtResource as i32,
                ..ArgDef::default()
            });
            let mut attrs = ArgAttrs::default();
            attrs.attr.insert(
                "_user_specified_name".into(),
                string_attr(var.name.as_bytes()),
            );
            f.arg_attr.insert(position, attrs);
            if let Some(attr_value::Value::List(list)) = f
                .attr
                .get_mut("_input_shapes")
                .and_then(|a| a.value.as_mut())
            {
                list.shape.push(TensorShapeProto::default());
            }
            names.insert(v, arg);
        }
        outcome
            .function_variables
            .insert(function_names[i].clone(), vars.clone());
        arg_names.insert(i, names);
    }

    // Rewire the graph: handles, reads, call sites.
    let handle_of: HashMap<usize, String> = outcome
        .variables
        .iter()
        .enumerate()
        .map(|(v, var)| (v, var.name.clone()))
        .collect();
    let graph_nodes = std::mem::take(&mut graph.node);
    graph.node = rewire(
        graph_nodes,
        own.get(&None).map(Vec::as_slice).unwrap_or(&[]),
        &handle_of,
        &needs,
        &index,
        &outcome.variables,
        ReadStyle::Graph,
    );
    let mut handles: Vec<NodeDef> = outcome.variables.iter().map(var_handle).collect();
    graph.node.append(&mut handles);
    for (i, f) in functions.iter_mut().enumerate() {
        let empty = HashMap::new();
        let names = arg_names.get(&i).unwrap_or(&empty);
        let nodes = std::mem::take(&mut f.node_def);
        f.node_def = rewire(
            nodes,
            own.get(&Some(i)).map(Vec::as_slice).unwrap_or(&[]),
            names,
            &needs,
            &index,
            &outcome.variables,
            ReadStyle::Function,
        );
    }
    graph.library = Some(unbound_proto::tensorflow::FunctionDefLibrary {
        function: functions,
        ..library
    });
    if outcome.variables.iter().any(|v| v.name.is_empty()) {
        return Err(ExternalizeError::invalid(
            source_name,
            "a variable without a name",
        ));
    }
    Ok(outcome)
}

/// Adds to `set` every function called, directly or not, by one in it.
fn close_over_calls(set: &mut HashSet<usize>, calls: &[(Place, usize)]) {
    let mut stack: Vec<usize> = set.iter().copied().collect();
    while let Some(f) = stack.pop() {
        for &(caller, callee) in calls {
            if caller == Some(f) && set.insert(callee) {
                stack.push(callee);
            }
        }
    }
}

/// The names of `roots` and of every node of `nodes` they depend on (data and control
/// inputs), in one graph.
pub(crate) fn ancestors(nodes: &[NodeDef], roots: &[String]) -> HashSet<String> {
    let by_name: HashMap<&str, &NodeDef> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut seen: HashSet<String> = HashSet::new();
    let mut stack: Vec<String> = roots.to_vec();
    while let Some(name) = stack.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        if let Some(node) = by_name.get(name.as_str()) {
            for input in &node.input {
                stack.push(tensor_node(input).to_string());
            }
        }
    }
    seen
}

/// The node of a graph-level input (`name`, `name:1`, `^name`).
pub(crate) fn tensor_node(input: &str) -> &str {
    let input = input.strip_prefix('^').unwrap_or(input);
    input.split(':').next().unwrap_or(input)
}

/// How a read's output is named where it is used.
#[derive(Clone, Copy)]
enum ReadStyle {
    /// `node` (output 0) in a graph.
    Graph,
    /// `node:value:0` in a function body.
    Function,
}

/// `nodes` with the constants at `own` (node position, variable) replaced by reads of the
/// resource `handle_of[variable]` names, and every call of a function needing variables fed
/// them from `handle_of`.
fn rewire(
    nodes: Vec<NodeDef>,
    own: &[(usize, usize)],
    handle_of: &HashMap<usize, String>,
    needs: &HashMap<Place, Vec<usize>>,
    index: &HashMap<String, usize>,
    variables: &[NewVariable],
    style: ReadStyle,
) -> Vec<NodeDef> {
    let own: HashMap<usize, usize> = own.iter().copied().collect();
    let mut used: HashSet<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let mut out = Vec::with_capacity(nodes.len() + own.len());
    for (n, mut node) in nodes.into_iter().enumerate() {
        if let Some(&v) = own.get(&n) {
            let var = &variables[v];
            let read_name = unique(&format!("{}/externalized_read", node.name), &mut used);
            let (data, control) = split_inputs(std::mem::take(&mut node.input));
            drop(data);
            let mut read = NodeDef {
                name: read_name.clone(),
                op: "ReadVariableOp".into(),
                input: std::iter::once(handle_of.get(&v).cloned().unwrap_or_default())
                    .chain(control)
                    .collect(),
                device: node.device.clone(),
                ..NodeDef::default()
            };
            read.attr.insert("dtype".into(), type_attr(var.dtype));
            let read_output = match style {
                ReadStyle::Graph => read_name,
                ReadStyle::Function => format!("{read_name}:value:0"),
            };
            let mut identity = NodeDef {
                name: node.name,
                op: "Identity".into(),
                input: vec![read_output],
                device: node.device,
                ..NodeDef::default()
            };
            identity.attr.insert("T".into(), type_attr(var.dtype));
            out.push(read);
            out.push(identity);
            continue;
        }
        if let Some(callee) = called_function(&node, index) {
            if let Some(vars) = needs.get(&Some(callee)).filter(|v| !v.is_empty()) {
                feed_call(&mut node, vars, handle_of);
            }
        }
        out.push(node);
    }
    out
}

/// Appends the handles of `vars` to the data inputs of the call `node`; a call op also gets
/// their types in `Tin`, the new positions in `_read_only_resource_inputs`, and becomes a
/// `StatefulPartitionedCall` (reading a variable is stateful).
fn feed_call(node: &mut NodeDef, vars: &[usize], handle_of: &HashMap<usize, String>) {
    let (mut data, control) = split_inputs(std::mem::take(&mut node.input));
    let first_new = data.len() as i64;
    data.extend(
        vars.iter()
            .map(|v| handle_of.get(v).cloned().unwrap_or_default()),
    );
    node.input = data.into_iter().chain(control).collect();
    if !CALL_OPS.contains(&node.op.as_str()) {
        return;
    }
    node.op = "StatefulPartitionedCall".into();
    let tin = node.attr.entry("Tin".into()).or_insert_with(|| AttrValue {
        value: Some(attr_value::Value::List(Default::default())),
    });
    if let Some(attr_value::Value::List(list)) = tin.value.as_mut() {
        list.r#type
            .extend(vars.iter().map(|_| DataType::DtResource as i32));
    }
    let read_only = node
        .attr
        .entry("_read_only_resource_inputs".into())
        .or_insert_with(|| AttrValue {
            value: Some(attr_value::Value::List(Default::default())),
        });
    if let Some(attr_value::Value::List(list)) = read_only.value.as_mut() {
        list.i.extend((0..vars.len() as i64).map(|j| first_new + j));
    }
}

/// A node's inputs split into data inputs and control inputs (`^name`), each in order.
fn split_inputs(inputs: Vec<String>) -> (Vec<String>, Vec<String>) {
    inputs.into_iter().partition(|i| !i.starts_with('^'))
}

/// The library function `node` calls: its op, or the `f` of a call op.
fn called_function(node: &NodeDef, index: &HashMap<String, usize>) -> Option<usize> {
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

/// Records the function calls among `nodes` (in `caller`) and pins every function referenced
/// otherwise (by any function-valued attribute but a call op's `f`).
fn scan_references(
    nodes: &[NodeDef],
    caller: Place,
    index: &HashMap<String, usize>,
    calls: &mut Vec<(Place, usize)>,
    pinned: &mut HashSet<usize>,
) {
    for node in nodes {
        if let Some(&i) = index.get(&node.op) {
            calls.push((caller, i));
        }
        let is_call = CALL_OPS.contains(&node.op.as_str());
        for (key, value) in &node.attr {
            let mut names = Vec::new();
            function_names_in(value, &mut names);
            for name in names {
                let Some(&i) = index.get(&name) else { continue };
                if is_call && key == "f" {
                    calls.push((caller, i));
                } else {
                    pinned.insert(i);
                }
            }
        }
    }
}

/// Every function name an attribute value holds (a `func`, a list of them, and the attributes
/// of those, recursively).
fn function_names_in(value: &AttrValue, out: &mut Vec<String>) {
    let mut funcs = Vec::new();
    match &value.value {
        Some(attr_value::Value::Func(f)) => funcs.push(f),
        Some(attr_value::Value::List(list)) => funcs.extend(list.func.iter()),
        _ => {}
    }
    for f in funcs {
        out.push(f.name.clone());
        for v in f.attr.values() {
            function_names_in(v, out);
        }
    }
}

/// What a `Const` node's value is to externalizing.
enum Candidate {
    /// Not a tensor worth looking at.
    Small,
    /// A value in a form that is not moved (typed fields, a splat, an unknown dtype): its size
    /// in the proto and why.
    Unmovable(u64, String),
    /// A value that can become a variable.
    Movable(Found),
}

/// A constant's value, found movable.
struct Found {
    dtype: i32,
    shape: Vec<i64>,
    value: Value,
    bytes: u64,
}

/// The value of the `Const` `node` (its `tensor_content` perhaps a marker `values` resolves),
/// and whether it can move.
fn constant_value(node: &NodeDef, values: &Values) -> Candidate {
    use prost::Message;
    let Some(attr_value::Value::Tensor(t)) = node.attr.get("value").and_then(|v| v.value.as_ref())
    else {
        return Candidate::Small;
    };
    let proto_bytes = t.encoded_len() as u64;
    let shape: Option<Vec<i64>> = t
        .tensor_shape
        .as_ref()
        .map(|s| s.dim.iter().map(|d| d.size).collect())
        .or(Some(Vec::new()))
        .filter(|dims: &Vec<i64>| dims.iter().all(|&d| d >= 0));
    let Some(shape) = shape.filter(|_| !t.tensor_shape.as_ref().is_some_and(|s| s.unknown_rank))
    else {
        return Candidate::Unmovable(proto_bytes, "its shape is not fully known".into());
    };
    let Some(elements) = unbound_bundle::num_elements(&shape) else {
        return Candidate::Unmovable(proto_bytes, "its shape overflows".into());
    };
    if node
        .attr
        .get("dtype")
        .and_then(|a| match a.value {
            Some(attr_value::Value::Type(d)) => Some(d),
            _ => None,
        })
        .is_some_and(|d| d != t.dtype)
    {
        return Candidate::Unmovable(proto_bytes, "its dtype attribute and value disagree".into());
    }
    match storage(t.dtype) {
        Storage::Fixed(size) if t.dtype < 100 => {
            let content = values
                .resolve(&t.tensor_content)
                .cloned()
                .unwrap_or_else(|| Payload::Inline(t.tensor_content.clone()));
            if content.len() != elements * size as u64 {
                return Candidate::Unmovable(
                    proto_bytes,
                    "its value is not stored whole as tensor_content (or string_val)".into(),
                );
            }
            if content.is_empty() {
                return Candidate::Small;
            }
            Candidate::Movable(Found {
                dtype: t.dtype,
                shape,
                bytes: content.len(),
                value: Value::Raw(content),
            })
        }
        Storage::String if t.string_val.len() as u64 == elements && elements > 0 => {
            Candidate::Movable(Found {
                dtype: t.dtype,
                shape,
                bytes: t.string_val.iter().map(|s| s.len() as u64).sum(),
                value: Value::Strings(t.string_val.clone()),
            })
        }
        _ => Candidate::Unmovable(
            proto_bytes,
            "its value is not stored whole as tensor_content (or string_val)".into(),
        ),
    }
}

/// The graph-level `VarHandleOp` of `var`.
fn var_handle(var: &NewVariable) -> NodeDef {
    let mut node = NodeDef {
        name: var.name.clone(),
        op: "VarHandleOp".into(),
        ..NodeDef::default()
    };
    node.attr.insert("container".into(), string_attr(b""));
    node.attr
        .insert("shared_name".into(), string_attr(var.name.as_bytes()));
    node.attr.insert("dtype".into(), type_attr(var.dtype));
    node.attr.insert(
        "shape".into(),
        AttrValue {
            value: Some(attr_value::Value::Shape(unbound_bundle::shape_to_proto(
                &var.shape,
            ))),
        },
    );
    node.attr.insert(
        "allowed_devices".into(),
        AttrValue {
            value: Some(attr_value::Value::List(Default::default())),
        },
    );
    node
}

/// A `type` attribute.
pub(crate) fn type_attr(dtype: i32) -> AttrValue {
    AttrValue {
        value: Some(attr_value::Value::Type(dtype)),
    }
}

/// A `string` attribute.
pub(crate) fn string_attr(s: &[u8]) -> AttrValue {
    AttrValue {
        value: Some(attr_value::Value::S(Bytes::copy_from_slice(s))),
    }
}

/// A function's name.
fn function_name(f: &FunctionDef) -> String {
    f.signature
        .as_ref()
        .map(|s| s.name.clone())
        .unwrap_or_default()
}

/// `base`, or `base_1`, `base_2`, ...: the first not in `taken`, which it is added to.
pub(crate) fn unique(base: &str, taken: &mut HashSet<String>) -> String {
    let mut name = base.to_string();
    let mut k = 0;
    while taken.contains(&name) {
        k += 1;
        name = format!("{base}_{k}");
    }
    taken.insert(name.clone());
    name
}

#[cfg(test)]
mod tests {
    use unbound_proto::tensorflow::{FunctionDefLibrary, NameAttrList, OpDef, TensorProto};

    use super::*;

    fn node(name: &str, op: &str, inputs: &[&str]) -> NodeDef {
        NodeDef {
            name: name.into(),
            op: op.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            ..NodeDef::default()
        }
    }

    fn constant(name: &str, floats: usize) -> NodeDef {
        let mut n = node(name, "Const", &[]);
        n.attr
            .insert("dtype".into(), type_attr(DataType::DtFloat as i32));
        n.attr.insert(
            "value".into(),
            AttrValue {
                value: Some(attr_value::Value::Tensor(TensorProto {
                    dtype: DataType::DtFloat as i32,
                    tensor_shape: Some(unbound_bundle::shape_to_proto(&[floats as i64])),
                    tensor_content: Bytes::from(vec![7u8; floats * 4]),
                    ..TensorProto::default()
                })),
            },
        );
        n
    }

    fn call(name: &str, op: &str, f: &str, inputs: &[&str]) -> NodeDef {
        let mut n = node(name, op, inputs);
        n.attr.insert(
            "f".into(),
            AttrValue {
                value: Some(attr_value::Value::Func(NameAttrList {
                    name: f.into(),
                    ..Default::default()
                })),
            },
        );
        n.attr.insert(
            "Tin".into(),
            AttrValue {
                value: Some(attr_value::Value::List(attr_value::ListValue {
                    r#type: vec![DataType::DtFloat as i32],
                    ..Default::default()
                })),
            },
        );
        n
    }

    fn function(name: &str, nodes: Vec<NodeDef>) -> FunctionDef {
        FunctionDef {
            signature: Some(OpDef {
                name: name.into(),
                input_arg: vec![ArgDef {
                    name: "x".into(),
                    r#type: DataType::DtFloat as i32,
                    ..ArgDef::default()
                }],
                ..OpDef::default()
            }),
            node_def: nodes,
            ..FunctionDef::default()
        }
    }

    /// A graph calling `outer`, which holds a constant and calls `inner` (a constant too) with
    /// a control input; `body`, a `While` body, holds a constant and calls `inner` too; the
    /// saver's restore path calls `restore`, which holds one.
    fn graph() -> GraphDef {
        let mut w = node("loop", "While", &["x"]);
        w.attr.insert(
            "body".into(),
            AttrValue {
                value: Some(attr_value::Value::Func(NameAttrList {
                    name: "body".into(),
                    ..Default::default()
                })),
            },
        );
        GraphDef {
            node: vec![
                node("x", "Placeholder", &[]),
                constant("g", 300),
                call("call", "PartitionedCall", "outer", &["x", "^g"]),
                w,
                call("restore_call", "StatefulPartitionedCall", "restore", &["x"]),
            ],
            library: Some(FunctionDefLibrary {
                function: vec![
                    function(
                        "outer",
                        vec![
                            constant("c", 300),
                            call("inner_call", "StatefulPartitionedCall", "inner", &["x"]),
                        ],
                    ),
                    function("inner", vec![constant("d", 300), constant("tiny", 2)]),
                    function(
                        "body",
                        vec![
                            constant("e", 300),
                            call("inner_call", "PartitionedCall", "inner", &["x"]),
                        ],
                    ),
                    function("restore", vec![constant("names", 300)]),
                ],
                ..Default::default()
            }),
            ..GraphDef::default()
        }
    }

    fn library(g: &GraphDef) -> &[FunctionDef] {
        &g.library.as_ref().unwrap().function
    }

    fn input_args(f: &FunctionDef) -> Vec<(String, i32)> {
        f.signature
            .as_ref()
            .unwrap()
            .input_arg
            .iter()
            .map(|a| (a.name.clone(), a.r#type))
            .collect()
    }

    #[test]
    fn constants_become_captured_reads_fed_at_every_call_site() {
        let mut g = graph();
        let mut taken = HashSet::new();
        let outcome = externalize_graph(
            &mut g,
            &Values::none(),
            0,
            &["restore_call".into()],
            1000,
            &mut taken,
            "m",
        )
        .unwrap();
        let moved: Vec<(Option<&str>, &str)> = outcome
            .variables
            .iter()
            .map(|v| (v.function.as_deref(), v.node.as_str()))
            .collect();
        assert_eq!(moved, [(None, "g"), (Some("outer"), "c")]);
        // `inner` is called by `body`, a loop body: pinned, like `body` itself; `restore` is on
        // the saver's path.
        let kept: Vec<(&str, &str)> = outcome
            .kept
            .iter()
            .map(|k| (k.function.as_deref().unwrap_or(""), k.node.as_str()))
            .collect();
        assert_eq!(kept, [("inner", "d"), ("body", "e"), ("restore", "names")]);
        assert_eq!(outcome.variables[0].name, "externalized/g");
        assert_eq!(outcome.variables[1].name, "externalized/outer/c");
        assert_eq!(outcome.variables[1].local_name, "externalized_outer_c");

        // The graph: `g` reads its variable, the call is fed `outer`'s, a handle per variable.
        let by_name = |name: &str| g.node.iter().find(|n| n.name == name).unwrap().clone();
        assert_eq!(by_name("g").op, "Identity");
        assert_eq!(by_name("g").input, ["g/externalized_read"]);
        assert_eq!(by_name("g/externalized_read").input, ["externalized/g"]);
        assert_eq!(by_name("externalized/g").op, "VarHandleOp");
        let call = by_name("call");
        assert_eq!(call.op, "StatefulPartitionedCall");
        assert_eq!(call.input, ["x", "externalized/outer/c", "^g"]);
        let Some(attr_value::Value::List(tin)) = call.attr["Tin"].value.clone() else {
            panic!("no Tin")
        };
        assert_eq!(
            tin.r#type,
            [DataType::DtFloat as i32, DataType::DtResource as i32]
        );
        let Some(attr_value::Value::List(ro)) =
            call.attr["_read_only_resource_inputs"].value.clone()
        else {
            panic!("no _read_only_resource_inputs")
        };
        assert_eq!(ro.i, [1]);

        // `outer` takes the resource, reads it where `c` was; `inner` is unchanged.
        let outer = &library(&g)[0];
        assert_eq!(
            input_args(outer),
            [
                ("x".to_string(), DataType::DtFloat as i32),
                (
                    "externalized_externalized_outer_c".to_string(),
                    DataType::DtResource as i32
                )
            ]
        );
        let c = outer.node_def.iter().find(|n| n.name == "c").unwrap();
        assert_eq!(c.op, "Identity");
        assert_eq!(c.input, ["c/externalized_read:value:0"]);
        assert_eq!(outcome.function_variables["outer"], [1]);
        assert_eq!(input_args(&library(&g)[1]).len(), 1);
        assert_eq!(library(&g)[1].node_def[0].op, "Const");
    }

    #[test]
    fn nested_callers_take_their_callees_variables() {
        let mut g = graph();
        // Nothing pins `inner` any more: `body` is called, not a loop body.
        g.node.retain(|n| n.name != "loop");
        g.node
            .push(call("body_call", "PartitionedCall", "body", &["x"]));
        let mut taken = HashSet::new();
        let outcome =
            externalize_graph(&mut g, &Values::none(), 0, &[], 1000, &mut taken, "m").unwrap();
        let names: Vec<&str> = outcome.variables.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "externalized/g",
                "externalized/outer/c",
                "externalized/inner/d",
                "externalized/body/e",
                "externalized/restore/names"
            ]
        );
        // `outer` takes its own and `inner`'s, and feeds `inner` its own argument.
        assert_eq!(outcome.function_variables["outer"], [1, 2]);
        assert_eq!(outcome.function_variables["body"], [3, 2]);
        let outer = &library(&g)[0];
        let inner_call = outer
            .node_def
            .iter()
            .find(|n| n.name == "inner_call")
            .unwrap();
        assert_eq!(inner_call.input, ["x", "externalized_externalized_inner_d"]);
        let body_call = g.node.iter().find(|n| n.name == "body_call").unwrap();
        assert_eq!(
            body_call.input,
            ["x", "externalized/body/e", "externalized/inner/d"]
        );
    }

    #[test]
    fn small_and_unmovable_constants_stay() {
        let mut g = graph();
        let mut splat = constant("splat", 0);
        if let Some(attr_value::Value::Tensor(t)) =
            splat.attr.get_mut("value").and_then(|v| v.value.as_mut())
        {
            t.tensor_shape = Some(unbound_bundle::shape_to_proto(&[100_000]));
            t.float_val = vec![1.0; 400];
        }
        g.node.push(splat);
        let mut taken = HashSet::new();
        let outcome =
            externalize_graph(&mut g, &Values::none(), 0, &[], 1200, &mut taken, "m").unwrap();
        assert!(outcome.variables.iter().all(|v| v.bytes >= 1200));
        assert!(outcome
            .kept
            .iter()
            .any(|k| k.node == "splat" && k.reason.contains("tensor_content")));
        // Nothing at or above a size no constant reaches: the graph is as it was.
        let mut g = graph();
        let before = g.clone();
        let outcome =
            externalize_graph(&mut g, &Values::none(), 0, &[], 1 << 20, &mut taken, "m").unwrap();
        assert!(outcome.variables.is_empty());
        assert_eq!(g, before);
    }
}

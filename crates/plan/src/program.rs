//! The program DTensor would see: a signature's function and every function it calls,
//! flattened into one dataflow graph. Calls (`PartitionedCall`, `StatefulPartitionedCall`)
//! are passed through, as DTensor's propagation traces through them: a callee's arguments are
//! the caller's operands and the call's results are the callee's returns. Every node is
//! visited once per call site, so building is linear in the nodes.

use std::collections::HashMap;
use std::rc::Rc;

use unbound_graph::functions::{function_to_graph, ARG_OP, RETVAL_OP};
use unbound_graph::OpLibrary;
use unbound_proto::tensorflow::{FunctionDef, GraphDef, NodeDef, VersionDef};

use crate::attrs::{self, Attrs};

/// Index of a node in [`Program::nodes`].
pub type NodeId = usize;
/// Index of a value in [`Program::values`].
pub type ValueId = usize;

/// How deep calls may nest before the program is refused as malformed (recursion).
const MAX_CALL_DEPTH: usize = 64;

/// One op instance.
#[derive(Debug)]
pub struct Node {
    /// The node's name, prefixed by the functions it sits in (`f/g/node`).
    pub name: String,
    /// Its op type.
    pub op: String,
    /// Which graph of [`Program::graphs`] and which node of it.
    pub def: (usize, usize),
    /// Its data operands.
    pub inputs: Vec<ValueId>,
    /// For each operand, this node's place in the value's consumer list.
    pub input_slots: Vec<usize>,
    /// Its results.
    pub outputs: Vec<ValueId>,
}

/// One tensor.
#[derive(Debug, Clone, Default)]
pub struct Value {
    /// The node making it (none for inputs and variables).
    pub producer: Option<NodeId>,
    /// Its global shape (`-1` unknown), when the rank is known.
    pub shape: Option<Vec<i64>>,
    /// Its dtype.
    pub dtype: i32,
    /// The consuming operands: (node, operand index).
    pub consumers: Vec<(NodeId, usize)>,
    /// Its values, for small integer constants (shapes, axes, permutations).
    pub ints: Option<Vec<i64>>,
    /// The variable, when it is a resource handle.
    pub variable: Option<usize>,
}

/// A variable the program reads or writes.
#[derive(Debug, Clone)]
pub struct Variable {
    /// Its `shared_name` (or node name).
    pub name: String,
    /// Its shape.
    pub shape: Option<Vec<i64>>,
    /// Its dtype.
    pub dtype: i32,
}

/// The flattened program.
#[derive(Debug, Default)]
pub struct Program {
    /// The graphs nodes point into: the main graph, then one per function converted.
    pub graphs: Vec<Rc<GraphDef>>,
    /// Every op instance, in an order where producers come first.
    pub nodes: Vec<Node>,
    /// Every tensor.
    pub values: Vec<Value>,
    /// The signature inputs: (name, value).
    pub inputs: Vec<(String, ValueId)>,
    /// The signature outputs: (name, value).
    pub outputs: Vec<(String, ValueId)>,
    /// The variables (resource values refer to them).
    pub variables: Vec<Variable>,
    /// Nodes left out, with why (cycles, unknown functions).
    pub skipped: Vec<String>,
}

impl Program {
    /// The attributes of node `n`.
    pub fn attrs(&self, n: NodeId) -> &Attrs {
        let (g, i) = self.nodes[n].def;
        &self.graphs[g].node[i].attr
    }

    fn new_value(&mut self, v: Value) -> ValueId {
        self.values.push(v);
        self.values.len() - 1
    }
}

/// What the builder needs besides the program.
pub struct Builder<'a> {
    /// The model's functions by name.
    pub functions: HashMap<&'a str, &'a FunctionDef>,
    /// Op definitions (for converting functions).
    pub ops: &'a OpLibrary,
    /// The main graph's versions.
    pub versions: Option<&'a VersionDef>,
    /// Converted functions: function name -> graph index.
    converted: HashMap<String, usize>,
}

/// Splits `node:k` (graph form) into the node and its output index; `None` for `^control`.
fn split_tensor(name: &str) -> Option<(&str, usize)> {
    if name.starts_with('^') {
        return None;
    }
    match name.rsplit_once(':') {
        Some((n, k)) => k.parse().ok().map(|k| (n, k)),
        None => Some((name, 0)),
    }
}

/// The nodes of `graph` in an order where data producers come first (Kahn's algorithm over
/// data and control inputs), restricted to `wanted` when given. Nodes on cycles are left out
/// and returned second.
fn topo_order(graph: &GraphDef, wanted: Option<&[bool]>) -> (Vec<usize>, Vec<usize>) {
    let index: HashMap<&str, usize> = graph
        .node
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let n = graph.node.len();
    let keep = |i: usize| wanted.is_none_or(|w| w[i]);
    let mut indegree = vec![0usize; n];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, node) in graph.node.iter().enumerate() {
        if !keep(i) {
            continue;
        }
        for input in &node.input {
            let src = input.trim_start_matches('^');
            let src = src.rsplit_once(':').map_or(src, |(a, _)| a);
            if let Some(&j) = index.get(src) {
                if keep(j) {
                    indegree[i] += 1;
                    users[j].push(i);
                }
            }
        }
    }
    let mut order: Vec<usize> = (0..n).filter(|&i| keep(i) && indegree[i] == 0).collect();
    let mut head = 0;
    while head < order.len() {
        let i = order[head];
        head += 1;
        for &u in &users[i] {
            indegree[u] -= 1;
            if indegree[u] == 0 {
                order.push(u);
            }
        }
    }
    let mut placed = vec![false; n];
    for &i in &order {
        placed[i] = true;
    }
    let cyclic = (0..n).filter(|&i| keep(i) && !placed[i]).collect();
    (order, cyclic)
}

/// Whether `op` is a call DTensor traces through.
pub fn is_call(op: &str) -> bool {
    matches!(op, "PartitionedCall" | "StatefulPartitionedCall")
}

impl<'a> Builder<'a> {
    /// A builder over a model's functions.
    pub fn new(
        functions: &'a [FunctionDef],
        ops: &'a OpLibrary,
        versions: Option<&'a VersionDef>,
    ) -> Self {
        Builder {
            functions: functions
                .iter()
                .filter_map(|f| f.signature.as_ref().map(|s| (s.name.as_str(), f)))
                .collect(),
            ops,
            versions,
            converted: HashMap::new(),
        }
    }

    /// Adds the main graph's nodes that the tensors `fetch` depend on (their data inputs,
    /// transitively); placeholders named in `feeds` become the given values. Returns the
    /// values of `fetch`.
    pub fn add_main(
        &mut self,
        program: &mut Program,
        graph: GraphDef,
        feeds: &HashMap<String, ValueId>,
        fetch: &[String],
    ) -> Result<Vec<ValueId>, String> {
        let index: HashMap<String, usize> = graph
            .node
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        let mut wanted = vec![false; graph.node.len()];
        let mut stack: Vec<usize> = Vec::new();
        for t in fetch {
            let (n, _) = split_tensor(t).ok_or_else(|| format!("bad tensor name {t:?}"))?;
            let i = *index
                .get(n)
                .ok_or_else(|| format!("tensor {t:?} names no node of the graph"))?;
            stack.push(i);
        }
        while let Some(i) = stack.pop() {
            if wanted[i] {
                continue;
            }
            wanted[i] = true;
            if feeds.contains_key(&graph.node[i].name) {
                continue;
            }
            for input in &graph.node[i].input {
                if let Some((n, _)) = split_tensor(input) {
                    if let Some(&j) = index.get(n) {
                        stack.push(j);
                    }
                }
            }
        }
        program.graphs.push(Rc::new(graph));
        let g = program.graphs.len() - 1;
        let (names, _) = self.add_graph(program, g, "", &[], Some(&wanted), feeds, 0)?;
        fetch
            .iter()
            .map(|t| {
                let (n, k) = split_tensor(t).ok_or_else(|| format!("bad tensor name {t:?}"))?;
                names
                    .get(n)
                    .and_then(|v| v.get(k))
                    .copied()
                    .ok_or_else(|| format!("tensor {t:?} has no value"))
            })
            .collect()
    }

    /// The graph of function `name`, converted once.
    fn function_graph(
        &mut self,
        program: &mut Program,
        name: &str,
    ) -> Result<Option<usize>, String> {
        if let Some(&g) = self.converted.get(name) {
            return Ok(Some(g));
        }
        let Some(f) = self.functions.get(name) else {
            return Ok(None);
        };
        let fg = function_to_graph(f, self.ops, self.versions).map_err(|e| e.to_string())?;
        program.graphs.push(Rc::new(fg.graph));
        let g = program.graphs.len() - 1;
        self.converted.insert(name.to_string(), g);
        Ok(Some(g))
    }

    /// Adds the nodes of graph `g` (all, or those `wanted`), with its `_Arg`s bound to
    /// `args` and the placeholders in `feeds` to their values. Returns every node's values
    /// by name and the `_Retval` values in order.
    #[allow(clippy::too_many_arguments)]
    fn add_graph(
        &mut self,
        program: &mut Program,
        g: usize,
        prefix: &str,
        args: &[ValueId],
        wanted: Option<&[bool]>,
        feeds: &HashMap<String, ValueId>,
        depth: usize,
    ) -> Result<(HashMap<String, Vec<ValueId>>, Vec<ValueId>), String> {
        if depth > MAX_CALL_DEPTH {
            return Err(format!(
                "calls nest deeper than {MAX_CALL_DEPTH} at {prefix}"
            ));
        }
        let graph = Rc::clone(&program.graphs[g]);
        let (order, cyclic) = topo_order(&graph, wanted);
        for i in cyclic {
            program.skipped.push(format!(
                "{prefix}{}: on a cycle (not planned)",
                graph.node[i].name
            ));
        }
        let mut names: HashMap<String, Vec<ValueId>> = HashMap::with_capacity(order.len());
        let mut retvals: Vec<Option<ValueId>> = Vec::new();
        for i in order {
            let node: &NodeDef = &graph.node[i];
            if let Some(&v) = feeds.get(&node.name) {
                names.insert(node.name.clone(), vec![v]);
                continue;
            }
            if node.op == "NoOp" {
                continue;
            }
            let mut inputs = Vec::with_capacity(node.input.len());
            for t in &node.input {
                let Some((n, k)) = split_tensor(t) else {
                    continue;
                };
                let v = match names.get(n).and_then(|vs| vs.get(k)) {
                    Some(&v) => v,
                    None => {
                        program.skipped.push(format!(
                            "{prefix}{}: input {t} has no known value (taken as unknown)",
                            node.name
                        ));
                        program.new_value(Value::default())
                    }
                };
                inputs.push(v);
            }
            let attr = &node.attr;
            if node.op == ARG_OP {
                let idx = attrs::int(attr, "index").unwrap_or(-1);
                let v = usize::try_from(idx)
                    .ok()
                    .and_then(|i| args.get(i).copied())
                    .ok_or_else(|| {
                        format!("{prefix}{}: _Arg index {idx} out of range", node.name)
                    })?;
                names.insert(node.name.clone(), vec![v]);
                continue;
            }
            if node.op == RETVAL_OP {
                let idx = usize::try_from(attrs::int(attr, "index").unwrap_or(-1))
                    .map_err(|_| format!("{prefix}{}: bad _Retval index", node.name))?;
                if let Some(&v) = inputs.first() {
                    if retvals.len() <= idx {
                        retvals.resize(idx + 1, None);
                    }
                    retvals[idx] = Some(v);
                }
                continue;
            }
            if is_call(&node.op) {
                if let Some(fname) = attrs::func(attr, "f") {
                    if let Some(callee) = self.function_graph(program, &fname)? {
                        let inner = format!("{prefix}{}/", node.name);
                        let (_, rets) = self.add_graph(
                            program,
                            callee,
                            &inner,
                            &inputs,
                            None,
                            &HashMap::new(),
                            depth + 1,
                        )?;
                        names.insert(node.name.clone(), rets);
                        continue;
                    }
                }
            }
            if node.op == "VarHandleOp" {
                let var = Variable {
                    name: attrs::string(attr, "shared_name")
                        .filter(|s| !s.is_empty())
                        .unwrap_or_else(|| node.name.clone()),
                    shape: attrs::shape(attr, "shape"),
                    dtype: attrs::dtype(attr, "dtype").unwrap_or(1),
                };
                program.variables.push(var);
                let v = program.new_value(Value {
                    variable: Some(program.variables.len() - 1),
                    dtype: 20,
                    ..Value::default()
                });
                names.insert(node.name.clone(), vec![v]);
                continue;
            }
            let id = program.nodes.len();
            let shapes = attrs::output_shapes(attr).unwrap_or_else(|| vec![None]);
            let dtype = attrs::output_dtype(&node.op, attr);
            let ints = if node.op == "Const" {
                attrs::const_ints(attr)
            } else {
                None
            };
            let mut outputs = Vec::with_capacity(shapes.len().max(1));
            for (k, shape) in shapes.into_iter().enumerate() {
                outputs.push(program.new_value(Value {
                    producer: Some(id),
                    shape,
                    dtype,
                    ints: if k == 0 { ints.clone() } else { None },
                    ..Value::default()
                }));
            }
            let mut input_slots = Vec::with_capacity(inputs.len());
            for (operand, &v) in inputs.iter().enumerate() {
                input_slots.push(program.values[v].consumers.len());
                program.values[v].consumers.push((id, operand));
            }
            names.insert(node.name.clone(), outputs.clone());
            program.nodes.push(Node {
                name: format!("{prefix}{}", node.name),
                op: node.op.clone(),
                def: (g, i),
                inputs,
                input_slots,
                outputs,
            });
        }
        let retvals = retvals
            .into_iter()
            .map(|v| v.unwrap_or_else(|| program.new_value(Value::default())))
            .collect();
        Ok((names, retvals))
    }
}

//! The program DTensor would see: a signature's function and every function it calls,
//! flattened into one dataflow graph. Calls (`PartitionedCall`, `StatefulPartitionedCall`)
//! are passed through, as DTensor's propagation traces through them: a callee's arguments are
//! the caller's operands and the call's results are the callee's returns. Every node is
//! visited once per call site, so building is linear in the nodes; node definitions are
//! shared with the decoded model, never copied.

use std::collections::HashMap;
use std::rc::Rc;

use unbound_graph::OpLibrary;
use unbound_proto::tensorflow::OpDef;

use crate::attrs::{self, Attrs};
use crate::lite::{FunctionDef, NodeDef};

/// Index of a node in [`Program::nodes`].
pub type NodeId = usize;
/// Index of a value in [`Program::values`].
pub type ValueId = usize;

/// How deep calls may nest before the program is refused as malformed (recursion).
const MAX_CALL_DEPTH: usize = 64;

/// One op instance.
#[derive(Debug)]
pub struct Node {
    /// The node's name, prefixed by the calls it sits in (`call/inner_call/node`).
    pub name: String,
    /// Its op type.
    pub op: String,
    /// Which body of [`Program::bodies`] and which node of it.
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
    /// The node of the object graph it is, when a call captures it (TF2 models): the
    /// function's bound input at the place of this variable's handle.
    pub object: Option<usize>,
    /// Its object path (`vars/kernel`), from [`Variable::object`] (TF2 models).
    pub path: Option<String>,
}

/// The flattened program.
#[derive(Debug, Default)]
pub struct Program {
    /// The node lists nodes point into: the main graph's, then each function's.
    pub bodies: Vec<Rc<Vec<NodeDef>>>,
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
    /// Nodes left out, with why (cycles, unknown inputs).
    pub skipped: Vec<String>,
}

impl Program {
    /// The attributes of node `n`.
    pub fn attrs(&self, n: NodeId) -> &Attrs {
        let (b, i) = self.nodes[n].def;
        &self.bodies[b][i].attr
    }

    fn new_value(&mut self, v: Value) -> ValueId {
        self.values.push(v);
        self.values.len() - 1
    }
}

/// A function's body and signature, its nodes moved into [`Program::bodies`].
struct Function {
    body: usize,
    signature: OpDef,
    ret: Vec<String>,
}

/// Builds a [`Program`] from a model's main graph and functions.
pub struct Builder<'a> {
    functions: HashMap<String, Function>,
    ops: &'a OpLibrary,
    captures: HashMap<String, Vec<usize>>,
}

/// Whether `op` is a call DTensor traces through.
pub fn is_call(op: &str) -> bool {
    matches!(op, "PartitionedCall" | "StatefulPartitionedCall")
}

/// A tensor reference in a graph (`node`, `node:k`) or function body (`arg`,
/// `node:out_arg:k`): the node (or arg) and how to find the output.
enum Ref<'s> {
    /// Output `k` of a node, counted over all its outputs.
    Flat(&'s str, usize),
    /// Element `k` of output arg `arg` of a node.
    Arg(&'s str, &'s str, usize),
}

fn parse_ref(t: &str) -> Option<Ref<'_>> {
    if t.starts_with('^') {
        return None;
    }
    let mut parts = t.split(':');
    let node = parts.next()?;
    match (parts.next(), parts.next()) {
        (None, _) => Some(Ref::Flat(node, 0)),
        (Some(k), None) => k.parse().ok().map(|k| Ref::Flat(node, k)),
        (Some(arg), Some(k)) => k.parse().ok().map(|k| Ref::Arg(node, arg, k)),
    }
}

/// The node a reference names.
fn ref_node(t: &str) -> &str {
    let t = t.trim_start_matches('^');
    t.split(':').next().unwrap_or(t)
}

/// The nodes of `nodes` in an order where producers come first (Kahn's algorithm over data
/// and control inputs), restricted to `wanted` when given; nodes on cycles come second.
fn topo_order(
    nodes: &[NodeDef],
    index: &HashMap<&str, usize>,
    wanted: Option<&[bool]>,
) -> (Vec<usize>, Vec<usize>) {
    let n = nodes.len();
    let keep = |i: usize| wanted.is_none_or(|w| w[i]);
    let mut indegree = vec![0usize; n];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, node) in nodes.iter().enumerate() {
        if !keep(i) {
            continue;
        }
        for input in &node.input {
            if let Some(&j) = index.get(ref_node(input)) {
                if keep(j) && j != i {
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

/// How many tensors output arg `a` of `op` makes for a node with `attrs`.
fn arg_size(op: &OpDef, a: &unbound_proto::tensorflow::op_def::ArgDef, attrs: &Attrs) -> usize {
    if !a.number_attr.is_empty() {
        attrs::int(attrs, &a.number_attr)
            .or_else(|| {
                op.attr
                    .iter()
                    .find(|d| d.name == a.number_attr)
                    .and_then(|d| d.default_value.as_ref())
                    .and_then(|v| match v.value {
                        Some(unbound_proto::tensorflow::attr_value::Value::I(i)) => Some(i),
                        _ => None,
                    })
            })
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(1)
    } else if !a.type_list_attr.is_empty() {
        attrs::type_count(attrs, &a.type_list_attr).unwrap_or(1)
    } else {
        1
    }
}

/// Where output arg `arg` of `op` starts among a node's outputs.
fn arg_offset(op: &OpDef, attrs: &Attrs, arg: &str) -> Option<usize> {
    let mut flat = 0;
    for a in &op.output_arg {
        if a.name == arg {
            return Some(flat);
        }
        flat += arg_size(op, a, attrs);
    }
    None
}

/// How many outputs a node of `op` with `attrs` has.
fn output_count(op: &OpDef, attrs: &Attrs) -> usize {
    op.output_arg.iter().map(|a| arg_size(op, a, attrs)).sum()
}

impl<'a> Builder<'a> {
    /// A builder over `functions` (their node lists moved into `program`).
    pub fn new(program: &mut Program, functions: Vec<FunctionDef>, ops: &'a OpLibrary) -> Self {
        let mut map = HashMap::with_capacity(functions.len());
        for f in functions {
            let Some(signature) = f.signature else {
                continue;
            };
            let ret = signature
                .output_arg
                .iter()
                .map(|a| f.ret.get(&a.name).cloned().unwrap_or_default())
                .collect();
            program.bodies.push(Rc::new(f.node_def));
            map.insert(
                signature.name.clone(),
                Function {
                    body: program.bodies.len() - 1,
                    signature,
                    ret,
                },
            );
        }
        Builder {
            functions: map,
            ops,
            captures: HashMap::new(),
        }
    }

    /// Sets the captures of concrete functions (function name -> the object graph's nodes
    /// of its bound inputs, in order): a call's trailing operands, one per bound input,
    /// which tie the variables passed there to their objects ([`Variable::object`]).
    pub fn with_captures(mut self, captures: HashMap<String, Vec<usize>>) -> Self {
        self.captures = captures;
        self
    }

    /// Marks the variables a call of `fname` with `operands` captures with their objects:
    /// the last operands, one per bound input. A variable keeps the first object found.
    fn note_captures(&self, program: &mut Program, fname: &str, operands: &[ValueId]) {
        let Some(bound) = self.captures.get(fname) else {
            return;
        };
        let Some(first) = operands.len().checked_sub(bound.len()) else {
            return;
        };
        for (&v, &object) in operands[first..].iter().zip(bound) {
            if let Some(var) = program.values[v].variable {
                let slot = &mut program.variables[var].object;
                slot.get_or_insert(object);
            }
        }
    }

    /// The OpDef of `op`: a library function's signature or a registered op.
    fn op_def(&self, op: &str) -> Option<&OpDef> {
        self.functions
            .get(op)
            .map(|f| &f.signature)
            .or_else(|| self.ops.op_def(op))
    }

    /// Adds the main graph's nodes the tensors `fetch` depend on; placeholders named in
    /// `feeds` become the given values. Returns the values of `fetch`.
    pub fn add_main(
        &mut self,
        program: &mut Program,
        nodes: Vec<NodeDef>,
        feeds: &HashMap<String, ValueId>,
        fetch: &[String],
    ) -> Result<Vec<ValueId>, String> {
        let mut wanted = vec![false; nodes.len()];
        {
            let index: HashMap<&str, usize> = nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (n.name.as_str(), i))
                .collect();
            let mut stack: Vec<usize> = Vec::new();
            for t in fetch {
                let i = *index
                    .get(ref_node(t))
                    .ok_or_else(|| format!("tensor {t:?} names no node of the graph"))?;
                stack.push(i);
            }
            while let Some(i) = stack.pop() {
                if wanted[i] {
                    continue;
                }
                wanted[i] = true;
                if feeds.contains_key(&nodes[i].name) {
                    continue;
                }
                for input in &nodes[i].input {
                    if input.starts_with('^') {
                        continue;
                    }
                    if let Some(&j) = index.get(ref_node(input)) {
                        stack.push(j);
                    }
                }
            }
        }
        program.bodies.push(Rc::new(nodes));
        let body = program.bodies.len() - 1;
        let values = self.add_body(program, body, "", &[], &[], Some(&wanted), feeds, fetch, 0)?;
        if let Some(missing) = fetch.iter().zip(&values).find(|(_, v)| v.is_none()) {
            return Err(format!("tensor {:?} has no value", missing.0));
        }
        Ok(values.into_iter().flatten().collect())
    }

    /// The value a tensor reference `t` of body `nodes` names: an arg, or an output of a node
    /// already added (`values[node]`), counted by output arg for `node:out_arg:k`.
    fn resolve(
        &self,
        nodes: &[NodeDef],
        index: &HashMap<&str, usize>,
        values: &[Vec<ValueId>],
        args: &HashMap<&str, ValueId>,
        t: &str,
    ) -> Option<ValueId> {
        match parse_ref(t)? {
            Ref::Flat(n, 0) if args.contains_key(n) => args.get(n).copied(),
            Ref::Flat(n, k) => values.get(*index.get(n)?)?.get(k).copied(),
            Ref::Arg(n, arg, k) => {
                let i = *index.get(n)?;
                let node = &nodes[i];
                // Single-output ops need no offset (the common case, and the fast one); a
                // call's results, or those of an op we know nothing of, are one flat list.
                let offset = match self.op_def(&node.op) {
                    Some(op) if op.output_arg.len() > 1 && !is_call(&node.op) => {
                        arg_offset(op, &node.attr, arg)?
                    }
                    _ => 0,
                };
                values[i].get(offset + k).copied()
            }
        }
    }

    /// Adds the nodes of body `body` (all, or those `wanted`), its args (`arg_names`) bound
    /// to `args` and the placeholders in `feeds` to their values; returns the values of the
    /// tensors `ret` (`None` where a tensor has none).
    #[allow(clippy::too_many_arguments)]
    fn add_body(
        &mut self,
        program: &mut Program,
        body: usize,
        prefix: &str,
        arg_names: &[String],
        args: &[ValueId],
        wanted: Option<&[bool]>,
        feeds: &HashMap<String, ValueId>,
        ret: &[String],
        depth: usize,
    ) -> Result<Vec<Option<ValueId>>, String> {
        if depth > MAX_CALL_DEPTH {
            return Err(format!(
                "calls nest deeper than {MAX_CALL_DEPTH} at {prefix}"
            ));
        }
        let nodes = Rc::clone(&program.bodies[body]);
        let index: HashMap<&str, usize> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let (order, cyclic) = topo_order(&nodes, &index, wanted);
        for i in cyclic {
            program.skipped.push(format!(
                "{prefix}{}: on a cycle (not planned)",
                nodes[i].name
            ));
        }
        let args_by_name: HashMap<&str, ValueId> = arg_names
            .iter()
            .map(String::as_str)
            .zip(args.iter().copied())
            .collect();
        let mut values: Vec<Vec<ValueId>> = vec![Vec::new(); nodes.len()];
        for i in order {
            let node: &NodeDef = &nodes[i];
            if let Some(&v) = feeds.get(&node.name) {
                values[i] = vec![v];
                continue;
            }
            if node.op == "NoOp" {
                continue;
            }
            let mut inputs = Vec::with_capacity(node.input.len());
            for t in &node.input {
                if t.starts_with('^') {
                    continue;
                }
                let v = match self.resolve(&nodes, &index, &values, &args_by_name, t) {
                    Some(v) => v,
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
            if is_call(&node.op) {
                if let Some(fname) = attrs::func(attr, "f") {
                    self.note_captures(program, &fname, &inputs);
                    if let Some(f) = self.functions.get(&fname) {
                        let callee = f.body;
                        let callee_args: Vec<String> = f
                            .signature
                            .input_arg
                            .iter()
                            .map(|a| a.name.clone())
                            .collect();
                        let callee_ret = f.ret.clone();
                        let inner = format!("{prefix}{}/", node.name);
                        let rets = self.add_body(
                            program,
                            callee,
                            &inner,
                            &callee_args,
                            &inputs,
                            None,
                            &HashMap::new(),
                            &callee_ret,
                            depth + 1,
                        )?;
                        values[i] = rets
                            .into_iter()
                            .map(|v| v.unwrap_or_else(|| program.new_value(Value::default())))
                            .collect();
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
                    object: None,
                    path: None,
                };
                program.variables.push(var);
                let v = program.new_value(Value {
                    variable: Some(program.variables.len() - 1),
                    dtype: 20,
                    ..Value::default()
                });
                values[i] = vec![v];
                continue;
            }
            let id = program.nodes.len();
            let mut shapes = attrs::output_shapes(attr).unwrap_or_default();
            let declared = self.op_def(&node.op).map(|op| output_count(op, attr));
            let count = declared.unwrap_or(0).max(shapes.len()).max(1);
            shapes.resize(count, None);
            let dtype = attrs::output_dtype(&node.op, attr);
            let ints = if node.op == "Const" {
                attrs::const_ints(attr)
            } else {
                None
            };
            let mut outputs = Vec::with_capacity(count);
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
            values[i] = outputs.clone();
            program.nodes.push(Node {
                name: format!("{prefix}{}", node.name),
                op: node.op.clone(),
                def: (body, i),
                inputs,
                input_slots,
                outputs,
            });
        }
        Ok(ret
            .iter()
            .map(|t| self.resolve(&nodes, &index, &values, &args_by_name, t))
            .collect())
    }
}

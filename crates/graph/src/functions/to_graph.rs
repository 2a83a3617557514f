//! FunctionDef -> GraphDef, as TensorFlow's `MakeGrapplerFunctionItem`.

use std::collections::{BTreeMap, HashMap, HashSet};

use unbound_proto::tensorflow::attr_value::Value;
use unbound_proto::tensorflow::{
    AttrValue, DataType, FunctionDef, GraphDef, NodeDef, OpDef, VersionDef,
};

use super::attrs::{output_ranges, with_defaults, OutputRange};
use super::{
    check_not_parametrized, op_def_of, signature, tensor_name, FunctionError, FunctionGraph,
    ARG_OP, DEVICE_ARG_OP, DEVICE_RETVAL_OP, INTS_ON_DEVICE_ATTR, RETVAL_OP, RETVAL_SUFFIX,
};
use crate::ops::OpLibrary;

/// The most tensors one FunctionDef input (`node:out_arg` naming a whole list) may expand to.
const MAX_LIST_EXPANSION: usize = 1 << 20;

/// Offset TensorFlow adds to a `DataType` to make its reference type.
const REF_OFFSET: i32 = 100;

/// Converts `function` into the graph TensorFlow's meta optimizer gives optimizers for it.
///
/// `ops` must know every op the body uses (standard ops, the library's functions, stripped
/// ops). `versions` is the main graph's: its `producer` becomes the function graph's. See the
/// module docs for the graph's shape; `graph.library` is left unset.
pub fn function_to_graph(
    function: &FunctionDef,
    ops: &OpLibrary,
    versions: Option<&VersionDef>,
) -> Result<FunctionGraph, FunctionError> {
    let signature = signature(function)?;
    check_not_parametrized(function, signature)?;
    let mut index = Index::build(function, signature, ops)?;
    let invalid = |message: String| FunctionError::Invalid {
        function: signature.name.clone(),
        message,
    };

    let ints_on_device = matches!(
        function
            .attr
            .get(INTS_ON_DEVICE_ATTR)
            .and_then(|a| a.value.as_ref()),
        Some(Value::B(true))
    );
    let mut out = FunctionGraph::default();
    let mut nodes = Vec::with_capacity(
        signature.input_arg.len() + function.node_def.len() + signature.output_arg.len(),
    );

    if let Some(bad) = function
        .arg_attr
        .keys()
        .find(|&&i| i as usize >= signature.input_arg.len())
    {
        return Err(invalid(format!(
            "Invalid attribute index, got {bad} but expected less than {}",
            signature.input_arg.len()
        )));
    }
    for (i, arg) in signature.input_arg.iter().enumerate() {
        let mut attr = BTreeMap::new();
        attr.insert("T".to_string(), type_attr(arg.r#type, arg.is_ref));
        attr.insert("index".to_string(), int_attr(i as i64));
        if let Some(id) = function.resource_arg_unique_id.get(&(i as u32)) {
            attr.insert(
                "_resource_arg_unique_id".to_string(),
                int_attr(i64::from(*id)),
            );
        }
        if let Some(arg_attrs) = function.arg_attr.get(&(i as u32)) {
            for (name, value) in &arg_attrs.attr {
                attr.entry(name.clone()).or_insert_with(|| value.clone());
            }
        }
        let on_device = ints_on_device && arg.r#type == DataType::DtInt32 as i32;
        nodes.push(NodeDef {
            name: arg.name.clone(),
            op: if on_device { DEVICE_ARG_OP } else { ARG_OP }.to_string(),
            attr,
            ..NodeDef::default()
        });
        out.feed.push(arg.name.clone());
    }

    for node in &function.node_def {
        nodes.push(index.convert_node(node)?);
    }

    for (i, arg) in signature.output_arg.iter().enumerate() {
        let ret = function
            .ret
            .get(&arg.name)
            .ok_or_else(|| invalid(format!("Return {} missing.", arg.name)))?;
        let tensors = index
            .resolve(ret)
            .ok_or_else(|| invalid(format!("Return {} -> {ret} is not found.", arg.name)))?;
        let [tensor] = <[String; 1]>::try_from(tensors).map_err(|tensors| {
            invalid(format!(
                "Return {} -> {ret} is {} tensors, expected 1",
                arg.name,
                tensors.len()
            ))
        })?;
        let name = format!("{}{RETVAL_SUFFIX}", arg.name);
        if index.names.contains(name.as_str()) {
            return Err(invalid(format!("Duplicated ret name: {name}")));
        }
        let mut attr = BTreeMap::new();
        attr.insert("T".to_string(), type_attr(arg.r#type, arg.is_ref));
        attr.insert("index".to_string(), int_attr(i as i64));
        let on_device = ints_on_device && arg.r#type == DataType::DtInt32 as i32;
        nodes.push(NodeDef {
            name: name.clone(),
            op: if on_device {
                DEVICE_RETVAL_OP
            } else {
                RETVAL_OP
            }
            .to_string(),
            input: vec![tensor],
            attr,
            ..NodeDef::default()
        });
        out.fetch.push(name);
    }

    for (name, node) in &function.control_ret {
        if !index.body.contains_key(node.as_str()) {
            return Err(invalid(format!(
                "control output {name} names node {node}, which is not in the body"
            )));
        }
        out.keep_ops.push(node.clone());
    }

    out.graph = GraphDef {
        node: nodes,
        versions: versions.map(|v| VersionDef {
            producer: v.producer,
            ..VersionDef::default()
        }),
        ..GraphDef::default()
    };
    Ok(out)
}

/// A body node's attrs, its op's defaults added, and its output ranges.
struct BodyNode {
    attrs: BTreeMap<String, AttrValue>,
    ranges: Vec<OutputRange>,
}

/// What a FunctionDef input can name: args and body nodes' outputs.
struct Index<'a> {
    function: &'a str,
    /// Input arg names.
    args: HashSet<&'a str>,
    /// Body node name -> its attrs (defaults added) and output ranges.
    body: HashMap<&'a str, BodyNode>,
    /// Every arg and body node name.
    names: HashSet<&'a str>,
}

impl<'a> Index<'a> {
    fn build(
        function: &'a FunctionDef,
        signature: &'a OpDef,
        ops: &'a OpLibrary,
    ) -> Result<Self, FunctionError> {
        let name = signature.name.as_str();
        let mut index = Index {
            function: name,
            args: HashSet::new(),
            body: HashMap::new(),
            names: HashSet::new(),
        };
        let duplicate = |what: &str, node: &str| FunctionError::Invalid {
            function: name.to_string(),
            message: format!("Duplicated {what} name: {node}"),
        };
        for arg in &signature.input_arg {
            if !index.names.insert(&arg.name) {
                return Err(duplicate("arg", &arg.name));
            }
            index.args.insert(&arg.name);
        }
        for node in &function.node_def {
            if !index.names.insert(&node.name) {
                return Err(duplicate("node", &node.name));
            }
            let op = op_def_of(ops, name, node)?;
            let attrs = with_defaults(&node.attr, op);
            let ranges = output_ranges(op, &attrs).map_err(|message| FunctionError::Invalid {
                function: name.to_string(),
                message: format!("node {}: {message}", node.name),
            })?;
            index.body.insert(&node.name, BodyNode { attrs, ranges });
        }
        Ok(index)
    }

    /// The GraphDef tensors a FunctionDef data input names, `None` if it names none.
    fn resolve(&self, input: &str) -> Option<Vec<String>> {
        let parts: Vec<&str> = input.split(':').collect();
        match parts[..] {
            [arg] if self.args.contains(arg) => Some(vec![arg.to_string()]),
            [arg, i] if self.args.contains(arg) => {
                (i.parse::<usize>().ok()? == 0).then(|| vec![arg.to_string()])
            }
            [node, out] => {
                let range = self.range(node, out)?;
                if range.len > MAX_LIST_EXPANSION {
                    return None;
                }
                Some(
                    (range.start..range.start + range.len)
                        .map(|i| tensor_name(node, i))
                        .collect(),
                )
            }
            [node, out, j] => {
                let range = self.range(node, out)?;
                let j = j.parse::<usize>().ok()?;
                (j < range.len).then(|| vec![tensor_name(node, range.start + j)])
            }
            _ => None,
        }
    }

    fn range(&self, node: &str, out: &str) -> Option<&OutputRange> {
        let body = self.body.get(node)?;
        body.ranges.iter().find(|r| r.name == out)
    }

    /// `node` with its op's default attrs and GraphDef-form inputs. The attrs are moved out of
    /// the index (each node is converted once; only its output ranges are asked again): the
    /// node was copied whole, then its attrs again (issue 15: the copies of every attr map
    /// were a tenth of the host's time on a library of thousands of functions).
    fn convert_node(&mut self, node: &NodeDef) -> Result<NodeDef, FunctionError> {
        let unknown = |input: &str| FunctionError::UnknownInput {
            function: self.function.to_string(),
            node: node.name.clone(),
            input: input.to_string(),
        };
        let attr = match self.body.get_mut(node.name.as_str()) {
            Some(body) => std::mem::take(&mut body.attrs),
            None => node.attr.clone(),
        };
        // Every field listed: a field added to NodeDef must be decided here.
        let mut converted = NodeDef {
            name: node.name.clone(),
            op: node.op.clone(),
            input: Vec::with_capacity(node.input.len()),
            device: node.device.clone(),
            attr,
            experimental_debug_info: node.experimental_debug_info.clone(),
            experimental_type: node.experimental_type.clone(),
        };
        let mut seen_control = false;
        for input in &node.input {
            if let Some(name) = input.strip_prefix('^') {
                if !self.names.contains(name) {
                    return Err(unknown(input));
                }
                seen_control = true;
                converted.input.push(input.clone());
            } else if seen_control {
                return Err(FunctionError::Invalid {
                    function: self.function.to_string(),
                    message: format!(
                        "node {}: data input {input} comes after a control input",
                        node.name
                    ),
                });
            } else {
                converted
                    .input
                    .extend(self.resolve(input).ok_or_else(|| unknown(input))?);
            }
        }
        Ok(converted)
    }
}

/// A `type` attr; `is_ref` makes it the reference type.
fn type_attr(dtype: i32, is_ref: bool) -> AttrValue {
    let dtype = if is_ref && dtype < REF_OFFSET {
        dtype + REF_OFFSET
    } else {
        dtype
    };
    AttrValue {
        value: Some(Value::Type(dtype)),
    }
}

/// An `int` attr.
fn int_attr(i: i64) -> AttrValue {
    AttrValue {
        value: Some(Value::I(i)),
    }
}

//! GraphDef -> FunctionDef, as TensorFlow's `MakeFunctionDef`.

use std::collections::{BTreeMap, HashMap};

use unbound_proto::tensorflow::{FunctionDef, GraphDef, NodeDef, OpDef};

use super::attrs::{output_ranges, strip_added_defaults, with_defaults, OutputRange};
use super::{
    check_not_parametrized, op_def_of, parse_tensor_name, signature, FunctionError, ARG_OP,
    DEVICE_ARG_OP, DEVICE_RETVAL_OP, RETVAL_OP, RETVAL_SUFFIX,
};
use crate::ops::OpLibrary;

/// Converts `optimized`, the graph [`function_to_graph`](super::function_to_graph) made from
/// `original` after an optimizer rewrote it, back into a FunctionDef.
///
/// The signature, `attr`, `arg_attr`, `resource_arg_unique_id` and `control_ret` come from
/// `original`; the body is every node of `optimized` other than the `_Arg` and `_Retval` nodes
/// (recognized by op, and by the names the conversion gave them), with inputs rewritten to the
/// FunctionDef form (`node:out_arg:i`, bare arg names); `ret` is rebuilt from the `_Retval`
/// nodes' inputs. Nodes may have been removed, replaced or added: output arg names are taken
/// from the ops of the nodes now in `optimized`. The default attrs the forward conversion added
/// are removed again from nodes that keep their original name and op.
pub fn graph_to_function(
    original: &FunctionDef,
    optimized: &GraphDef,
    ops: &OpLibrary,
) -> Result<FunctionDef, FunctionError> {
    let signature = signature(original)?;
    check_not_parametrized(original, signature)?;
    let name = signature.name.as_str();
    let invalid = |message: String| FunctionError::Invalid {
        function: name.to_string(),
        message,
    };

    let retval_names: HashMap<String, &str> = signature
        .output_arg
        .iter()
        .map(|arg| (format!("{}{RETVAL_SUFFIX}", arg.name), arg.name.as_str()))
        .collect();
    let is_arg = |node: &NodeDef| {
        node.op == ARG_OP
            || node.op == DEVICE_ARG_OP
            || signature.input_arg.iter().any(|a| a.name == node.name)
    };
    let is_retval = |node: &NodeDef| {
        node.op == RETVAL_OP || node.op == DEVICE_RETVAL_OP || retval_names.contains_key(&node.name)
    };

    let mut outputs = Outputs {
        function: name,
        args: signature
            .input_arg
            .iter()
            .map(|a| a.name.as_str())
            .collect(),
        body: HashMap::new(),
    };
    let mut body: Vec<(&NodeDef, &OpDef)> = Vec::new();
    let mut retvals: HashMap<&str, &NodeDef> = HashMap::new();
    for node in &optimized.node {
        if is_retval(node) {
            retvals.insert(node.name.as_str(), node);
            continue;
        }
        if is_arg(node) {
            continue;
        }
        let op = op_def_of(ops, name, node)?;
        let ranges = output_ranges(op, &with_defaults(&node.attr, op))
            .map_err(|message| invalid(format!("node {}: {message}", node.name)))?;
        if outputs.body.insert(node.name.as_str(), ranges).is_some() {
            return Err(invalid(format!("Duplicated node name: {}", node.name)));
        }
        body.push((node, op));
    }

    let originals: HashMap<&str, &NodeDef> = original
        .node_def
        .iter()
        .map(|n| (n.name.as_str(), n))
        .collect();
    let mut node_def = Vec::with_capacity(body.len());
    for (node, op) in body {
        let mut converted = node.clone();
        for input in &mut converted.input {
            *input = outputs.function_input(input, &node.name)?;
        }
        if let Some(before) = originals.get(node.name.as_str()) {
            if before.op == node.op {
                strip_added_defaults(&mut converted, before, op);
            }
        }
        node_def.push(converted);
    }

    let mut ret = BTreeMap::new();
    for arg in &signature.output_arg {
        let retval_name = format!("{}{RETVAL_SUFFIX}", arg.name);
        let retval = retvals.get(retval_name.as_str()).ok_or_else(|| {
            invalid(format!(
                "Can't find an output tensor for the output node: {retval_name}"
            ))
        })?;
        let [input] = retval.input.as_slice() else {
            return Err(invalid(format!(
                "_Retval node must have single input: {retval_name} has {:?}",
                retval.input
            )));
        };
        if input.starts_with('^') {
            return Err(invalid(format!(
                "_Retval node {retval_name} has only the control input {input}"
            )));
        }
        ret.insert(
            arg.name.clone(),
            outputs.function_input(input, &retval_name)?,
        );
    }

    for (output, node) in &original.control_ret {
        if !outputs.body.contains_key(node.as_str()) {
            return Err(invalid(format!(
                "control output {output}: node {node} is no longer in the graph"
            )));
        }
    }

    Ok(FunctionDef {
        signature: Some(signature.clone()),
        attr: original.attr.clone(),
        arg_attr: original.arg_attr.clone(),
        resource_arg_unique_id: original.resource_arg_unique_id.clone(),
        node_def,
        ret,
        control_ret: original.control_ret.clone(),
    })
}

/// What a GraphDef input can name: the function's args and the body nodes' outputs.
struct Outputs<'a> {
    function: &'a str,
    args: Vec<&'a str>,
    body: HashMap<&'a str, Vec<OutputRange>>,
}

impl Outputs<'_> {
    /// The FunctionDef form of the GraphDef input `input` of node `node`.
    fn function_input(&self, input: &str, node: &str) -> Result<String, FunctionError> {
        let unknown = || FunctionError::UnknownInput {
            function: self.function.to_string(),
            node: node.to_string(),
            input: input.to_string(),
        };
        if let Some(source) = input.strip_prefix('^') {
            return if self.args.contains(&source) || self.body.contains_key(source) {
                Ok(input.to_string())
            } else {
                Err(unknown())
            };
        }
        let (source, index) = parse_tensor_name(input);
        if self.args.contains(&source) {
            return if index == 0 {
                Ok(source.to_string())
            } else {
                Err(unknown())
            };
        }
        let ranges = self.body.get(source).ok_or_else(unknown)?;
        let range = ranges
            .iter()
            .find(|r| index >= r.start && index - r.start < r.len)
            .ok_or_else(unknown)?;
        Ok(format!("{source}:{}:{}", range.name, index - range.start))
    }
}

//! Building and reading `AttrValue`s and node input strings, the small vocabulary every
//! rewrite here speaks.

use std::collections::HashSet;

use bytes::Bytes;
use unbound_proto::tensorflow::attr_value::{ListValue, Value};
use unbound_proto::tensorflow::{AttrValue, DataType, FunctionDef, NameAttrList, NodeDef};

/// The attribute that places a node in a TPU replicate cluster (TensorFlow's `_tpu_replicate`).
pub const TPU_REPLICATE: &str = "_tpu_replicate";
/// `TPUCompilationResult`'s attribute naming its cluster.
pub const TPU_COMPILATION_STATUS: &str = "_tpu_compilation_status";
/// The pivot `NoOp`'s attribute naming its cluster.
pub const PIVOT_FOR_CLUSTER: &str = "_pivot_for_cluster";
/// Marks the `Identity` after each replicated input.
pub const TPU_INPUT_IDENTITY: &str = "_tpu_input_identity";
/// Marks the `Identity` before each replicated output.
pub const TPU_OUTPUT_IDENTITY: &str = "_tpu_output_identity";
/// Where `tpu.rewrite` places the output identities (without SPMD).
pub const TPU_REPLICATED_CORE: &str = "/device:TPU_REPLICATED_CORE:0";

/// The call ops whose `f` is called with the node's inputs as arguments.
pub const CALL_OPS: [&str; 3] = [
    "StatefulPartitionedCall",
    "PartitionedCall",
    "TPUPartitionedCall",
];
/// `PartitionedCall` attributes `TPUPartitionedCall`'s OpDef does not have.
pub const PARTITIONED_CALL_ONLY: [&str; 3] = ["config", "config_proto", "executor_type"];

/// A string attribute.
pub fn s(value: &str) -> AttrValue {
    AttrValue {
        value: Some(Value::S(Bytes::from(value.as_bytes().to_vec()))),
    }
}

/// An int attribute.
pub fn i(value: i64) -> AttrValue {
    AttrValue {
        value: Some(Value::I(value)),
    }
}

/// A bool attribute.
pub fn b(value: bool) -> AttrValue {
    AttrValue {
        value: Some(Value::B(value)),
    }
}

/// A type attribute.
pub fn ty(value: i32) -> AttrValue {
    AttrValue {
        value: Some(Value::Type(value)),
    }
}

/// A list(type) attribute.
pub fn types(values: &[i32]) -> AttrValue {
    AttrValue {
        value: Some(Value::List(ListValue {
            r#type: values.to_vec(),
            ..ListValue::default()
        })),
    }
}

/// A list(int) attribute.
pub fn ints(values: &[i64]) -> AttrValue {
    AttrValue {
        value: Some(Value::List(ListValue {
            i: values.to_vec(),
            ..ListValue::default()
        })),
    }
}

/// A func attribute naming `name`.
pub fn func(name: &str) -> AttrValue {
    AttrValue {
        value: Some(Value::Func(NameAttrList {
            name: name.to_string(),
            attr: Default::default(),
        })),
    }
}

/// The function a func attribute names.
pub fn func_name(value: &AttrValue) -> Option<&str> {
    match &value.value {
        Some(Value::Func(f)) => Some(&f.name),
        _ => None,
    }
}

/// Every function name an attribute value refers to (`func` and `list(func)`, and the
/// attributes of those).
pub fn referenced_functions<'a>(value: &'a AttrValue, out: &mut Vec<&'a str>) {
    match &value.value {
        Some(Value::Func(f)) => {
            out.push(&f.name);
            for v in f.attr.values() {
                referenced_functions(v, out);
            }
        }
        Some(Value::List(list)) => {
            for f in &list.func {
                out.push(&f.name);
                for v in f.attr.values() {
                    referenced_functions(v, out);
                }
            }
        }
        _ => {}
    }
}

/// A string attribute's value.
pub fn get_s<'a>(node: &'a NodeDef, name: &str) -> Option<&'a [u8]> {
    match node.attr.get(name).and_then(|v| v.value.as_ref()) {
        Some(Value::S(s)) => Some(s),
        _ => None,
    }
}

/// An int attribute's value.
pub fn get_i(node: &NodeDef, name: &str) -> Option<i64> {
    match node.attr.get(name).and_then(|v| v.value.as_ref()) {
        Some(Value::I(i)) => Some(*i),
        _ => None,
    }
}

/// A list(type) attribute's value (empty when absent).
pub fn get_types(node: &NodeDef, name: &str) -> Vec<i32> {
    match node.attr.get(name).and_then(|v| v.value.as_ref()) {
        Some(Value::List(l)) => l.r#type.clone(),
        _ => Vec::new(),
    }
}

/// A type attribute's value.
pub fn get_type(node: &NodeDef, name: &str) -> Option<i32> {
    match node.attr.get(name).and_then(|v| v.value.as_ref()) {
        Some(Value::Type(t)) => Some(*t),
        _ => None,
    }
}

/// The input and output types of a function's signature; `None` when an argument's type is
/// given by an attribute (a polymorphic function, which saved concrete functions never are).
pub fn signature_types(function: &FunctionDef) -> Option<(Vec<i32>, Vec<i32>)> {
    let sig = function.signature.as_ref()?;
    let concrete = |args: &[unbound_proto::tensorflow::op_def::ArgDef]| {
        args.iter()
            .map(|a| {
                (a.type_attr.is_empty() && a.number_attr.is_empty() && a.type_list_attr.is_empty())
                    .then_some(a.r#type)
            })
            .collect::<Option<Vec<i32>>>()
    };
    Some((concrete(&sig.input_arg)?, concrete(&sig.output_arg)?))
}

/// A function's name (its signature's).
pub fn function_name(function: &FunctionDef) -> &str {
    function
        .signature
        .as_ref()
        .map(|s| s.name.as_str())
        .unwrap_or("")
}

/// Whether `dtype` is `DT_RESOURCE`.
pub fn is_resource(dtype: i32) -> bool {
    dtype == DataType::DtResource as i32
}

/// The node an input string names: `"x:0"`, `"x"`, `"^x"` and `"x:output:0"` all name `x`.
pub fn input_node(input: &str) -> &str {
    let input = input.strip_prefix('^').unwrap_or(input);
    input.split(':').next().unwrap_or(input)
}

/// Whether an input string is a control input.
pub fn is_control(input: &str) -> bool {
    input.starts_with('^')
}

/// How many leading inputs of `node` are data inputs (TensorFlow puts control inputs last).
pub fn data_input_count(node: &NodeDef) -> usize {
    node.input.iter().take_while(|i| !is_control(i)).count()
}

/// A name starting with `base` that is not in `taken`, which then holds it.
pub fn unique_name(base: &str, taken: &mut HashSet<String>) -> String {
    let mut name = base.to_string();
    let mut n = 1;
    while taken.contains(&name) {
        name = format!("{base}_{n}");
        n += 1;
    }
    taken.insert(name.clone());
    name
}

/// The name of output `index` of output argument `arg` of node `node` inside a function body
/// (`node:arg:index`), or in a graph (`node:index`, `node` for 0).
pub fn output_ref(in_function: bool, node: &str, arg: &str, index: usize) -> String {
    match (in_function, index) {
        (true, _) => format!("{node}:{arg}:{index}"),
        (false, 0) => node.to_string(),
        (false, _) => format!("{node}:{index}"),
    }
}

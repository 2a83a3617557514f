//! Node attrs and output ranges: TensorFlow's `AddDefaultAttrs`, `ArgNumType` and
//! `NameRangesForNode` (outputs only).

use std::collections::BTreeMap;

use unbound_proto::tensorflow::attr_value::Value;
use unbound_proto::tensorflow::op_def::ArgDef;
use unbound_proto::tensorflow::{AttrValue, NodeDef, OpDef};

/// The outputs of one output arg of a node: flat indices `start..start + len`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct OutputRange {
    /// The output arg's name.
    pub name: String,
    /// The first flat output index.
    pub start: usize,
    /// How many tensors the arg has.
    pub len: usize,
}

/// `attrs` plus every attr of `op` that has a default value and is missing from `attrs`.
pub(super) fn with_defaults(
    attrs: &BTreeMap<String, AttrValue>,
    op: &OpDef,
) -> BTreeMap<String, AttrValue> {
    let mut all = attrs.clone();
    for attr in &op.attr {
        if let Some(default) = &attr.default_value {
            all.entry(attr.name.clone())
                .or_insert_with(|| default.clone());
        }
    }
    all
}

/// Removes from `node` the attrs that `original` does not have and whose value is `op`'s
/// default: undoes [`with_defaults`] for a node that came from `original`.
pub(super) fn strip_added_defaults(node: &mut NodeDef, original: &NodeDef, op: &OpDef) {
    for attr in &op.attr {
        let Some(default) = &attr.default_value else {
            continue;
        };
        if !original.attr.contains_key(&attr.name) && node.attr.get(&attr.name) == Some(default) {
            node.attr.remove(&attr.name);
        }
    }
}

/// How many tensors `arg` stands for given a node's attrs (defaults included), as
/// TensorFlow's `ArgNumType`: `number_attr`'s value, `type_list_attr`'s length, or 1.
pub(super) fn arg_len(arg: &ArgDef, attrs: &BTreeMap<String, AttrValue>) -> Result<usize, String> {
    if !arg.number_attr.is_empty() {
        return match attrs.get(&arg.number_attr).and_then(|a| a.value.as_ref()) {
            Some(Value::I(n)) => usize::try_from(*n).map_err(|_| {
                format!(
                    "Value for number_attr() {} < 0 in arg {}",
                    arg.number_attr, arg.name
                )
            }),
            Some(_) => Err(format!(
                "attr {} of arg {} is not an int",
                arg.number_attr, arg.name
            )),
            None => Err(format!(
                "missing attr {} (number of {})",
                arg.number_attr, arg.name
            )),
        };
    }
    if !arg.type_list_attr.is_empty() {
        return match attrs
            .get(&arg.type_list_attr)
            .and_then(|a| a.value.as_ref())
        {
            Some(Value::List(list)) => Ok(list.r#type.len()),
            Some(_) => Err(format!(
                "attr {} of arg {} is not a list of types",
                arg.type_list_attr, arg.name
            )),
            None => Err(format!(
                "missing attr {} (types of {})",
                arg.type_list_attr, arg.name
            )),
        };
    }
    Ok(1)
}

/// The flat output ranges of a node of op `op` with `attrs` (defaults included), one per
/// output arg, in order.
pub(super) fn output_ranges(
    op: &OpDef,
    attrs: &BTreeMap<String, AttrValue>,
) -> Result<Vec<OutputRange>, String> {
    let mut ranges = Vec::with_capacity(op.output_arg.len());
    let mut start = 0usize;
    for arg in &op.output_arg {
        let len = arg_len(arg, attrs)?;
        ranges.push(OutputRange {
            name: arg.name.clone(),
            start,
            len,
        });
        start = start
            .checked_add(len)
            .ok_or_else(|| format!("too many outputs at arg {}", arg.name))?;
    }
    Ok(ranges)
}

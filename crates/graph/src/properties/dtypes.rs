//! Output dtypes of a node, from its OpDef's output args (or, without an OpDef, from hints).

use unbound_proto::tensorflow::{op_def::ArgDef, OpDef};

use super::attrs::Attrs;

/// `DataType` values of reference types are the base type plus this.
const REF_OFFSET: i32 = 100;

/// The most outputs one arg may expand to; a larger `number_attr` is treated as invalid.
const MAX_OUTPUTS_PER_ARG: i64 = 1 << 20;

/// Every output dtype of a node with OpDef `op_def`, in order (arg lists expanded).
/// Attrs that are missing or malformed give `DT_INVALID` (0) or no outputs for that arg.
pub(crate) fn from_op_def(attrs: &Attrs<'_>, op_def: &OpDef) -> Vec<i32> {
    let mut out = Vec::new();
    for arg in &op_def.output_arg {
        expand_arg(attrs, arg, &mut out);
    }
    out
}

fn expand_arg(attrs: &Attrs<'_>, arg: &ArgDef, out: &mut Vec<i32>) {
    let offset = if arg.is_ref { REF_OFFSET } else { 0 };
    let single = if arg.r#type != 0 {
        arg.r#type
    } else if !arg.type_attr.is_empty() {
        attrs.ty(&arg.type_attr).unwrap_or(0)
    } else {
        0
    };
    let with_ref = |t: i32| if t == 0 { 0 } else { t + offset };
    if !arg.number_attr.is_empty() {
        let n = attrs.int(&arg.number_attr).unwrap_or(0);
        if (0..=MAX_OUTPUTS_PER_ARG).contains(&n) {
            // In range by the check above.
            let n = usize::try_from(n).unwrap_or(0);
            out.extend(std::iter::repeat_n(with_ref(single), n));
        }
    } else if !arg.type_list_attr.is_empty() {
        if let Some(types) = attrs.types(&arg.type_list_attr) {
            out.extend(types.iter().map(|&t| with_ref(t)));
        }
    } else {
        out.push(with_ref(single));
    }
}

/// Output dtypes of a node whose op has no OpDef: as many outputs as `_output_shapes` lists
/// or its consumers use, typed by its `dtype` or `T` attr when it has one.
pub(crate) fn without_op_def(attrs: &Attrs<'_>, consumed_ports: usize) -> Vec<i32> {
    let listed = attrs.shapes("_output_shapes").map_or(0, <[_]>::len);
    let n = listed.max(consumed_ports);
    let dtype = attrs.ty("dtype").or_else(|| attrs.ty("T")).unwrap_or(0);
    vec![dtype; n]
}

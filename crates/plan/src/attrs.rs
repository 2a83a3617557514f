//! Reading a node's attributes and constant values: typed getters that answer `None` for
//! what is missing or of another type (graph contents are untrusted), and the element size
//! of a dtype for the byte counts.

use std::collections::BTreeMap;

use prost::Message;
use unbound_proto::tensorflow::attr_value::ListValue;
use unbound_proto::tensorflow::{DataType, TensorProto, TensorShapeProto};

use crate::lite::{AttrValue, NameOnly, Value};

/// A node's attributes.
pub type Attrs = BTreeMap<String, AttrValue>;

/// The list attribute `name`, decoded.
fn list(attrs: &Attrs, name: &str) -> Option<ListValue> {
    match attrs.get(name)?.value.as_ref()? {
        Value::List(b) => ListValue::decode(b.clone()).ok(),
        _ => None,
    }
}

/// The int attribute `name`.
pub fn int(attrs: &Attrs, name: &str) -> Option<i64> {
    match attrs.get(name)?.value.as_ref()? {
        Value::I(i) => Some(*i),
        _ => None,
    }
}

/// The bool attribute `name` (false when missing).
pub fn flag(attrs: &Attrs, name: &str) -> bool {
    matches!(
        attrs.get(name).and_then(|a| a.value.as_ref()),
        Some(Value::B(true))
    )
}

/// The string attribute `name`.
pub fn string(attrs: &Attrs, name: &str) -> Option<String> {
    match attrs.get(name)?.value.as_ref()? {
        Value::S(s) => Some(String::from_utf8_lossy(s).into_owned()),
        _ => None,
    }
}

/// The list-of-ints attribute `name`.
pub fn ints(attrs: &Attrs, name: &str) -> Option<Vec<i64>> {
    list(attrs, name).map(|l| l.i)
}

/// The number of types of the list-of-types attribute `name`.
pub fn type_count(attrs: &Attrs, name: &str) -> Option<usize> {
    list(attrs, name).map(|l| l.r#type.len())
}

/// The type attribute `name`.
pub fn dtype(attrs: &Attrs, name: &str) -> Option<i32> {
    match attrs.get(name)?.value.as_ref()? {
        Value::Type(t) => Some(*t),
        _ => None,
    }
}

/// The function named by the func attribute `name`.
pub fn func(attrs: &Attrs, name: &str) -> Option<String> {
    match attrs.get(name)?.value.as_ref()? {
        Value::Func(f) => NameOnly::decode(f.clone()).ok().map(|f| f.name),
        _ => None,
    }
}

/// A shape proto as dims (`-1` unknown); `None` for an unknown rank.
pub fn dims(shape: &TensorShapeProto) -> Option<Vec<i64>> {
    if shape.unknown_rank {
        return None;
    }
    Some(shape.dim.iter().map(|d| d.size.max(-1)).collect())
}

/// The shape attribute `name`.
pub fn shape(attrs: &Attrs, name: &str) -> Option<Vec<i64>> {
    match attrs.get(name)?.value.as_ref()? {
        Value::Shape(s) => dims(s),
        _ => None,
    }
}

/// The `_output_shapes` TensorFlow records on every node it saves, one per output.
pub fn output_shapes(attrs: &Attrs) -> Option<Vec<Option<Vec<i64>>>> {
    list(attrs, "_output_shapes").map(|l| l.shape.iter().map(dims).collect())
}

/// The most elements a constant read for its values may hold (shapes, axes, perms are small).
const MAX_CONST_INTS: usize = 1 << 16;

/// The values of an int32/int64 constant tensor (`Const`'s `value`), flattened.
pub fn const_ints(attrs: &Attrs) -> Option<Vec<i64>> {
    let int = [DataType::DtInt32 as i32, DataType::DtInt64 as i32];
    if !int.contains(&dtype(attrs, "dtype")?) {
        return None;
    }
    let Value::Tensor(t) = attrs.get("value")?.value.as_ref()? else {
        return None;
    };
    tensor_ints(&TensorProto::decode(t.clone()).ok()?)
}

fn tensor_ints(t: &TensorProto) -> Option<Vec<i64>> {
    let n: i64 = match &t.tensor_shape {
        Some(s) => dims(s)?
            .iter()
            .try_fold(1i64, |a, &d| (d >= 0).then(|| a.checked_mul(d)).flatten())?,
        None => 1,
    };
    let n = usize::try_from(n).ok().filter(|&n| n <= MAX_CONST_INTS)?;
    let raw: Vec<i64> = if t.dtype == DataType::DtInt32 as i32 {
        if !t.tensor_content.is_empty() {
            t.tensor_content
                .chunks_exact(4)
                .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect()
        } else {
            t.int_val.iter().map(|&v| i64::from(v)).collect()
        }
    } else if t.dtype == DataType::DtInt64 as i32 {
        if !t.tensor_content.is_empty() {
            t.tensor_content
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect()
        } else {
            t.int64_val.clone()
        }
    } else {
        return None;
    };
    if raw.len() == n {
        Some(raw)
    } else if n > 0 {
        // TensorFlow repeats the last value to fill the shape.
        let last = *raw.last().unwrap_or(&0);
        Some(
            (0..n)
                .map(|i| raw.get(i).copied().unwrap_or(last))
                .collect(),
        )
    } else {
        Some(Vec::new())
    }
}

/// Bytes per element of a dtype (4 when unknown).
pub fn dtype_size(dtype: i32) -> u64 {
    use DataType as D;
    match DataType::try_from(dtype).unwrap_or(D::DtFloat) {
        D::DtDouble | D::DtInt64 | D::DtUint64 | D::DtComplex64 => 8,
        D::DtComplex128 => 16,
        D::DtHalf | D::DtBfloat16 | D::DtInt16 | D::DtUint16 => 2,
        D::DtBool | D::DtInt8 | D::DtUint8 | D::DtQint8 | D::DtQuint8 => 1,
        _ => 4,
    }
}

/// The dtype of a node's outputs as far as the byte counts need it.
pub fn output_dtype(op: &str, attrs: &Attrs) -> i32 {
    let by = |n: &str| dtype(attrs, n);
    match op {
        "Cast" => by("DstT"),
        "ArgMax" | "ArgMin" => by("output_type"),
        "Shape" | "ShapeN" | "Size" => by("out_type"),
        "Rank" => Some(DataType::DtInt32 as i32),
        _ => by("dtype").or_else(|| by("T")).or_else(|| by("Tparams")),
    }
    .unwrap_or(DataType::DtFloat as i32)
}

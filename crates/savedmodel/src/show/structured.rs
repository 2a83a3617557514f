//! `StructuredValue`s (the nested Python structures of function signatures) as `show` reports
//! them: tensor specs with dtype and shape, other values as Python would print them.

use serde::Serialize;
use unbound_proto::tensorflow::{
    structured_value::Kind, type_spec_proto::TypeSpecClass, StructuredValue, TensorShapeProto,
};

use super::signature::dims;
use unbound_bundle::dtype::{enum_name, python_name};

/// One argument of a concrete function's input signature.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ArgValue {
    /// A `tf.TensorSpec` (or `BoundedTensorSpec`).
    TensorSpec {
        /// The spec's name; `None` when unnamed.
        name: Option<String>,
        /// DataType enum name.
        dtype: String,
        /// Dimensions, `-1` unknown; `None` for unknown rank.
        shape: Option<Vec<i64>>,
        /// Python's `repr` of the spec.
        text: String,
    },
    /// Any other value (a Python default such as `training=False`, a nested structure, a
    /// composite type spec, or a bare function's argument keyword).
    Value {
        /// Python type name (`bool`, `int`, `str`, `NoneType`, `tuple`, `dict`, ...).
        r#type: String,
        /// What `saved_model_cli` prints after `Value:` (for a `str`, the string itself).
        value: String,
    },
}

/// Splits a `canonicalized_input_signature` (a 2-tuple of positional arguments and keyword
/// arguments) into those two.
pub fn input_signature(sig: &StructuredValue) -> (Vec<ArgValue>, Vec<(String, ArgValue)>) {
    let Some(Kind::TupleValue(t)) = &sig.kind else {
        return (Vec::new(), Vec::new());
    };
    let args = match t.values.first().and_then(|v| v.kind.as_ref()) {
        Some(Kind::TupleValue(a)) => a.values.iter().map(arg_value).collect(),
        Some(Kind::ListValue(a)) => a.values.iter().map(arg_value).collect(),
        _ => Vec::new(),
    };
    let kwargs = match t.values.get(1).and_then(|v| v.kind.as_ref()) {
        Some(Kind::DictValue(d)) => {
            let mut kw: Vec<_> = d
                .fields
                .iter()
                .map(|(k, v)| (k.clone(), arg_value(v)))
                .collect();
            kw.sort_by(|a, b| a.0.cmp(&b.0));
            kw
        }
        _ => Vec::new(),
    };
    (args, kwargs)
}

/// A bare function's argument keyword, as `saved_model_cli` shows it.
pub fn keyword(name: &str) -> ArgValue {
    ArgValue::Value {
        r#type: "str".into(),
        value: name.to_string(),
    }
}

/// One argument.
pub fn arg_value(v: &StructuredValue) -> ArgValue {
    match &v.kind {
        Some(Kind::TensorSpecValue(s)) => tensor_spec(&s.name, s.dtype, s.shape.as_ref(), v),
        Some(Kind::BoundedTensorSpecValue(s)) => tensor_spec(&s.name, s.dtype, s.shape.as_ref(), v),
        Some(Kind::StringValue(s)) => ArgValue::Value {
            r#type: "str".into(),
            value: s.clone(),
        },
        Some(Kind::ListValue(l)) => container("list", &l.values),
        Some(Kind::TupleValue(t)) => container("tuple", &t.values),
        Some(Kind::DictValue(_)) => ArgValue::Value {
            r#type: "dict".into(),
            value: py_repr(v),
        },
        _ => ArgValue::Value {
            r#type: type_name(v),
            value: py_repr(v),
        },
    }
}

fn tensor_spec(
    name: &str,
    dtype: i32,
    shape: Option<&TensorShapeProto>,
    v: &StructuredValue,
) -> ArgValue {
    ArgValue::TensorSpec {
        name: (!name.is_empty()).then(|| name.to_string()),
        dtype: enum_name(dtype),
        shape: dims(shape),
        text: py_repr(v),
    }
}

/// `saved_model_cli`'s rendering of an iterable argument (list or tuple alike): each element's
/// `str`, quoted when it is a string, joined with `, ` in brackets.
fn container(ty: &str, items: &[StructuredValue]) -> ArgValue {
    let inner: Vec<String> = items
        .iter()
        .map(|i| match &i.kind {
            Some(Kind::StringValue(s)) => format!("'{s}'"),
            _ => py_repr(i),
        })
        .collect();
    ArgValue::Value {
        r#type: ty.into(),
        value: format!("[{}]", inner.join(", ")),
    }
}

/// Python's `type(x).__name__` of the decoded value.
fn type_name(v: &StructuredValue) -> String {
    match &v.kind {
        None | Some(Kind::NoneValue(_)) => "NoneType",
        Some(Kind::Float64Value(_)) => "float",
        Some(Kind::Int64Value(_)) => "int",
        Some(Kind::StringValue(_)) => "str",
        Some(Kind::BoolValue(_)) => "bool",
        Some(Kind::TensorShapeValue(_)) => "TensorShape",
        Some(Kind::TensorDtypeValue(_)) => "DType",
        Some(Kind::TensorSpecValue(_)) => "TensorSpec",
        Some(Kind::BoundedTensorSpecValue(_)) => "BoundedTensorSpec",
        Some(Kind::TypeSpecValue(t)) => return type_spec_name(t),
        Some(Kind::ListValue(_)) => "list",
        Some(Kind::TupleValue(_)) => "tuple",
        Some(Kind::DictValue(_)) => "dict",
        Some(Kind::NamedTupleValue(n)) => return n.name.clone(),
        Some(Kind::TensorValue(_)) => "EagerTensor",
        Some(Kind::NumpyValue(_)) => "ndarray",
    }
    .to_string()
}

fn type_spec_name(t: &unbound_proto::tensorflow::TypeSpecProto) -> String {
    if !t.type_spec_class_name.is_empty() {
        return t.type_spec_class_name.clone();
    }
    let class = TypeSpecClass::try_from(t.type_spec_class).unwrap_or(TypeSpecClass::Unknown);
    // SPARSE_TENSOR_SPEC -> SparseTensorSpec
    class
        .as_str_name()
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_string() + &c.as_str().to_ascii_lowercase(),
                None => String::new(),
            }
        })
        .collect()
}

/// Python's `repr` of the decoded value (approximate for tensors and composite type specs).
pub fn py_repr(v: &StructuredValue) -> String {
    let join = |vals: &[StructuredValue]| vals.iter().map(py_repr).collect::<Vec<_>>();
    match &v.kind {
        None | Some(Kind::NoneValue(_)) => "None".into(),
        Some(Kind::Float64Value(f)) => py_float(*f),
        Some(Kind::Int64Value(i)) => i.to_string(),
        Some(Kind::StringValue(s)) => py_str_repr(s),
        Some(Kind::BoolValue(b)) => if *b { "True" } else { "False" }.into(),
        Some(Kind::TensorShapeValue(s)) => match dims(Some(s)) {
            None => "TensorShape(None)".into(),
            Some(d) => format!("TensorShape([{}])", dims_list(&d)),
        },
        Some(Kind::TensorDtypeValue(d)) => format!("tf.{}", python_name(*d)),
        Some(Kind::TensorSpecValue(s)) => format!(
            "TensorSpec(shape={}, dtype=tf.{}, name={})",
            py_shape(s.shape.as_ref()),
            python_name(s.dtype),
            py_name(&s.name)
        ),
        Some(Kind::BoundedTensorSpecValue(s)) => format!(
            "BoundedTensorSpec(shape={}, dtype=tf.{}, name={})",
            py_shape(s.shape.as_ref()),
            python_name(s.dtype),
            py_name(&s.name)
        ),
        Some(Kind::TypeSpecValue(t)) => format!(
            "{}({})",
            type_spec_name(t),
            t.type_state.as_deref().map(py_repr).unwrap_or_default()
        ),
        Some(Kind::ListValue(l)) => format!("[{}]", join(&l.values).join(", ")),
        Some(Kind::TupleValue(t)) => match t.values.len() {
            1 => format!("({},)", py_repr(&t.values[0])),
            _ => format!("({})", join(&t.values).join(", ")),
        },
        Some(Kind::DictValue(d)) => {
            let mut entries: Vec<_> = d.fields.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let inner: Vec<String> = entries
                .iter()
                .map(|(k, v)| format!("{}: {}", py_str_repr(k), py_repr(v)))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
        Some(Kind::NamedTupleValue(n)) => {
            let inner: Vec<String> = n
                .values
                .iter()
                .map(|p| {
                    let value = p.value.as_ref().map(py_repr).unwrap_or_default();
                    format!("{}={value}", p.key)
                })
                .collect();
            format!("{}({})", n.name, inner.join(", "))
        }
        Some(Kind::TensorValue(t)) | Some(Kind::NumpyValue(t)) => format!(
            "<{} {}>",
            python_name(t.dtype),
            py_shape(t.tensor_shape.as_ref())
        ),
    }
}

/// Python float repr: `1.0`, `0.5`, `inf`, `nan`.
fn py_float(f: f64) -> String {
    if f.is_nan() {
        "nan".into()
    } else if f.is_infinite() {
        if f > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{f:?}")
    }
}

/// Python's repr of a str: single quotes, backslashes and quotes escaped.
fn py_str_repr(s: &str) -> String {
    let mut out = String::from("'");
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A TensorSpec's `name=`: the quoted name, or `None`.
fn py_name(name: &str) -> String {
    if name.is_empty() {
        "None".into()
    } else {
        py_str_repr(name)
    }
}

/// A `TensorShape` as a TensorSpec repr shows it: `(None, 4)`, `(3,)`, `()`, `<unknown>`.
fn py_shape(shape: Option<&TensorShapeProto>) -> String {
    match dims(shape) {
        None => "<unknown>".into(),
        Some(d) if d.len() == 1 => format!("({},)", dims_list(&d)),
        Some(d) => format!("({})", dims_list(&d)),
    }
}

fn dims_list(d: &[i64]) -> String {
    d.iter()
        .map(|&x| if x < 0 { "None".into() } else { x.to_string() })
        .collect::<Vec<_>>()
        .join(", ")
}

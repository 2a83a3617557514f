//! Reading a node's attrs, falling back to the OpDef's defaults.

use unbound_proto::tensorflow::attr_value::{ListValue, Value};
use unbound_proto::tensorflow::{AttrValue, NodeDef, OpDef, TensorProto, TensorShapeProto};

/// A node's attrs with its OpDef's defaults behind them.
#[derive(Clone, Copy)]
pub(crate) struct Attrs<'a> {
    node: &'a NodeDef,
    op_def: Option<&'a OpDef>,
}

impl<'a> Attrs<'a> {
    /// The attrs of `node`, with defaults from `op_def`.
    pub(crate) fn new(node: &'a NodeDef, op_def: Option<&'a OpDef>) -> Self {
        Self { node, op_def }
    }

    /// The node's value of `name`, or the OpDef's default.
    pub(crate) fn get(&self, name: &str) -> Option<&'a AttrValue> {
        self.node.attr.get(name).or_else(|| {
            self.op_def?
                .attr
                .iter()
                .find(|a| a.name == name)?
                .default_value
                .as_ref()
        })
    }

    fn value(&self, name: &str) -> Option<&'a Value> {
        self.get(name)?.value.as_ref()
    }

    fn list(&self, name: &str) -> Option<&'a ListValue> {
        match self.value(name)? {
            Value::List(list) => Some(list),
            _ => None,
        }
    }

    /// An `int` attr.
    pub(crate) fn int(&self, name: &str) -> Option<i64> {
        match self.value(name)? {
            Value::I(i) => Some(*i),
            _ => None,
        }
    }

    /// A `bool` attr.
    pub(crate) fn bool(&self, name: &str) -> Option<bool> {
        match self.value(name)? {
            Value::B(b) => Some(*b),
            _ => None,
        }
    }

    /// A `type` attr (a `DataType` value).
    pub(crate) fn ty(&self, name: &str) -> Option<i32> {
        match self.value(name)? {
            Value::Type(t) => Some(*t),
            _ => None,
        }
    }

    /// A `string` attr, as text.
    pub(crate) fn string(&self, name: &str) -> Option<String> {
        match self.value(name)? {
            Value::S(s) => Some(String::from_utf8_lossy(s).into_owned()),
            _ => None,
        }
    }

    /// A `shape` attr.
    pub(crate) fn shape(&self, name: &str) -> Option<&'a TensorShapeProto> {
        match self.value(name)? {
            Value::Shape(s) => Some(s),
            _ => None,
        }
    }

    /// A `tensor` attr.
    pub(crate) fn tensor(&self, name: &str) -> Option<&'a TensorProto> {
        match self.value(name)? {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// A `list(int)` attr.
    pub(crate) fn ints(&self, name: &str) -> Option<&'a [i64]> {
        self.list(name).map(|l| l.i.as_slice())
    }

    /// A `list(type)` attr.
    pub(crate) fn types(&self, name: &str) -> Option<&'a [i32]> {
        self.list(name).map(|l| l.r#type.as_slice())
    }

    /// A `list(shape)` attr.
    pub(crate) fn shapes(&self, name: &str) -> Option<&'a [TensorShapeProto]> {
        self.list(name).map(|l| l.shape.as_slice())
    }
}

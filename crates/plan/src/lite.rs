//! The parts of a SavedModel the planner reads, decoded light: the same field numbers as
//! TensorFlow's protos, but an attribute's tensor, list and function stay undecoded bytes
//! until asked for. TensorFlow's `AttrValue` holds a whole `TensorProto` inline (hundreds of
//! bytes), so a map of a node's few attributes decoded in full costs kilobytes; here it costs
//! what the attributes hold, which keeps a 300,000-node function within memory and time.

use std::collections::BTreeMap;

use prost::bytes::Bytes;
use unbound_proto::tensorflow::meta_graph_def::MetaInfoDef;
use unbound_proto::tensorflow::{
    OpDef, SavedObjectGraph, SignatureDef, TensorShapeProto, VersionDef,
};

/// `tensorflow.SavedModel`, its MetaGraphDefs only.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SavedModel {
    /// `meta_graphs`.
    #[prost(message, repeated, tag = "2")]
    pub meta_graphs: Vec<MetaGraphDef>,
}

/// `tensorflow.MetaGraphDef`: tags, graph, signatures, object graph.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MetaGraphDef {
    /// `meta_info_def` (tags, stripped op list).
    #[prost(message, optional, tag = "1")]
    pub meta_info_def: Option<MetaInfoDef>,
    /// `graph_def`.
    #[prost(message, optional, tag = "2")]
    pub graph_def: Option<GraphDef>,
    /// `signature_def`.
    #[prost(btree_map = "string, message", tag = "5")]
    pub signature_def: BTreeMap<String, SignatureDef>,
    /// `object_graph_def`: the TF2 object graph (variables' object paths, the captures of
    /// concrete functions); absent in TF1 models.
    #[prost(message, optional, tag = "7")]
    pub object_graph_def: Option<SavedObjectGraph>,
}

/// `tensorflow.GraphDef`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GraphDef {
    /// `node`.
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeDef>,
    /// `library`.
    #[prost(message, optional, tag = "2")]
    pub library: Option<FunctionDefLibrary>,
    /// `versions`.
    #[prost(message, optional, tag = "4")]
    pub versions: Option<VersionDef>,
}

/// `tensorflow.FunctionDefLibrary`, its functions.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FunctionDefLibrary {
    /// `function`.
    #[prost(message, repeated, tag = "1")]
    pub function: Vec<FunctionDef>,
}

/// `tensorflow.FunctionDef`: signature, body, returns.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FunctionDef {
    /// `signature`.
    #[prost(message, optional, tag = "1")]
    pub signature: Option<OpDef>,
    /// `node_def`.
    #[prost(message, repeated, tag = "3")]
    pub node_def: Vec<NodeDef>,
    /// `ret`: output arg name -> tensor (`node:out_arg:index`).
    #[prost(btree_map = "string, string", tag = "4")]
    pub ret: BTreeMap<String, String>,
}

/// `tensorflow.NodeDef`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeDef {
    /// `name`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `op`.
    #[prost(string, tag = "2")]
    pub op: String,
    /// `input`.
    #[prost(string, repeated, tag = "3")]
    pub input: Vec<String>,
    /// `attr`.
    #[prost(btree_map = "string, message", tag = "5")]
    pub attr: BTreeMap<String, AttrValue>,
}

/// `tensorflow.AttrValue` with its large variants kept as bytes.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttrValue {
    /// The value.
    #[prost(oneof = "Value", tags = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10")]
    pub value: Option<Value>,
}

/// `tensorflow.AttrValue.value`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Value {
    /// `list`: a serialized `AttrValue.ListValue`.
    #[prost(bytes = "bytes", tag = "1")]
    List(Bytes),
    /// `s`.
    #[prost(bytes = "bytes", tag = "2")]
    S(Bytes),
    /// `i`.
    #[prost(int64, tag = "3")]
    I(i64),
    /// `f`.
    #[prost(float, tag = "4")]
    F(f32),
    /// `b`.
    #[prost(bool, tag = "5")]
    B(bool),
    /// `type`.
    #[prost(int32, tag = "6")]
    Type(i32),
    /// `shape`.
    #[prost(message, tag = "7")]
    Shape(TensorShapeProto),
    /// `tensor`: a serialized `TensorProto`.
    #[prost(bytes = "bytes", tag = "8")]
    Tensor(Bytes),
    /// `placeholder`.
    #[prost(string, tag = "9")]
    Placeholder(String),
    /// `func`: a serialized `NameAttrList`.
    #[prost(bytes = "bytes", tag = "10")]
    Func(Bytes),
}

/// `tensorflow.NameAttrList`, its name only.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NameOnly {
    /// `name`.
    #[prost(string, tag = "1")]
    pub name: String,
}

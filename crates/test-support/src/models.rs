//! Model builders, used by the `make_huge_model` and `make_bench_model` examples of
//! unbound-savedmodel: the FNV-1a checksum of `interop/merger_harness.cc`, building
//! SavedModels whose large nodes are kept as already-serialized byte slices (so a
//! multi-gigabyte model is held once), and the tensor summary JSON in the shape
//! `merger_harness summary` prints. Deterministic tensor data is in [`crate::data`].

use std::collections::BTreeMap;
use std::io::Write;

use bytes::Bytes;
use prost::Message as _;
use prost_reflect::MessageDescriptor;
use unbound_proto::fields::tensorflow as fields;
use unbound_proto::tensorflow::{
    attr_value, meta_graph_def::MetaInfoDef, tensor_info, tensor_shape_proto::Dim, AttrValue,
    DataType, GraphDef, MetaGraphDef, NodeDef, SavedModel, SignatureDef, TensorInfo, TensorProto,
    TensorShapeProto, VersionDef,
};
use unbound_wire::{Payload, WireField, WireMessage, WireValue};

pub use crate::descriptor;

/// The result of the builders: any error, boxed.
pub type AnyResult<T> = Result<T, Box<dyn std::error::Error>>;

// -------------------------------------------------------------- checksum ----

/// FNV-1a 64, as `merger_harness` computes it over `tensor_content`.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a 64 of `data`, continuing from `h` ([`FNV_OFFSET`] to start).
pub fn fnv1a64(data: &[u8], mut h: u64) -> u64 {
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// A `Write` sink that computes the per-tensor and the running FNV-1a over everything written.
pub struct FnvWriter {
    /// The FNV-1a of this tensor's bytes.
    pub own: u64,
    /// The running FNV-1a, over every tensor so far.
    pub running: u64,
    /// Bytes written.
    pub len: u64,
}

impl FnvWriter {
    /// A writer whose running hash continues from `running`.
    pub fn new(running: u64) -> Self {
        Self {
            own: FNV_OFFSET,
            running,
            len: 0,
        }
    }
}

impl Write for FnvWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // Both hashes in one pass over the bytes.
        let (mut a, mut b) = (self.own, self.running);
        for &x in buf {
            a = (a ^ u64::from(x)).wrapping_mul(FNV_PRIME);
            b = (b ^ u64::from(x)).wrapping_mul(FNV_PRIME);
        }
        self.own = a;
        self.running = b;
        self.len += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

// --------------------------------------------------------------- summary ----

/// One `node_tensors` entry of `merger_harness summary`.
#[derive(Clone, Debug)]
pub struct TensorEntry {
    /// The node's name.
    pub name: String,
    /// The node's op.
    pub op: String,
    /// The tensor's dtype name (`DT_FLOAT`), or its number when unknown.
    pub dtype: String,
    /// The tensor's dimensions.
    pub shape: Vec<i64>,
    /// Size of `tensor_content`.
    pub bytes: u64,
    /// FNV-1a 64 of `tensor_content`.
    pub fnv: u64,
    /// Whether the tensor has values in its typed fields (`float_val`, ...).
    pub has_inline_values: bool,
}

/// The graph part of `merger_harness summary`, plus the SavedModel's `byte_size`.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// The SavedModel's serialized size.
    pub byte_size: u64,
    /// Number of graph nodes.
    pub nodes: usize,
    /// One entry per node with a tensor `value` attribute.
    pub tensors: Vec<TensorEntry>,
    /// Total size of every `tensor_content`.
    pub total_bytes: u64,
    /// FNV-1a 64 over every `tensor_content`, in node order.
    pub running_fnv: u64,
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.bytes() {
        match c {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(c as char),
            _ => out.push_str(&format!("\\u{c:04x}")),
        }
    }
    out.push('"');
    out
}

impl Summary {
    /// JSON with the same keys and values as the harness prints for these parts.
    pub fn to_json(&self) -> String {
        let mut js = format!(
            "{{\"type\":\"tensorflow.SavedModel\",\"byte_size\":{},\n  \"graph\":{{\"nodes\":{},\"node_tensors\":[",
            self.byte_size, self.nodes
        );
        for (i, t) in self.tensors.iter().enumerate() {
            if i > 0 {
                js.push(',');
            }
            let shape: Vec<String> = t.shape.iter().map(|d| d.to_string()).collect();
            js.push_str(&format!(
                "\n    {{\"name\":{},\"op\":{},\"dtype\":{},\"shape\":[{}],\"tensor_content_bytes\":{},\"tensor_content_fnv1a64\":\"{:016x}\",\"has_inline_values\":{}}}",
                json_str(&t.name),
                json_str(&t.op),
                json_str(&t.dtype),
                shape.join(","),
                t.bytes,
                t.fnv,
                t.has_inline_values
            ));
        }
        js.push_str(&format!(
            "],\n  \"tensor_content_total_bytes\":{},\"tensor_content_fnv1a64\":\"{:016x}\"}}}}\n",
            self.total_bytes, self.running_fnv
        ));
        js
    }

    /// Adds a node to the summary the way the harness's `AppendTensorEntry` does: only nodes with
    /// an `attr["value"].tensor`; `content` is called to stream `tensor_content` into the hasher.
    pub fn add_node(
        &mut self,
        node: &NodeDef,
        content: impl FnOnce(&mut FnvWriter) -> AnyResult<()>,
    ) -> AnyResult<()> {
        self.nodes += 1;
        let Some(AttrValue {
            value: Some(attr_value::Value::Tensor(t)),
        }) = node.attr.get("value")
        else {
            return Ok(());
        };
        let mut h = FnvWriter::new(self.running_fnv);
        content(&mut h)?;
        self.running_fnv = h.running;
        self.total_bytes += h.len;
        let dtype = DataType::try_from(t.dtype)
            .map(|d| d.as_str_name().to_string())
            .unwrap_or_else(|_| t.dtype.to_string());
        self.tensors.push(TensorEntry {
            name: node.name.clone(),
            op: node.op.clone(),
            dtype,
            shape: t
                .tensor_shape
                .iter()
                .flat_map(|s| s.dim.iter().map(|d| d.size))
                .collect(),
            bytes: h.len,
            fnv: h.own,
            has_inline_values: !(t.float_val.is_empty()
                && t.double_val.is_empty()
                && t.int_val.is_empty()
                && t.int64_val.is_empty()
                && t.string_val.is_empty()
                && t.bool_val.is_empty()
                && t.half_val.is_empty()
                && t.uint32_val.is_empty()
                && t.uint64_val.is_empty()
                && t.scomplex_val.is_empty()
                && t.dcomplex_val.is_empty()
                && t.variant_val.is_empty()
                && t.resource_handle_val.is_empty()),
        });
        Ok(())
    }
}

// ---------------------------------------------------------------- protos ----

/// A `TensorShapeProto` of `dims`.
pub fn shape(dims: &[i64]) -> TensorShapeProto {
    TensorShapeProto {
        dim: dims
            .iter()
            .map(|&size| Dim {
                size,
                name: String::new(),
            })
            .collect(),
        unknown_rank: false,
    }
}

fn attr(value: attr_value::Value) -> AttrValue {
    AttrValue { value: Some(value) }
}

/// A float32 `Const` node holding `content` (little-endian float32s) as `tensor_content`.
pub fn const_node(name: &str, dims: &[i64], content: Bytes) -> NodeDef {
    let tensor = TensorProto {
        dtype: DataType::DtFloat as i32,
        tensor_shape: Some(shape(dims)),
        tensor_content: content,
        ..Default::default()
    };
    NodeDef {
        name: name.into(),
        op: "Const".into(),
        attr: BTreeMap::from([
            (
                "dtype".to_string(),
                attr(attr_value::Value::Type(DataType::DtFloat as i32)),
            ),
            ("value".to_string(), attr(attr_value::Value::Tensor(tensor))),
        ]),
        ..Default::default()
    }
}

/// A scalar float32 `Const` with its value inline in `float_val` (no `tensor_content`).
pub fn scalar_const_node(name: &str, value: f32) -> NodeDef {
    let tensor = TensorProto {
        dtype: DataType::DtFloat as i32,
        tensor_shape: Some(shape(&[])),
        float_val: vec![value],
        ..Default::default()
    };
    NodeDef {
        name: name.into(),
        op: "Const".into(),
        attr: BTreeMap::from([
            (
                "dtype".to_string(),
                attr(attr_value::Value::Type(DataType::DtFloat as i32)),
            ),
            ("value".to_string(), attr(attr_value::Value::Tensor(tensor))),
        ]),
        ..Default::default()
    }
}

/// A node with inputs and a float32 `T` attribute (`Identity`, `AddV2`, `MatMul`, ...).
pub fn op_node(name: &str, op: &str, inputs: &[&str]) -> NodeDef {
    NodeDef {
        name: name.into(),
        op: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        attr: BTreeMap::from([(
            "T".to_string(),
            attr(attr_value::Value::Type(DataType::DtFloat as i32)),
        )]),
        ..Default::default()
    }
}

/// A float32 `Placeholder` of the given shape.
pub fn placeholder_node(name: &str, dims: &[i64]) -> NodeDef {
    NodeDef {
        name: name.into(),
        op: "Placeholder".into(),
        attr: BTreeMap::from([
            (
                "dtype".to_string(),
                attr(attr_value::Value::Type(DataType::DtFloat as i32)),
            ),
            (
                "shape".to_string(),
                attr(attr_value::Value::Shape(shape(dims))),
            ),
        ]),
        ..Default::default()
    }
}

fn tensor_info(name: &str, dims: &[i64]) -> TensorInfo {
    TensorInfo {
        dtype: DataType::DtFloat as i32,
        tensor_shape: Some(shape(dims)),
        encoding: Some(tensor_info::Encoding::Name(name.into())),
    }
}

/// A SavedModel with one `serve` MetaGraph whose GraphDef holds `nodes` (each already
/// serialized, in order), held as a [`WireMessage`]: the serialized nodes are referenced, not
/// copied. `input`/`output` name the signature's tensors.
pub fn saved_model(
    nodes: Vec<Bytes>,
    input: (&str, &[i64]),
    output: (&str, &[i64]),
) -> AnyResult<WireMessage> {
    let signature = SignatureDef {
        inputs: BTreeMap::from([("x".to_string(), tensor_info(input.0, input.1))]),
        outputs: BTreeMap::from([("y".to_string(), tensor_info(output.0, output.1))]),
        method_name: "tensorflow/serving/predict".into(),
        ..Default::default()
    };
    let meta = MetaGraphDef {
        meta_info_def: Some(MetaInfoDef {
            tags: vec!["serve".into()],
            tensorflow_version: "2.21.0".into(),
            ..Default::default()
        }),
        graph_def: Some(GraphDef {
            versions: Some(VersionDef {
                producer: 2129,
                min_consumer: 12,
                bad_consumers: vec![],
            }),
            ..Default::default()
        }),
        signature_def: BTreeMap::from([("serving_default".to_string(), signature)]),
        ..Default::default()
    };
    let model = SavedModel {
        saved_model_schema_version: 1,
        meta_graphs: vec![meta],
    };
    let sm_desc = descriptor("tensorflow.SavedModel");
    let mut wire = WireMessage::parse(&Bytes::from(model.encode_to_vec()), Some(sm_desc.clone()))?;
    let meta_fd = sm_desc
        .get_field_by_name("meta_graphs")
        .expect("meta_graphs");
    let meta = wire.repeated_message_mut(&meta_fd, 0)?;
    let graph_fd = meta_fd
        .kind()
        .as_message()
        .expect("message")
        .get_field_by_name("graph_def")
        .expect("graph_def");
    let graph = meta.singular_message_mut(&graph_fd)?;
    for node in nodes {
        graph.fields.push(WireField {
            number: fields::graph_def::NODE,
            value: WireValue::Bytes(Payload::Inline(node)),
        });
    }
    Ok(wire)
}

/// Serializes a node; the (large) content inside it is copied once here, after which the
/// caller drops its own buffer.
pub fn encode_node(node: &NodeDef) -> Bytes {
    Bytes::from(node.encode_to_vec())
}

/// The summary of a SavedModel read back by unbound (`read_cpb`/`read_pb`): walks
/// `meta_graphs[0].graph_def.node` of the merged message. Nodes are decoded one at a time;
/// `tensor_content` stays a slice of the file or chunk it came from.
pub fn summarize_wire(model: &WireMessage) -> AnyResult<Summary> {
    let mut summary = Summary {
        byte_size: model.encoded_len(),
        running_fnv: FNV_OFFSET,
        ..Default::default()
    };
    let sm_desc = descriptor("tensorflow.SavedModel");
    let meta_desc = descriptor("tensorflow.MetaGraphDef");
    let graph_desc = descriptor("tensorflow.GraphDef");
    let Some(meta) = sub_messages(model, fields::saved_model::META_GRAPHS, &meta_desc)?
        .into_iter()
        .next()
    else {
        return Ok(summary);
    };
    let _ = sm_desc;
    // Protobuf merge semantics: every occurrence of graph_def merges into one message, so the
    // nodes are the concatenation of each occurrence's nodes.
    for graph in sub_messages(&meta, fields::meta_graph_def::GRAPH_DEF, &graph_desc)? {
        for f in graph
            .fields
            .iter()
            .filter(|f| f.number == fields::graph_def::NODE)
        {
            let bytes = match &f.value {
                WireValue::Bytes(p) => p.bytes()?,
                WireValue::Message(m) => Bytes::from(m.to_vec()?),
                _ => return Err("graph_def.node holds a scalar".into()),
            };
            let node = NodeDef::decode(bytes)?;
            let content = match node.attr.get("value") {
                Some(AttrValue {
                    value: Some(attr_value::Value::Tensor(t)),
                }) => t.tensor_content.clone(),
                _ => Bytes::new(),
            };
            summary.add_node(&node, |h| {
                h.write_all(&content)?;
                Ok(())
            })?;
        }
    }
    Ok(summary)
}

/// Every occurrence of message field `number` of `msg`, as messages.
fn sub_messages(
    msg: &WireMessage,
    number: u32,
    desc: &MessageDescriptor,
) -> AnyResult<Vec<WireMessage>> {
    let mut out = Vec::new();
    for f in msg.fields.iter().filter(|f| f.number == number) {
        match &f.value {
            WireValue::Message(m) => out.push(m.clone()),
            WireValue::Bytes(p) => out.push(WireMessage::parse(&p.bytes()?, Some(desc.clone()))?),
            _ => return Err(format!("field {number} holds a scalar").into()),
        }
    }
    Ok(out)
}

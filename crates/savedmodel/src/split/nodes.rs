//! Element splitters: `ConstantNodeDefSplitter`, `LargeMessageSplitter`, `FunctionDefSplitter`.

use bytes::Bytes;
use prost_reflect::MessageDescriptor;
use unbound_chunked::{Chunk, KeyValue, PathElem, Scope};

use crate::Result;
use unbound_proto::tensorflow::TensorProto;
use unbound_wire::{navigate::message_type, Payload, WireMessage, WireValue};

use super::repeated::{split_repeated, ElementSplitter};
use super::{field, typed_values_to_bytes, SplitContext};

/// TensorProto fields a constant keeps when its value moves to a chunk.
const KEPT_TENSOR_FIELDS: [&str; 3] = ["dtype", "tensor_shape", "version_number"];

/// `ConstantNodeDefSplitter`: a node above the maximum that is a `Const` has its value moved to
/// a BYTES chunk at `attr["value"].tensor.tensor_content`.
pub fn constant_splitter(
    node: &mut WireMessage,
    node_desc: &MessageDescriptor,
    size: i64,
    scope: &mut Scope<'_>,
    ctx: &mut SplitContext,
) -> Result<i64> {
    if !ctx.is_above_max(size.max(0) as u64) {
        return Ok(0);
    }
    let name = string_field(node, node_desc, "name")?;
    let op = string_field(node, node_desc, "op")?;
    if op != "Const" {
        ctx.warnings.push(format!(
            "node {name:?} ({op}) is {size} bytes, above the maximum chunk size {}, and only Const \
             nodes can be split further: it is stored as one chunk of its own",
            ctx.max_size
        ));
        return Ok(0);
    }
    let attr_fd = field(node_desc, "attr")?;
    let entry_desc = message_type(&attr_fd)?;
    let key = WireValue::Bytes(Payload::Inline(Bytes::from_static(b"value")));
    let entry = node.map_entry_mut(&attr_fd, &key)?;
    let value_fd = entry_desc.map_entry_value_field();
    let attr_desc = message_type(&value_fd)?;
    let attr_value = entry.singular_message_mut(&value_fd)?;
    let tensor_fd = field(&attr_desc, "tensor")?;
    let tensor_desc = message_type(&tensor_fd)?;
    let tensor = attr_value.singular_message_mut(&tensor_fd)?;
    let Some(bytes) = constant_bytes(tensor, &tensor_desc)? else {
        ctx.warnings.push(format!(
            "Const node {name:?} is {size} bytes, above the maximum chunk size {}, but its value \
             has no tensor_content form (string or unsupported dtype): it is stored as one chunk \
             of its own",
            ctx.max_size
        ));
        return Ok(0);
    };
    let kept: Vec<u32> = KEPT_TENSOR_FIELDS
        .iter()
        .map(|n| field(&tensor_desc, n).map(|f| f.number()))
        .collect::<Result<_>>()?;
    tensor.fields.retain(|f| kept.contains(&f.number));
    let len = bytes.len() as i64;
    scope.add_chunk(
        Chunk::Bytes(bytes),
        &[
            PathElem::from("attr"),
            PathElem::Key(KeyValue::Str("value".into())),
            PathElem::from("tensor"),
            PathElem::from("tensor_content"),
        ],
        None,
    )?;
    Ok(len)
}

/// The constant's value as raw bytes: its `tensor_content`, or its typed values converted the
/// way `tensor_util.MakeNdarray(...).tobytes()` does. `None` when there is no such form.
fn constant_bytes(
    tensor: &WireMessage,
    tensor_desc: &MessageDescriptor,
) -> Result<Option<Payload>> {
    let content_fd = field(tensor_desc, "tensor_content")?;
    if let Some(f) = tensor
        .fields
        .iter()
        .rev()
        .find(|f| f.number == content_fd.number())
    {
        if let WireValue::Bytes(p) = &f.value {
            if !p.is_empty() {
                return Ok(Some(p.clone()));
            }
        }
    }
    let encoded = tensor.to_vec()?;
    let Ok(proto) =
        unbound_wire::decode_lenient::<TensorProto>(encoded, unbound_proto::descriptor_pool())
    else {
        return Ok(None);
    };
    Ok(typed_values_to_bytes(&proto).map(|b| Payload::Inline(Bytes::from(b))))
}

/// The last value of a string field, or "" when absent.
fn string_field(msg: &WireMessage, desc: &MessageDescriptor, name: &str) -> Result<String> {
    let number = field(desc, name)?.number();
    for f in msg.fields.iter().rev() {
        if f.number == number {
            if let WireValue::Bytes(p) = &f.value {
                return Ok(String::from_utf8_lossy(&p.bytes()?).into_owned());
            }
        }
    }
    Ok(String::new())
}

/// `LargeMessageSplitter` with the greedy check: a message larger than a third of the maximum
/// moves whole into a chunk, leaving an empty message in its place.
pub fn large_message_splitter(
    message: &mut WireMessage,
    desc: &MessageDescriptor,
    size: i64,
    scope: &mut Scope<'_>,
    ctx: &mut SplitContext,
) -> Result<i64> {
    if !ctx.is_large(size.max(0) as u64) {
        return Ok(0);
    }
    let mut taken = std::mem::replace(message, WireMessage::new(Some(desc.clone())));
    taken.descriptor = Some(desc.clone());
    scope.add_chunk(Chunk::Message(taken), &[], None)?;
    Ok(size)
}

/// `FunctionDefSplitter`: a large function moves whole into a chunk; one above the maximum has
/// its `node_def` list split instead.
pub fn function_splitter(
    function: &mut WireMessage,
    desc: &MessageDescriptor,
    size: i64,
    scope: &mut Scope<'_>,
    ctx: &mut SplitContext,
) -> Result<i64> {
    let mut diff = 0;
    let usize_ = size.max(0) as u64;
    if ctx.is_large(usize_) && !ctx.is_above_max(usize_) {
        diff += large_message_splitter(function, desc, size, scope, ctx)?;
    }
    if ctx.is_above_max(usize_) {
        let splitters: [ElementSplitter; 2] = [constant_splitter, large_message_splitter];
        diff += split_repeated(function, desc, "node_def", &splitters, scope, ctx)?;
    }
    Ok(diff)
}

//! A `.cpb` whose graph is one message chunk of 64 MiB or more: the chunk merges stream
//! rather than decode whole (`unbound_chunked::FileChunks::streams_chunk_at`), for the tests
//! of what rides on that stream (verify's single pass, externalize's spooled values).

use std::path::Path;

use bytes::Bytes;
use unbound_chunked::{write_split, Chunk, ChunkSink, PathElem};
use unbound_records::{Compression, WriterOptions};
use unbound_wire::{Payload, WireMessage, WireValue};

use crate::models::{const_node, encode_node, saved_model, AnyResult};

/// Elements of the constant (float32): 66 MiB of value.
pub const ELEMENTS: i64 = 66 << 18;

/// The constant's value: pseudo-random bytes (the chunk must take real decompression).
pub fn content() -> Bytes {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let content: Vec<u8> = (0..(ELEMENTS as usize * 4))
        .map(|i| {
            if i % 4 == 0 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
            }
            (x >> (8 * (i % 4))) as u8 & 0x3f
        })
        .collect();
    Bytes::from(content)
}

/// The model: one `serve` MetaGraph whose graph is `consts` `Const`s named `big`, `big_1`,
/// ..., each holding [`content`]; the first is the signature's output.
pub fn model(consts: usize) -> AnyResult<WireMessage> {
    model_holding(consts, &content())
}

/// [`model`], each constant holding `value`.
fn model_holding(consts: usize, value: &Bytes) -> AnyResult<WireMessage> {
    let nodes = (0..consts)
        .map(|i| {
            let name = if i == 0 {
                "big".to_string()
            } else {
                format!("big_{i}")
            };
            encode_node(&const_node(&name, &[ELEMENTS], value.clone()))
        })
        .collect();
    saved_model(nodes, ("x", &[1]), ("big", &[ELEMENTS]))
}

/// Where the constants' values go in the `.cpb`.
#[derive(Clone, Copy, Debug)]
pub enum Layout {
    /// Each node a message chunk of its own (an empty node left in its place, as
    /// TensorFlow's splitter leaves one).
    Nodes,
    /// Each value a bytes chunk of its own (`tensor_content` taken out of its node, as
    /// TensorFlow's splitter takes out a large constant's).
    Values,
    /// Each node in a chunk of the graph itself (a `GraphDef` of that node, then an unknown
    /// field 100), merged into `graph_def` as TensorFlow's splitter places a graph's runs of
    /// nodes; the node taken out of the model.
    Graph,
}

/// The first field `number` of `message`, a message (`what` names it in errors).
fn message_field<'a>(
    message: &'a mut WireMessage,
    number: u32,
    what: &str,
) -> AnyResult<&'a mut WireMessage> {
    let field = message
        .fields
        .iter_mut()
        .find(|f| f.number == number)
        .ok_or_else(|| format!("no {what}"))?;
    match &mut field.value {
        WireValue::Message(m) => Ok(m),
        _ => Err(format!("{what} is not a message").into()),
    }
}

/// Writes `dir/saved_model.cpb`: [`model`] of `consts` constants laid out as `layout`
/// says, compressed with `compression`.
pub fn write(dir: &Path, compression: Compression, consts: usize, layout: Layout) -> AnyResult<()> {
    let desc = crate::descriptor("tensorflow.SavedModel");
    let mut sink = ChunkSink::new(desc, true);
    let node_path = |index: u64| {
        vec![
            PathElem::from("meta_graphs"),
            PathElem::from(0u64),
            PathElem::from("graph_def"),
            PathElem::from("node"),
            PathElem::from(index),
        ]
    };
    let model = match layout {
        Layout::Nodes => {
            let mut model = model(consts)?;
            let meta = message_field(&mut model, 2, "meta_graphs[0]")?;
            let graph = message_field(meta, 2, "graph_def")?;
            for (index, field) in (0u64..).zip(graph.fields.iter_mut().filter(|f| f.number == 1)) {
                let empty = WireValue::Message(WireMessage::new(None));
                let WireValue::Bytes(node) = std::mem::replace(&mut field.value, empty) else {
                    return Err("a node is not bytes".into());
                };
                let node = WireMessage::parse(&node.bytes()?, None)?;
                sink.add_chunk(Chunk::Message(node), &node_path(index), None)?;
            }
            model
        }
        Layout::Graph => {
            let mut model = model(consts)?;
            let meta = message_field(&mut model, 2, "meta_graphs[0]")?;
            let graph = message_field(meta, 2, "graph_def")?;
            let graph_path = [
                PathElem::from("meta_graphs"),
                PathElem::from(0u64),
                PathElem::from("graph_def"),
            ];
            for field in graph.fields.iter().filter(|f| f.number == 1) {
                let mut chunk = WireMessage::new(None);
                chunk.fields.push(field.clone());
                chunk.fields.push(unbound_wire::WireField {
                    number: 100,
                    value: WireValue::Varint(7),
                });
                sink.add_chunk(Chunk::Message(chunk), &graph_path, None)?;
            }
            graph.fields.retain(|f| f.number != 1);
            model
        }
        Layout::Values => {
            let value = content();
            for index in 0..consts as u64 {
                let mut path = node_path(index);
                path.extend(["attr", "value", "tensor", "tensor_content"].map(PathElem::from));
                let chunk = Chunk::Bytes(Payload::Inline(value.clone()));
                sink.add_chunk(chunk, &path, None)?;
            }
            model_holding(consts, &Bytes::new())?
        }
    };
    let options = WriterOptions {
        compression,
        ..WriterOptions::default()
    };
    write_split(
        &dir.join("saved_model"),
        sink.finish(model),
        options,
        &mut |_| {},
    )?;
    Ok(())
}

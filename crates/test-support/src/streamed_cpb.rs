//! A `.cpb` whose graph is one message chunk of 64 MiB or more: the chunk merges stream
//! rather than decode whole (`unbound_chunked::FileChunks::streams_chunk_at`), for the tests
//! of what rides on that stream (verify's single pass, externalize's spooled values).

use std::path::Path;

use bytes::Bytes;
use unbound_chunked::{write_split, Chunk, ChunkSink, PathElem};
use unbound_records::{Compression, WriterOptions};
use unbound_wire::{WireMessage, WireValue};

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

/// The model: one `serve` MetaGraph whose graph is one `Const` named `big`, holding
/// [`content`], the signature's output.
pub fn model() -> AnyResult<WireMessage> {
    let node = const_node("big", &[ELEMENTS], content());
    saved_model(vec![encode_node(&node)], ("x", &[1]), ("big", &[ELEMENTS]))
}

/// Writes `dir/saved_model.cpb`: [`model`] with its graph a chunk of its own, compressed
/// with `compression`.
pub fn write(dir: &Path, compression: Compression) -> AnyResult<()> {
    let mut model = model()?;
    let desc = crate::descriptor("tensorflow.SavedModel");
    let meta = model
        .fields
        .iter_mut()
        .find(|f| f.number == 2)
        .ok_or("no meta graph")?;
    let WireValue::Message(meta) = &mut meta.value else {
        return Err("meta_graphs[0] is not a message".into());
    };
    let at = meta
        .fields
        .iter()
        .position(|f| f.number == 2)
        .ok_or("no graph")?;
    let WireValue::Message(graph) = meta.fields.remove(at).value else {
        return Err("graph_def is not a message".into());
    };
    let graph = WireMessage::parse(&Bytes::from(graph.to_vec()?), None)?;
    let mut sink = ChunkSink::new(desc, true);
    sink.add_chunk(
        Chunk::Message(graph),
        &[
            PathElem::from("meta_graphs"),
            PathElem::from(0u64),
            PathElem::from("graph_def"),
        ],
        None,
    )?;
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

//! A `.cpb` whose graph is one message chunk of 64 MiB or more, which merges stream rather
//! than decode whole. `verify` streams it once: the check of its records leaves its
//! decompression to the merge (`check_chunks_deferring`), and the fingerprint takes the
//! chunk's hash from the merge's stream (`StreamPrints`). What it reports must be what the
//! separate passes find: the fingerprint equal to the one computed on its own from the file,
//! and a damaged chunk refused.

use bytes::Bytes;
use unbound_chunked::{write_split, Chunk, ChunkSink, PathElem};
use unbound_records::{Compression, RecordReader, WriterOptions};
use unbound_savedmodel::fingerprint::{fingerprint_dir, write_fingerprint};
use unbound_savedmodel::verify::verify_dir;
use unbound_test_support::models::{const_node, encode_node, saved_model};
use unbound_wire::{WireMessage, WireValue};

/// Writes `dir/saved_model.cpb`: a model whose graph (one 66 MiB constant) is a chunk of its
/// own, compressed with `compression`.
fn write_model(dir: &std::path::Path, compression: Compression) {
    // Not one repeated byte: the chunk must take real decompression.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let content: Vec<u8> = (0..(66usize << 20))
        .map(|i| {
            if i % 4 == 0 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
            }
            (x >> (8 * (i % 4))) as u8 & 0x3f
        })
        .collect();
    let node = const_node("big", &[66 << 18], Bytes::from(content));
    let mut model = saved_model(vec![encode_node(&node)], ("x", &[1]), ("big", &[66 << 18]))
        .expect("the model builds");
    // Take the graph out of the model into a chunk of its own.
    let desc = unbound_proto::descriptor_pool()
        .get_message_by_name("tensorflow.SavedModel")
        .unwrap();
    let WireValue::Message(meta) = &mut model
        .fields
        .iter_mut()
        .find(|f| f.number == 2)
        .unwrap()
        .value
    else {
        panic!("meta_graphs[0] is not a message");
    };
    let at = meta.fields.iter().position(|f| f.number == 2).unwrap();
    let WireValue::Message(graph) = meta.fields.remove(at).value else {
        panic!("graph_def is not a message");
    };
    let graph = WireMessage::parse(&Bytes::from(graph.to_vec().unwrap()), None).unwrap();
    let mut sink = ChunkSink::new(desc, true);
    sink.add_chunk(
        Chunk::Message(graph),
        &[
            PathElem::from("meta_graphs"),
            PathElem::from(0u64),
            PathElem::from("graph_def"),
        ],
        None,
    )
    .unwrap();
    let options = WriterOptions {
        compression,
        ..WriterOptions::default()
    };
    write_split(
        &dir.join("saved_model"),
        sink.finish(model),
        options,
        &mut |_| {},
    )
    .unwrap();
}

#[test]
fn verify_streams_a_large_chunk_once_and_finds_what_the_separate_passes_find() {
    for compression in [Compression::Zstd { level: 1 }, Compression::None] {
        let dir = tempfile::tempdir().unwrap();
        write_model(dir.path(), compression);
        let cpb = dir.path().join("saved_model.cpb");
        let reader = RecordReader::open(&cpb).unwrap();
        let largest = reader
            .chunks()
            .map(|c| c.unwrap().decoded_data_size)
            .max()
            .unwrap();
        assert!(largest >= 64 << 20, "no chunk to stream ({largest} bytes)");
        // The fingerprint computed on its own from the file, stored; verify must agree.
        let alone = fingerprint_dir(dir.path()).unwrap();
        write_fingerprint(dir.path(), &alone).unwrap();
        let report = verify_dir(dir.path());
        assert!(
            report.faults.is_empty(),
            "{compression:?}: {:?}",
            report.faults
        );
        assert!(
            report
                .checked
                .iter()
                .any(|c| c.contains("fingerprint.pb matches")),
            "{compression:?}: {:?}",
            report.checked
        );

        // A byte of the chunk changed: refused, whichever pass meets it first.
        let mut bytes = std::fs::read(&cpb).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x40;
        std::fs::write(&cpb, &bytes).unwrap();
        let report = verify_dir(dir.path());
        assert!(
            !report.faults.is_empty(),
            "{compression:?}: a damaged chunk passed"
        );
    }
}

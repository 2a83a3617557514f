//! A message chunk declaring 64 MiB or more (`STREAM_AT`) is parsed as it streams from the
//! file, whether its Riegeli chunk is compressed or stored: its large values stay in the file
//! as lazy references, and the reader holds none of its decoded bytes. (A stored record
//! crosses a block header every 64 KiB, so "reading it in place" copied it out whole: `show`
//! of a model of 600 MB stored chunks held 1.2 GB.)

use std::sync::Arc;

use bytes::Bytes;
use prost::Message;
use unbound_chunked::{write_split, Chunk, ChunkSink, FileChunks, Merger, PathElem};
use unbound_proto::unbound::test::ManyFields;
use unbound_records::{Compression, RecordReader, WriterOptions};
use unbound_wire::{Payload, WireMessage, WireValue};

/// The value of field `number` of `message`.
fn field(message: &WireMessage, number: u32) -> &WireValue {
    &message
        .fields
        .iter()
        .find(|f| f.number == number)
        .unwrap_or_else(|| panic!("no field {number}"))
        .value
}

#[test]
fn a_large_message_chunk_is_streamed_stored_or_compressed() {
    let desc = unbound_proto::descriptor_pool()
        .get_message_by_name("unbound.test.ManyFields")
        .unwrap();
    // 65 MiB of text in a message chunk of its own, beside a small field.
    let text: String = "constant ".repeat((65 << 20) / 9 + 1);
    let child = ManyFields {
        string_field: text.clone(),
        int32_field: 7,
        ..Default::default()
    };
    let base = ManyFields {
        int64_field: 5,
        ..Default::default()
    };
    let mut whole = base.clone();
    whole.field_one = Some(Box::new(child.clone()));
    let expected = whole.encode_to_vec();
    for compression in [Compression::None, Compression::Zstd { level: 1 }] {
        let mut sink = ChunkSink::new(desc.clone(), true);
        let child_wire =
            WireMessage::parse(&Bytes::from(child.encode_to_vec()), Some(desc.clone())).unwrap();
        sink.add_chunk(
            Chunk::Message(child_wire),
            &[PathElem::from("field_one")],
            None,
        )
        .unwrap();
        let base_wire =
            WireMessage::parse(&Bytes::from(base.encode_to_vec()), Some(desc.clone())).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let options = WriterOptions {
            compression,
            ..WriterOptions::default()
        };
        let written = write_split(
            &dir.path().join("m"),
            sink.finish(base_wire),
            options,
            &mut |_| {},
        )
        .unwrap();

        let reader = Arc::new(RecordReader::open(&written.path).unwrap());
        let (chunks, metadata) = FileChunks::from_reader(Arc::clone(&reader)).unwrap();
        let root = metadata.message.unwrap();
        let merged = Merger::new(&chunks).merge(&desc, &root).unwrap();
        let WireValue::Message(one) = field(&merged, 1) else {
            panic!("{compression:?}: field_one is not a message");
        };
        assert!(
            matches!(field(one, 3), WireValue::Bytes(Payload::Record(_))),
            "{compression:?}: the 65 MiB value was read into memory"
        );
        assert!(
            reader.decoded_bytes_held() < 1 << 20,
            "{compression:?}: the reader holds {} decoded bytes",
            reader.decoded_bytes_held()
        );
        assert!(
            merged.to_vec().unwrap() == expected,
            "{compression:?}: the merged message differs"
        );
    }
}

/// Records the name of the thread each stream began on.
#[derive(Default)]
struct Threads(std::sync::Mutex<Vec<String>>);

impl unbound_chunked::StreamTap for Threads {
    fn begin(
        &self,
        _: unbound_chunked::StreamedChunk,
    ) -> Option<Box<dyn unbound_chunked::TapSink>> {
        let name = std::thread::current().name().unwrap_or("").to_string();
        self.0.lock().unwrap().push(name);
        None
    }
}

#[test]
fn chunks_streamed_ahead_merge_as_in_order() {
    let dir = tempfile::tempdir().unwrap();
    use unbound_test_support::streamed_cpb::{write, Layout};
    write(dir.path(), Compression::Zstd { level: 1 }, 2, Layout::Nodes).unwrap();
    let cpb = dir.path().join("saved_model.cpb");
    let root = unbound_proto::descriptor_pool()
        .get_message_by_name("tensorflow.SavedModel")
        .unwrap();
    let merged = |ahead: bool| {
        let (mut chunks, metadata) = FileChunks::open(&cpb).unwrap();
        let threads = Arc::new(Threads::default());
        chunks.set_stream_tap(Arc::clone(&threads) as Arc<dyn unbound_chunked::StreamTap>);
        let message = metadata.message.unwrap();
        if ahead {
            chunks.stream_ahead(&root, &message);
        }
        let merged = Merger::new(&chunks).merge(&root, &message).unwrap();
        let bytes = merged.to_vec().unwrap();
        drop(chunks);
        let threads = std::mem::take(&mut *threads.0.lock().unwrap());
        (bytes, threads)
    };
    let (in_order, threads) = merged(false);
    assert_eq!(threads.len(), 2, "two chunks streamed: {threads:?}");
    assert!(threads.iter().all(|t| t != "unbound-stream-ahead"));
    let (ahead, threads) = merged(true);
    assert!(ahead == in_order, "the merge streamed ahead differs");
    assert_eq!(threads.len(), 2, "each chunk streamed once: {threads:?}");
    assert!(
        threads.iter().any(|t| t == "unbound-stream-ahead"),
        "nothing was streamed ahead: {threads:?}"
    );
}

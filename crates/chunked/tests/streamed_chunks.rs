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

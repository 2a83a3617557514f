//! Partial reads: merging only the chunks that pruned metadata names.

use bytes::Bytes;
use prost::Message;
use unbound_chunked::{
    prune::{prune, tag_field},
    read_cpb, read_cpb_partial, write_split, Chunk, ChunkSink, PathElem,
};
use unbound_proto::unbound::test::ManyFields;
use unbound_records::WriterOptions;
use unbound_wire::WireMessage;

#[test]
fn pruned_metadata_reads_only_the_kept_paths() {
    let desc = unbound_proto::descriptor_pool()
        .get_message_by_name("unbound.test.ManyFields")
        .unwrap();
    let leaf = |s: &str| ManyFields {
        string_field: s.into(),
        ..Default::default()
    };
    let base = ManyFields {
        int32_field: 5,
        ..Default::default()
    };
    let mut sink = ChunkSink::new(desc.clone(), true);
    let as_chunk = |m: &ManyFields| {
        Chunk::Message(
            WireMessage::parse(&Bytes::from(m.encode_to_vec()), Some(desc.clone())).unwrap(),
        )
    };
    sink.add_chunk(as_chunk(&leaf("one")), &[PathElem::from("field_one")], None)
        .unwrap();
    sink.add_chunk(
        Chunk::Bytes(unbound_wire::Payload::Inline(Bytes::from_static(b"text"))),
        &[PathElem::from("string_field")],
        None,
    )
    .unwrap();
    let wire = WireMessage::parse(&Bytes::from(base.encode_to_vec()), Some(desc.clone())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("m");
    let written = write_split(
        &prefix,
        sink.finish(wire),
        WriterOptions::default(),
        &mut |_| {},
    )
    .unwrap();

    let full = read_cpb(&written.path, &desc).unwrap();
    let metadata = full.metadata.unwrap().message.unwrap();
    let whole = ManyFields::decode(full.message.to_vec().unwrap().as_slice()).unwrap();
    assert_eq!(whole.string_field, "text");
    assert_eq!(whole.field_one.as_ref().unwrap().string_field, "one");

    let only_one = prune(&metadata, &[vec![tag_field(1)]]);
    assert_eq!(only_one.chunked_fields.len(), 1);
    let part = read_cpb_partial(&written.path, &desc, &only_one).unwrap();
    let part = ManyFields::decode(part.to_vec().unwrap().as_slice()).unwrap();
    assert_eq!(part.int32_field, 5, "the root chunk is kept");
    assert_eq!(part.field_one.unwrap().string_field, "one");
    assert_eq!(part.string_field, "", "the pruned chunk was not read");
}

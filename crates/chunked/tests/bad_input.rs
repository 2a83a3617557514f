//! Bad `.cpb` input at the library level: every fault gives the right error variant, naming
//! the file and the position, and never a panic. Then property tests: random mutations of
//! valid files (raw bytes, with and without repaired hashes; record contents) and random
//! metadata trees never make reading, merging or serializing panic.

mod common;

use std::io::Cursor;
use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;
use prost::Message;
use unbound_chunked::{
    generic::split_generic, read_cpb, ChunkSink, ChunkedError, FileChunks, MemoryChunks, Merger,
};
use unbound_proto::tensorflow::proto_splitter::{
    field_index::{map_key::Type as K, Kind, MapKey},
    ChunkInfo, ChunkMetadata, ChunkedField, ChunkedMessage, FieldIndex,
};
use unbound_proto::unbound::test::ManyFields;
use unbound_records::{
    Compression, HashedPart, RecordReader, RecordWriter, RecordsError, WriterOptions,
};
use unbound_test_support::chunks::{
    chunked_field as cf, field_tag as f, index_tag as ix, map_key_tag as key,
    write_cpb_with as write,
};
use unbound_test_support::data::noise;
use unbound_test_support::descriptor as desc;
use unbound_test_support::highway::{chunk_header, hh, rehash_chunk_header, signature};
use unbound_wire::WireMessage;

const NAME: &str = "bad.cpb";

fn many_fields() -> prost_reflect::MessageDescriptor {
    desc("unbound.test.ManyFields")
}

/// The message every sample file holds.
fn sample_message() -> ManyFields {
    let leaf = |s: &str| ManyFields {
        string_field: s.repeat(400),
        int64_field: 9,
        ..Default::default()
    };
    ManyFields {
        field_one: Some(Box::new(ManyFields {
            bytes_field: Bytes::from(noise(1, 150_000)),
            string_field: "one".into(),
            ..Default::default()
        })),
        repeated_field: vec![leaf("a"), leaf("b"), leaf("c")],
        nested_map_string: [(
            "k".to_string(),
            ManyFields {
                int32_field: 4,
                ..Default::default()
            },
        )]
        .into(),
        repeated_bytes_field: vec![Bytes::from(noise(2, 20_000))],
        int32_field: 7,
        ..Default::default()
    }
}

/// The sample split by the generic splitter: its chunks and metadata.
fn sample_split() -> (Vec<Bytes>, ChunkMetadata) {
    let desc = many_fields();
    let bytes = Bytes::from(sample_message().encode_to_vec());
    let mut message = WireMessage::parse(&bytes, Some(desc.clone())).unwrap();
    let mut sink = ChunkSink::new(desc.clone(), true);
    split_generic(&mut message, &desc, &mut sink.root(), 1000).unwrap();
    let split = sink.finish(message);
    common::chunks_and_metadata(split)
}

/// The sample as an uncompressed file, one record per chunk, with `edit` applied to its
/// metadata.
fn sample_with(edit: impl FnOnce(&mut ChunkMetadata)) -> Vec<u8> {
    let (chunks, metadata) = sample_split();
    write(&chunks, metadata, Compression::None, 1, edit)
}

fn sample_file() -> Vec<u8> {
    sample_with(|_| {})
}

/// The record position of the sample file's metadata.
fn sample_file_metadata_position() -> u64 {
    let reader = RecordReader::from_bytes(Bytes::from(sample_file()), NAME).unwrap();
    reader.last_record().unwrap().0
}

/// Reads, merges into ManyFields and serializes.
fn merge_file(file: &[u8]) -> Result<Vec<u8>, ChunkedError> {
    let reader = RecordReader::from_bytes(Bytes::copy_from_slice(file), NAME)?;
    let (chunks, metadata) = FileChunks::from_reader(Arc::new(reader))?;
    let root = metadata.message.unwrap_or_default();
    Ok(Merger::new(&chunks)
        .merge(&many_fields(), &root)?
        .to_vec()?)
}

fn chunk_begins(file: &[u8]) -> Vec<u64> {
    let reader = RecordReader::from_bytes(Bytes::copy_from_slice(file), "x").unwrap();
    reader
        .chunks()
        .map(|c| c.unwrap().begin)
        .filter(|b| *b != 0)
        .collect()
}

fn flip(file: &[u8], at: usize) -> Vec<u8> {
    let mut f = file.to_vec();
    f[at] ^= 0x21;
    f
}

fn push_field(m: &mut ChunkMetadata, field: ChunkedField) {
    m.message.as_mut().unwrap().chunked_fields.push(field);
}

#[test]
fn the_sample_merges() {
    // The control: the undamaged sample gives back the original, and is large enough to have
    // block headers inside it.
    let file = sample_file();
    assert!(file.len() > 2 * 65_536);
    let merged = merge_file(&file).unwrap();
    assert_eq!(
        ManyFields::decode(merged.as_slice()).unwrap(),
        sample_message()
    );
    assert!(sample_split().0.len() >= 5);
    // The test's own hash agrees with the writer's.
    assert_eq!(signature(), file[..64].to_vec());
    let begin = chunk_begins(&file)[0] as usize;
    let mut copy = file.clone();
    copy[begin..begin + 8].fill(0);
    rehash_chunk_header(&mut copy, begin);
    assert_eq!(copy, file);
}

#[test]
fn not_riegeli_empty_and_truncated() {
    let dir = tempfile::tempdir().unwrap();
    // Through read_cpb, errors name the path.
    let path = dir.path().join("empty.cpb");
    std::fs::write(&path, b"").unwrap();
    match read_cpb(&path, &many_fields()) {
        Err(ChunkedError::Records(RecordsError::NotRiegeli { file, detail })) => {
            assert_eq!(file, path.display().to_string());
            assert!(detail.contains("empty"), "{detail}");
        }
        Err(e) => panic!("{e:?}"),
        Ok(_) => panic!("an empty file merged"),
    }
    let missing = dir.path().join("missing.cpb");
    match read_cpb(&missing, &many_fields()) {
        Err(e) => assert!(
            e.to_string().contains(&missing.display().to_string()),
            "{e}"
        ),
        Ok(_) => panic!("a missing file merged"),
    }
    for junk in [
        b"not a riegeli file at all, just some text that is long enough to be one".to_vec(),
        ManyFields::default().encode_to_vec(),
        sample_message().encode_to_vec(),
        vec![0u8; 1000],
    ] {
        match merge_file(&junk) {
            Err(ChunkedError::Records(RecordsError::NotRiegeli { file, .. })) => {
                assert_eq!(file, NAME)
            }
            other => panic!("expected NotRiegeli, got {:?}", other.map(|v| v.len())),
        }
    }

    let file = sample_file();
    let begins = chunk_begins(&file);
    let last = *begins.last().unwrap() as usize;
    for cut in [1, 30, 63] {
        assert!(
            matches!(
                merge_file(&file[..cut]),
                Err(ChunkedError::Records(RecordsError::Truncated {
                    offset: 0,
                    ..
                }))
            ),
            "cut {cut}"
        );
    }
    assert!(matches!(
        merge_file(&file[..64]),
        Err(ChunkedError::Records(RecordsError::NoRecords { .. }))
    ));
    // Cuts inside chunk headers, chunk data and block headers.
    let mut cuts: Vec<usize> = vec![70, 200, 65_536 + 5, 65_536 + 30, last + 10, last + 45];
    cuts.extend(begins.iter().map(|b| *b as usize + 20));
    cuts.push(file.len() - 1);
    for cut in cuts {
        match merge_file(&file[..cut]) {
            Err(ChunkedError::Records(e @ RecordsError::Truncated { .. })) => {
                assert_eq!(e.file(), NAME);
                assert!(e.offset().unwrap() <= cut as u64, "cut {cut}: {e}");
                assert!(
                    e.to_string().contains(&cut.to_string()),
                    "cut {cut}: {e} names the size"
                );
            }
            other => panic!(
                "cut {cut}: expected Truncated, got {:?}",
                other.map(|v| v.len())
            ),
        }
    }
    // A cut at a chunk boundary is a valid shorter Riegeli file: its last record is taken for
    // the metadata. Here it happens to parse as a ChunkMetadata (protobuf parsing is lenient),
    // so all that can be asked is that the original is not claimed.
    match merge_file(&file[..last]) {
        Err(ChunkedError::Metadata { source_name, fault }) => {
            assert_eq!(source_name, NAME);
            assert!(fault.contains("not a ChunkMetadata"), "{fault}");
        }
        // Or it parses, and names chunks that do not fit the records left.
        Err(ChunkedError::Layout { source_name, .. }) => assert_eq!(source_name, NAME),
        Err(e) => panic!("{e}"),
        Ok(v) => assert_ne!(v, sample_message().encode_to_vec()),
    }
}

#[test]
fn flipped_bytes() {
    let file = sample_file();
    let begins = chunk_begins(&file);
    for &begin in &begins {
        for d in [0usize, 9, 20, 27, 39] {
            let at = begin as usize + d;
            if at % 65_536 < 24 {
                continue;
            }
            match merge_file(&flip(&file, at)) {
                Err(ChunkedError::Records(RecordsError::HashMismatch { file, part, offset })) => {
                    assert_eq!(file, NAME);
                    assert_eq!(part, HashedPart::ChunkHeader, "flip at {at}");
                    assert_eq!(offset, begin, "flip at {at}");
                }
                Err(e) => panic!("flip at {at}: {e}"),
                Ok(_) => panic!("flip at {at} in a chunk header went unnoticed"),
            }
        }
        // Chunk data (each chunk is read by the merge).
        let at = begin as usize + 41;
        if at % 65_536 >= 24 {
            match merge_file(&flip(&file, at)) {
                Err(ChunkedError::Records(RecordsError::HashMismatch { part, offset, .. })) => {
                    assert_eq!(part, HashedPart::ChunkData, "flip at {at}");
                    assert_eq!(offset, begin, "flip at {at}");
                }
                Err(e) => panic!("flip at {at}: {e}"),
                Ok(_) => panic!("flip at {at} in chunk data went unnoticed"),
            }
        }
    }
    let mut block = 65_536;
    while block + 24 <= file.len() {
        for at in [block, block + 10, block + 23] {
            match merge_file(&flip(&file, at)) {
                Err(ChunkedError::Records(RecordsError::HashMismatch { part, offset, .. })) => {
                    assert_eq!(part, HashedPart::BlockHeader, "flip at {at}");
                    assert_eq!(offset, block as u64, "flip at {at}");
                }
                Err(e) => panic!("flip at {at}: {e}"),
                Ok(_) => panic!("flip at {at} in a block header went unnoticed"),
            }
        }
        block += 65_536;
    }
}

fn expect_metadata_fault(file: &[u8], needles: &[&str]) {
    match merge_file(file) {
        Err(ChunkedError::Metadata { source_name, fault }) => {
            assert_eq!(source_name, NAME);
            for n in needles {
                assert!(fault.contains(n), "{fault:?} should mention {n:?}");
            }
        }
        // Found by the layout check before merging.
        Err(e @ ChunkedError::Layout { .. }) => {
            assert_eq!(e.to_string().split(':').next(), Some(NAME));
            for n in needles {
                assert!(e.to_string().contains(n), "{e} should mention {n:?}");
            }
        }
        Err(e) => panic!("expected a metadata fault mentioning {needles:?}, got {e:?}"),
        Ok(_) => panic!("expected a metadata fault mentioning {needles:?}, but it merged"),
    }
}

#[test]
fn chunk_index_and_position_out_of_range() {
    let n = sample_split().0.len();
    expect_metadata_fault(
        &sample_with(|m| m.message.as_mut().unwrap().chunk_index = Some(n as u64)),
        &[&format!("chunk index {n} is out of range for {n} chunks")],
    );
    expect_metadata_fault(
        &sample_with(|m| push_field(m, cf(vec![f(3)], Some(u64::MAX)))),
        &[&format!("chunk index {}", u64::MAX)],
    );
    expect_metadata_fault(
        &sample_with(|m| m.chunks.clear()),
        &["out of range for 0 chunks", "and 1 more"],
    );
    // A field with no nested message reads chunk 0, as TensorFlow does; with no chunks at all
    // that is out of range too (in a file, the records no chunk names are refused first).
    let empty_tree = ChunkedMessage {
        chunk_index: None,
        chunked_fields: vec![ChunkedField {
            field_tag: vec![f(3)],
            message: None,
        }],
    };
    let none = unbound_chunked::MemoryChunks::new(NAME, Vec::new());
    match Merger::new(&none).merge(&many_fields(), &empty_tree) {
        Err(e) => assert!(
            e.to_string()
                .contains("chunk index 0 is out of range for 0 chunks"),
            "{e}"
        ),
        Ok(_) => panic!("merged from no chunks"),
    }
    for pos in [1u64 << 40, u64::MAX] {
        for victim in [0, 1, n - 1] {
            // Caught before any read: chunks must precede the metadata record.
            match merge_file(&sample_with(|m| m.chunks[victim].offset = pos)) {
                Err(ChunkedError::Layout {
                    source_name,
                    faults,
                }) => {
                    assert_eq!(source_name, NAME);
                    assert_eq!(
                        faults[0].to_string(),
                        format!(
                            "chunk {victim} is at record position {pos}, not before the metadata record at {}",
                            sample_file_metadata_position()
                        )
                    );
                }
                Err(e) => panic!("{e:?}"),
                Ok(_) => panic!("position {pos} merged"),
            }
        }
    }
}

/// The sample with the 40-byte header of its `victim`-th chunk edited and rehashed; returns
/// the file and the chunk's position.
fn header_edit(victim: usize, edit: impl Fn(&mut [u8])) -> (Vec<u8>, u64) {
    let mut file = sample_file();
    let begin = chunk_begins(&file)[victim];
    let at = begin as usize;
    edit(&mut file[at..at + 40]);
    rehash_chunk_header(&mut file, at);
    (file, begin)
}

#[test]
fn sizes_claiming_terabytes() {
    const TB4: u64 = 4 << 40;
    let n = sample_split().0.len();
    for victim in [0, n] {
        let (file, begin) = header_edit(victim, |h| h[8..16].copy_from_slice(&TB4.to_le_bytes()));
        match merge_file(&file) {
            Err(ChunkedError::Records(RecordsError::Truncated { offset, detail, .. })) => {
                assert_eq!(offset, begin);
                assert!(detail.contains(&TB4.to_string()), "{detail}");
            }
            Err(e) => panic!("{e:?}"),
            Ok(_) => panic!("a 4 TiB chunk merged"),
        }
        let (file, begin) = header_edit(victim, |h| h[32..40].copy_from_slice(&TB4.to_le_bytes()));
        match merge_file(&file) {
            Err(ChunkedError::Records(RecordsError::Corrupt { offset, detail, .. })) => {
                assert_eq!(offset, begin);
                assert!(detail.contains(&TB4.to_string()), "{detail}");
            }
            Err(e) => panic!("{e:?}"),
            Ok(_) => panic!("a chunk decoding to 4 TiB merged"),
        }
        let (file, begin) = header_edit(victim, |h| {
            let t = u64::from_le_bytes(h[24..32].try_into().unwrap());
            h[24..32].copy_from_slice(&((t & 0xff) | (1u64 << 50) << 8).to_le_bytes());
        });
        match merge_file(&file) {
            Err(ChunkedError::Records(e)) => {
                assert_eq!(e.offset(), Some(begin), "{e}");
                assert!(e.to_string().contains(&(1u64 << 50).to_string()), "{e}");
            }
            Err(e) => panic!("{e:?}"),
            Ok(_) => panic!("a chunk of 2^50 records merged"),
        }
    }
    // A hand-made file whose only chunk claims 4 TiB.
    let mut file = signature();
    file.extend_from_slice(&chunk_header(b"data", b'r', 1, 4, Some(TB4)));
    file.extend_from_slice(b"data");
    assert!(matches!(
        merge_file(&file),
        Err(ChunkedError::Records(RecordsError::Truncated {
            offset: 64,
            ..
        }))
    ));
    // A protobuf length of 4 TiB inside the root chunk.
    let (mut chunks, metadata) = sample_split();
    let mut root = chunks[0].to_vec();
    root.extend_from_slice(&[0x1a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]);
    chunks[0] = Bytes::from(root);
    let file = write(&chunks, metadata, Compression::None, 1, |_| {});
    match merge_file(&file) {
        Err(ChunkedError::Wire { source_name, error }) => {
            assert!(source_name.starts_with("bad.cpb: chunk 0"), "{source_name}");
            assert!(error.fault.contains(&TB4.to_string()), "{error}");
        }
        Err(e) => panic!("{e:?}"),
        Ok(_) => panic!("merged"),
    }
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// `depth` nested ChunkedMessages, each level a chunked field with `tag`, encoded without
/// recursion (prost would recurse to build, encode and drop it).
fn nested_chunked_message(depth: usize, tag: &[FieldIndex]) -> Vec<u8> {
    let mut tag_bytes = Vec::new();
    for t in tag {
        let e = t.encode_to_vec();
        tag_bytes.push(0x0a);
        varint(e.len() as u64, &mut tag_bytes);
        tag_bytes.extend_from_slice(&e);
    }
    let vlen = |v: u64| {
        let mut b = Vec::new();
        varint(v, &mut b);
        b.len() as u64
    };
    let innermost = ChunkedMessage {
        chunk_index: Some(0),
        chunked_fields: vec![],
    }
    .encode_to_vec();
    let mut cm = vec![innermost.len() as u64];
    let mut cf = vec![0u64];
    for k in 1..=depth {
        let field = tag_bytes.len() as u64 + 1 + vlen(cm[k - 1]) + cm[k - 1];
        cf.push(field);
        cm.push(1 + vlen(field) + field);
    }
    let mut out = Vec::with_capacity(cm[depth] as usize);
    for k in (1..=depth).rev() {
        out.push(0x12);
        varint(cf[k], &mut out);
        out.extend_from_slice(&tag_bytes);
        out.push(0x1a);
        varint(cm[k - 1], &mut out);
    }
    out.extend_from_slice(&innermost);
    out
}

#[test]
fn absurdly_deep_nesting() {
    // Metadata nested 100 000 deep is refused by the protobuf decoder.
    let (chunks, metadata) = sample_split();
    let deep = nested_chunked_message(100_000, &[f(1)]);
    let mut meta = ChunkMetadata {
        message: None,
        ..metadata.clone()
    }
    .encode_to_vec();
    meta.push(0x1a);
    varint(deep.len() as u64, &mut meta);
    meta.extend_from_slice(&deep);
    let options = WriterOptions {
        compression: Compression::None,
        chunk_size: Some(1),
        store_incompressible: false,
    };
    let mut w = RecordWriter::new(Vec::new(), options).unwrap();
    for c in &chunks {
        w.write_record(c).unwrap();
    }
    w.write_record(&meta).unwrap();
    expect_metadata_fault(
        &w.finish().unwrap(),
        &["not a ChunkMetadata", "recursion limit"],
    );

    // A field tag path 100 000 fields deep (field_one.field_one...).
    let too_deep = |r: Result<Vec<u8>, ChunkedError>| match r {
        Err(ChunkedError::TooDeep { source_name, limit }) => {
            assert_eq!(source_name, NAME);
            assert_eq!(limit, unbound_chunked::merger::MAX_NESTING);
        }
        Err(e) => panic!("{e:?}"),
        Ok(_) => panic!("merged"),
    };
    too_deep(merge_file(&sample_with(|m| {
        push_field(m, cf(vec![f(1); 100_000], Some(1)))
    })));
    // Through a map and a repeated field on every step.
    let mut tags = Vec::new();
    for _ in 0..20_000 {
        tags.extend([f(8), key(K::S("k".into())), f(2), ix(0)]);
    }
    too_deep(merge_file(&sample_with(|m| {
        push_field(m, cf(tags, Some(1)))
    })));
    // 45 nested ChunkedMessages (fine for the decoder) of 3 levels each.
    let nested =
        ChunkedMessage::decode(nested_chunked_message(45, &[f(1), f(1), f(1)]).as_slice()).unwrap();
    too_deep(merge_file(&sample_with(|m| {
        push_field(
            m,
            ChunkedField {
                field_tag: vec![f(1)],
                message: Some(nested),
            },
        )
    })));
    // 30 of them stay within the limit and merge.
    let nested =
        ChunkedMessage::decode(nested_chunked_message(30, &[f(1), f(1), f(1)]).as_slice()).unwrap();
    merge_file(&sample_with(|m| {
        push_field(
            m,
            ChunkedField {
                field_tag: vec![f(2), ix(0)],
                message: Some(nested),
            },
        )
    }))
    .unwrap();
}

#[test]
fn field_tags_that_do_not_fit_the_schema() {
    let n = sample_split().0.len() as u64;
    let cases: Vec<(Vec<FieldIndex>, u64, &str)> = vec![
        (vec![f(999)], 1, "field number 999 not found"),
        (vec![f(1), f(998)], 1, "field number 998 not found"),
        (vec![f(3), f(1)], 1, "cannot hold more fields"),
        (vec![f(92), ix(0)], 1, "not repeated"),
        (vec![f(8)], 1, "needs a map key"),
        (
            vec![f(9), key(K::S("nine".into()))],
            1,
            "does not fit the key type",
        ),
        (
            vec![f(7), key(K::S("maybe".into()))],
            1,
            "does not fit the key type",
        ),
        (vec![f(34), f(1)], 1, "cannot hold more fields"),
    ];
    for (tags, chunk, needle) in cases {
        let what = format!("{tags:?}");
        match merge_file(&sample_with(|m| push_field(m, cf(tags, Some(chunk))))) {
            Err(ChunkedError::Schema { message, fault }) => {
                assert!(message.starts_with("unbound.test."), "{what}: {message}");
                assert!(
                    fault.contains(needle),
                    "{what}: {fault:?} should mention {needle:?}"
                );
                assert!(
                    fault.contains(NAME),
                    "{what}: {fault:?} should name the file"
                );
            }
            Err(e) => panic!("{what}: {e:?}"),
            Ok(_) => panic!("{what}: merged"),
        }
    }
    // Tags that are not field paths at all.
    for (tags, needle) in [
        (vec![ix(0)], "index does not follow a field"),
        (
            vec![key(K::Boolean(true))],
            "map key does not follow a field",
        ),
        (vec![f(2), FieldIndex { kind: None }], "no kind"),
        (
            vec![
                f(8),
                FieldIndex {
                    kind: Some(Kind::MapKey(MapKey { r#type: None })),
                },
            ],
            "map key with no type",
        ),
    ] {
        expect_metadata_fault(
            &sample_with(|m| m.message.as_mut().unwrap().chunked_fields = vec![cf(tags, Some(1))]),
            &[needle],
        );
    }
    // Text that is not a number for an int32 field.
    let (mut chunks, mut metadata) = sample_split();
    chunks.push(Bytes::from_static(b"forty-two"));
    metadata.chunks.push(ChunkInfo {
        r#type: 2,
        size: 9,
        offset: 0,
    });
    let file = write(&chunks, metadata, Compression::None, 1, |m| {
        push_field(m, cf(vec![f(20)], Some(n)))
    });
    match merge_file(&file) {
        Err(ChunkedError::TextScalar {
            source_name,
            chunk,
            field,
            expected,
            value,
        }) => {
            assert_eq!(source_name, NAME);
            assert_eq!(chunk, n);
            assert_eq!(field, "unbound.test.ManyFields.int32_field");
            assert!(expected.contains("int32"), "{expected}");
            assert_eq!(value, "forty-two");
        }
        Err(e) => panic!("{e:?}"),
        Ok(_) => panic!("merged"),
    }
    // A message field given bytes that are not a message.
    let (mut chunks, mut metadata) = sample_split();
    chunks.push(Bytes::from_static(b"\xff\xff\xff\xff"));
    metadata.chunks.push(ChunkInfo {
        r#type: 2,
        size: 4,
        offset: 0,
    });
    let file = write(&chunks, metadata, Compression::None, 1, |m| {
        push_field(m, cf(vec![f(1)], Some(n)))
    });
    match merge_file(&file) {
        Err(ChunkedError::Wire { source_name, .. }) => {
            assert!(
                source_name.contains(&format!("{NAME}: chunk {n}")),
                "{source_name}"
            )
        }
        Err(e) => panic!("{e:?}"),
        Ok(_) => panic!("merged"),
    }
}

#[test]
fn huge_repeated_index_is_refused() {
    // A file of a few hundred bytes whose metadata names repeated_field[2_000_000].
    let source = MemoryChunks::new(
        "tiny",
        vec![Bytes::from(ManyFields::default().encode_to_vec())],
    );
    let cm = ChunkedMessage {
        chunk_index: Some(0),
        chunked_fields: vec![cf(vec![f(2), ix(2_000_000)], Some(0))],
    };
    let result = Merger::new(&source).merge(&many_fields(), &cm);
    assert!(
        result.is_err(),
        "index 2000000 accepted: {} bytes of output from a 0-byte chunk",
        result.map(|m| m.encoded_len()).unwrap_or(0)
    );
}

// ---------------------------------------------------------------------------------------------
// Property tests: nothing panics.

/// Valid files of the sample in several encodings: ours with each compression and chunk
/// layout, and the `riegeli` crate's transposed chunks.
fn valid_files() -> &'static [Vec<u8>] {
    static FILES: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    FILES.get_or_init(|| {
        // A smaller message than the sample so each mutated case is quick.
        let desc = many_fields();
        let small = ManyFields {
            field_one: Some(Box::new(ManyFields {
                bytes_field: Bytes::from(noise(3, 300)),
                string_field: "one".into(),
                ..Default::default()
            })),
            repeated_field: vec![
                ManyFields {
                    string_field: "r".repeat(200),
                    ..Default::default()
                };
                3
            ],
            nested_map_int64: [(
                -4,
                ManyFields {
                    uint64_field: 5,
                    ..Default::default()
                },
            )]
            .into(),
            map_field_string_bytes: [("b".to_string(), Bytes::from(noise(4, 150)))].into(),
            int32_field: 7,
            packed_int32: vec![1, 2, 3],
            ..Default::default()
        };
        let bytes = Bytes::from(small.encode_to_vec());
        let mut message = WireMessage::parse(&bytes, Some(desc.clone())).unwrap();
        let mut sink = ChunkSink::new(desc.clone(), true);
        split_generic(&mut message, &desc, &mut sink.root(), 200).unwrap();
        let split = sink.finish(message);
        let mut chunks = Vec::new();
        let mut infos = Vec::new();
        for c in &split.chunks {
            let (b, t) = match c {
                unbound_chunked::Chunk::Message(m) => (Bytes::from(m.to_vec().unwrap()), 1),
                unbound_chunked::Chunk::SerializedMessage(p) => (p.bytes().unwrap(), 1),
                unbound_chunked::Chunk::Bytes(p) => (p.bytes().unwrap(), 2),
            };
            infos.push(ChunkInfo {
                r#type: t,
                size: b.len() as u64,
                offset: 0,
            });
            chunks.push(b);
        }
        // Also a text scalar chunk and a map-key chunked field.
        chunks.push(Bytes::from_static(b"-12"));
        infos.push(ChunkInfo {
            r#type: 2,
            size: 3,
            offset: 0,
        });
        let mut message = split.message.clone();
        message
            .chunked_fields
            .push(cf(vec![f(21)], Some(chunks.len() as u64 - 1)));
        let metadata = ChunkMetadata {
            version: Some(unbound_chunked::write::version_def()),
            chunks: infos,
            message: Some(message),
        };
        let mut files = Vec::new();
        for compression in [
            Compression::None,
            Compression::Brotli { level: 6 },
            Compression::Zstd { level: 3 },
            Compression::Snappy,
        ] {
            for chunk_size in [1, 1 << 16] {
                files.push(write(
                    &chunks,
                    metadata.clone(),
                    compression,
                    chunk_size,
                    |_| {},
                ));
            }
        }
        // The riegeli crate, transposed: the positions of its records are found by reading.
        let mut records: Vec<Vec<u8>> = chunks.iter().map(|c| c.to_vec()).collect();
        let riegeli_file = |records: &[Vec<u8>]| {
            let mut buf = Vec::new();
            let opts = riegeli::WriterOptions::new()
                .compression(riegeli::CompressionType::Zstd)
                .transpose(true);
            let mut w = riegeli::RecordWriter::new(Cursor::new(&mut buf), opts).unwrap();
            for r in records {
                w.write_record(r).unwrap();
            }
            w.close().unwrap();
            buf
        };
        let probe = riegeli_file(&records);
        let reader = RecordReader::from_bytes(Bytes::from(probe), "probe").unwrap();
        let positions: Vec<u64> = reader.records().map(|r| r.unwrap().0).collect();
        let mut md = metadata.clone();
        for (info, p) in md.chunks.iter_mut().zip(positions) {
            info.offset = p;
        }
        records.push(md.encode_to_vec());
        files.push(riegeli_file(&records));
        for file in &files {
            let merged = merge_file(file).expect("every valid file merges");
            let got = ManyFields::decode(merged.as_slice()).unwrap();
            assert_eq!(got.int64_field, -12);
            assert_eq!(got.repeated_field.len(), 3);
        }
        files
    })
}

/// Largest repeated-field index the property tests let through to the Merger (see
/// `huge_repeated_index_is_refused`: larger ones exhaust memory).
const INDEX_GUARD: u64 = 100_000;

fn has_huge_index(cm: &ChunkedMessage) -> bool {
    cm.chunked_fields.iter().any(|cf| {
        cf.field_tag
            .iter()
            .any(|t| matches!(t.kind, Some(Kind::Index(i)) if i > INDEX_GUARD))
            || cf.message.as_ref().is_some_and(has_huge_index)
    })
}

/// Everything a reader of the file might do; errors are fine, panics are not.
fn exercise(file: Vec<u8>) {
    let Ok(reader) = RecordReader::from_bytes(Bytes::from(file), NAME) else {
        return;
    };
    let _ = reader.records().take(200).count();
    let _ = reader.chunks().take(200).count();
    let Ok((mut chunks, metadata)) = FileChunks::from_reader(Arc::new(reader)) else {
        return;
    };
    let root = metadata.message.clone().unwrap_or_default();
    if has_huge_index(&root) {
        return;
    }
    for (lazy, name) in [
        (true, "unbound.test.ManyFields"),
        (false, "tensorflow.SavedModel"),
    ] {
        chunks.set_lazy(lazy);
        if let Ok(m) = Merger::new(&chunks).merge(&desc(name), &root) {
            if m.encoded_len() < 64 << 20 {
                if let Ok(v) = m.to_vec() {
                    assert_eq!(v.len() as u64, m.encoded_len());
                }
            }
        }
    }
}

#[derive(Clone, Debug)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Overwrite(usize, Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), 1u8..=255).prop_map(|(p, m)| Mutation::Flip(p, m)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        1 => (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16)).prop_map(|(p, b)| Mutation::Insert(p, b)),
        2 => (any::<usize>(), prop::collection::vec(any::<u8>(), 1..9)).prop_map(|(p, b)| Mutation::Overwrite(p, b)),
    ]
}

fn apply(file: &mut Vec<u8>, m: &Mutation, focus: usize) {
    if file.is_empty() {
        return;
    }
    let len = file.len();
    let at = |p: usize| {
        if focus > 0 && focus < len && p % 2 == 0 {
            focus + p % (len - focus)
        } else {
            p % len
        }
    };
    match m {
        Mutation::Flip(p, mask) => {
            let i = at(*p);
            file[i] ^= mask;
        }
        Mutation::Truncate(p) => {
            let i = at(*p);
            file.truncate(i);
        }
        Mutation::Insert(p, b) => {
            let i = at(*p);
            file.splice(i..i, b.iter().copied());
        }
        Mutation::Overwrite(p, b) => {
            let i = at(*p);
            for (k, v) in b.iter().enumerate() {
                if let Some(x) = file.get_mut(i + k) {
                    *x = *v;
                }
            }
        }
    }
}

/// Recomputes the data and header hashes of every chunk that lies inside one block and whose
/// header still parses as a size that fits, so that mutations reach the decoders.
fn repair_hashes(file: &mut [u8], begins: &[u64]) {
    for &b in begins {
        let b = b as usize;
        if b + 40 > file.len() || b / 65_536 != (b + 40) / 65_536 {
            continue;
        }
        let size = u64::from_le_bytes(file[b + 8..b + 16].try_into().unwrap()) as usize;
        let end = b.saturating_add(40).saturating_add(size);
        if end > file.len() || b / 65_536 != end / 65_536 {
            continue;
        }
        let h = hh(&file[b + 40..end]);
        file[b + 16..b + 24].copy_from_slice(&h.to_le_bytes());
        rehash_chunk_header(file, b);
    }
}

/// `PROPTEST_CASES` when set (for long hunts), else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(400),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_files_never_panic(
        which in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 1..4),
        repair in any::<bool>(),
        focus_metadata in any::<bool>(),
    ) {
        let files = valid_files();
        let original = &files[which.index(files.len())];
        let begins = chunk_begins(original);
        // Half of the mutations land in the last chunk (the metadata) when asked.
        let focus = if focus_metadata { *begins.last().unwrap() as usize } else { 0 };
        let mut file = original.clone();
        for m in &mutations {
            apply(&mut file, m, focus);
        }
        if repair && file.len() == original.len() {
            repair_hashes(&mut file, &begins);
        }
        exercise(file);
    }

    #[test]
    fn mutated_records_never_panic(
        which_record in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 1..4),
        compression in prop::sample::select(vec![0u8, 1, 2, 3]),
    ) {
        // Valid Riegeli files whose records (chunks or metadata) were damaged.
        let (mut chunks, metadata) = sample_split();
        let mut records: Vec<Vec<u8>> = chunks.iter().map(|c| c.to_vec()).collect();
        records.push(metadata.encode_to_vec());
        let victim = which_record.index(records.len());
        for m in &mutations {
            apply(&mut records[victim], m, 0);
        }
        let meta = records.pop().unwrap();
        chunks = records.into_iter().map(Bytes::from).collect();
        let compression = [
            Compression::None,
            Compression::Brotli { level: 1 },
            Compression::Zstd { level: 1 },
            Compression::Snappy,
        ][compression as usize];
        let options = WriterOptions { compression, chunk_size: Some(1), store_incompressible: false };
        let mut w = RecordWriter::new(Vec::new(), options).unwrap();
        for c in &chunks {
            w.write_record(c).unwrap();
        }
        w.write_record(&meta).unwrap();
        exercise(w.finish().unwrap());
    }

    #[test]
    fn random_metadata_never_panics(
        root in chunked_message(),
        chunks in prop::collection::vec(chunk_content(), 0..6),
    ) {
        let source = MemoryChunks::new("random", chunks.into_iter().map(Bytes::from).collect());
        for name in ["unbound.test.ManyFields", "tensorflow.SavedModel", "unbound.test.StringNode"] {
            if let Ok(m) = Merger::new(&source).merge(&desc(name), &root) {
                let v = m.to_vec().unwrap();
                prop_assert_eq!(v.len() as u64, m.encoded_len());
            }
        }
    }
}

fn field_index() -> impl Strategy<Value = FieldIndex> {
    let key = prop_oneof![
        "[a-z]{0,3}".prop_map(K::S),
        any::<bool>().prop_map(K::Boolean),
        any::<u32>().prop_map(K::Ui32),
        any::<u64>().prop_map(K::Ui64),
        any::<i32>().prop_map(K::I32),
        any::<i64>().prop_map(K::I64),
    ];
    prop_oneof![
        6 => prop::sample::select(vec![1u32, 2, 3, 4, 5, 6, 7, 8, 9, 12, 19, 20, 30, 32, 33, 34, 40, 71, 74, 80, 90, 92, 999, 0, 536870911])
            .prop_map(|n| FieldIndex { kind: Some(Kind::Field(n)) }),
        2 => (0u64..6).prop_map(|i| FieldIndex { kind: Some(Kind::Index(i)) }),
        2 => prop::option::of(key).prop_map(|t| FieldIndex { kind: Some(Kind::MapKey(MapKey { r#type: t })) }),
        1 => Just(FieldIndex { kind: None }),
    ]
}

fn chunked_message() -> impl Strategy<Value = ChunkedMessage> {
    let leaf = prop::option::of(0u64..8).prop_map(|chunk_index| ChunkedMessage {
        chunk_index,
        chunked_fields: vec![],
    });
    leaf.prop_recursive(4, 32, 5, |inner| {
        (
            prop::option::of(0u64..8),
            prop::collection::vec(
                (
                    prop::collection::vec(field_index(), 0..6),
                    prop::option::of(inner),
                )
                    .prop_map(|(field_tag, message)| ChunkedField { field_tag, message }),
                0..5,
            ),
        )
            .prop_map(|(chunk_index, chunked_fields)| ChunkedMessage {
                chunk_index,
                chunked_fields,
            })
    })
}

fn chunk_content() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..40),
        Just(b"12".to_vec()),
        Just(b"true".to_vec()),
        Just(b"TEST_ENUM_ONE".to_vec()),
        Just(b"-1.5e3".to_vec()),
        Just(
            ManyFields {
                string_field: "x".into(),
                repeated_field: vec![ManyFields::default(); 2],
                nested_map_string: [("a".to_string(), ManyFields::default())].into(),
                packed_int32: vec![1, 2],
                ..Default::default()
            }
            .encode_to_vec()
        ),
    ]
}

//! Hash-valid `.cpb` files whose chunk metadata lies, written with our own records writer:
//! chunk positions that name no record, the middle of a chunk, a duplicate, records out of
//! order or past the metadata; sizes that differ from the records; unknown chunk types;
//! `ChunkInfo`s removed, repeated or swapped; records no chunk names; tree indices past the
//! chunk list. Every hash holds, so only the metadata checks can tell.
//!
//! The property: merging such a file either fails or gives back exactly the message that was
//! split, never a different one; and whenever the complete check (`check_chunks`, what
//! `verify` reports) finds a fault, the merge fails too.

mod common;

use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;
use prost::Message;
use unbound_chunked::{
    check_chunks, check_chunks_deferring, check_deferred, generic::split_generic, ChunkSink,
    ChunkedError, FileChunks, Merger,
};
use unbound_proto::tensorflow::proto_splitter::ChunkMetadata;
use unbound_proto::unbound::test::ManyFields;
use unbound_records::{Compression, RecordReader, RecordWriter, WriterOptions};
use unbound_wire::WireMessage;

const NAME: &str = "lying.cpb";

fn many_fields() -> prost_reflect::MessageDescriptor {
    unbound_proto::descriptor_pool()
        .get_message_by_name("unbound.test.ManyFields")
        .unwrap()
}

fn text(seed: u8, n: usize) -> String {
    (0..n)
        .map(|i| (b'a' + ((usize::from(seed) + i) % 26) as u8) as char)
        .collect()
}

/// The message split in every file, and its chunks and metadata (offsets to be filled in).
fn original() -> &'static (Vec<u8>, Vec<Bytes>, ChunkMetadata) {
    static ORIGINAL: std::sync::OnceLock<(Vec<u8>, Vec<Bytes>, ChunkMetadata)> =
        std::sync::OnceLock::new();
    ORIGINAL.get_or_init(|| {
        let leaf = |seed: u8, n: usize| ManyFields {
            string_field: text(seed, n),
            int64_field: i64::from(seed),
            ..Default::default()
        };
        let message = ManyFields {
            field_one: Some(Box::new(ManyFields {
                bytes_field: Bytes::from(vec![7u8; 300]),
                string_field: "one".into(),
                ..Default::default()
            })),
            // Equal-sized siblings, so that a chunk swapped for another of the same size is
            // among the lies.
            repeated_field: vec![leaf(1, 250), leaf(2, 250), leaf(3, 250), leaf(4, 90)],
            nested_map_string: [("k".to_string(), leaf(5, 260))].into(),
            repeated_bytes_field: vec![Bytes::from(vec![1u8; 240]), Bytes::from(vec![2u8; 240])],
            int32_field: 7,
            ..Default::default()
        };
        let encoded = message.encode_to_vec();
        let desc = many_fields();
        let mut wire =
            WireMessage::parse(&Bytes::from(encoded.clone()), Some(desc.clone())).expect("parses");
        let mut sink = ChunkSink::new(desc.clone(), true);
        split_generic(&mut wire, &desc, &mut sink.root(), 200).expect("splits");
        let split = sink.finish(wire);
        let (chunks, metadata) = common::chunks_and_metadata(split);
        assert!(chunks.len() >= 6, "{} chunks", chunks.len());
        (encoded, chunks, metadata)
    })
}

/// One lie told by the metadata (or the file) of a `.cpb`.
#[derive(Clone, Debug)]
enum Lie {
    /// A chunk's position moved by `delta` records (into the middle of a Riegeli chunk, onto
    /// another chunk's record, past the metadata, before the first record).
    Shift(usize, i64),
    /// A chunk's position set to anything.
    Position(usize, u64),
    /// A chunk's size changed by `delta`.
    Size(usize, i64),
    /// A chunk's type set to anything.
    Type(usize, i32),
    /// Two `ChunkInfo`s swapped.
    Swap(usize, usize),
    /// A `ChunkInfo` repeated right after itself.
    Duplicate(usize),
    /// A `ChunkInfo` removed.
    Remove(usize),
    /// An extra record (of `len` bytes) written before chunk `at`, named by no `ChunkInfo`.
    ExtraRecord(usize, usize),
    /// A chunk index in the tree past the chunk list.
    TreeIndexPast(usize, u64),
}

fn lie() -> impl Strategy<Value = Lie> {
    prop_oneof![
        4 => (any::<usize>(), -3i64..=3).prop_map(|(i, d)| Lie::Shift(i, d)),
        1 => (any::<usize>(), any::<u64>()).prop_map(|(i, p)| Lie::Position(i, p)),
        2 => (any::<usize>(), prop_oneof![-300i64..=300, Just(i64::MIN), Just(i64::MAX)])
            .prop_map(|(i, d)| Lie::Size(i, d)),
        1 => (any::<usize>(), -1i32..=4).prop_map(|(i, t)| Lie::Type(i, t)),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Lie::Swap(i, j)),
        1 => any::<usize>().prop_map(Lie::Duplicate),
        1 => any::<usize>().prop_map(Lie::Remove),
        1 => (any::<usize>(), 0usize..300).prop_map(|(i, n)| Lie::ExtraRecord(i, n)),
        1 => (any::<usize>(), 0u64..4).prop_map(|(i, d)| Lie::TreeIndexPast(i, d)),
    ]
}

/// Writes the original's chunks then its metadata, telling `lies`.
fn write(lies: &[Lie], compression: Compression, chunk_size: u64) -> Vec<u8> {
    let (_, chunks, metadata) = original();
    let mut metadata = metadata.clone();
    let options = WriterOptions {
        compression,
        chunk_size: Some(chunk_size),
        store_incompressible: false,
    };
    let mut w = RecordWriter::new(Vec::new(), options).unwrap();
    for (i, c) in chunks.iter().enumerate() {
        for l in lies {
            if let Lie::ExtraRecord(at, len) = l {
                if at % chunks.len() == i {
                    w.write_record(&vec![0x08; *len]).unwrap();
                }
            }
        }
        metadata.chunks[i].offset = w.write_record(c).unwrap();
    }
    for l in lies {
        let n = metadata.chunks.len();
        if n == 0 {
            break;
        }
        match *l {
            Lie::Shift(i, d) => {
                let info = &mut metadata.chunks[i % n];
                info.offset = info.offset.saturating_add_signed(d);
            }
            Lie::Position(i, p) => metadata.chunks[i % n].offset = p,
            Lie::Size(i, d) => {
                let info = &mut metadata.chunks[i % n];
                info.size = info.size.saturating_add_signed(d);
            }
            Lie::Type(i, t) => metadata.chunks[i % n].r#type = t,
            Lie::Swap(i, j) => metadata.chunks.swap(i % n, j % n),
            Lie::Duplicate(i) => {
                let info = metadata.chunks[i % n];
                metadata.chunks.insert(i % n, info);
            }
            Lie::Remove(i) => {
                metadata.chunks.remove(i % n);
            }
            Lie::ExtraRecord(..) => {}
            Lie::TreeIndexPast(i, d) => {
                let root = metadata.message.as_mut().unwrap();
                let fields = &mut root.chunked_fields;
                let index = n as u64 + d;
                if fields.is_empty() {
                    root.chunk_index = Some(index);
                } else {
                    let k = i % fields.len();
                    fields[k]
                        .message
                        .get_or_insert_with(Default::default)
                        .chunk_index = Some(index);
                }
            }
        }
    }
    w.write_record(&metadata.encode_to_vec()).unwrap();
    w.finish().unwrap()
}

/// Merges the file into a `ManyFields`, lazily or not, and serializes it.
fn merge(file: &[u8], lazy: bool) -> Result<Vec<u8>, ChunkedError> {
    let reader = RecordReader::from_bytes(Bytes::copy_from_slice(file), NAME)?;
    let (mut chunks, metadata) = FileChunks::from_reader(Arc::new(reader))?;
    chunks.set_lazy(lazy);
    let root = metadata.message.unwrap_or_default();
    Ok(Merger::new(&chunks)
        .merge(&many_fields(), &root)?
        .to_vec()?)
}

/// The file opened for sharing its message chunks ([`FileChunks::keep_decoded`]), when it
/// can be.
fn shared(file: &[u8], lazy: bool) -> Option<(FileChunks, ChunkMetadata)> {
    let reader = RecordReader::from_bytes(Bytes::copy_from_slice(file), NAME).ok()?;
    let (mut chunks, metadata) = FileChunks::from_reader(Arc::new(reader)).ok()?;
    chunks.set_lazy(lazy);
    let messages = chunks.message_chunks();
    chunks.keep_decoded(messages).then_some((chunks, metadata))
}

/// What reading `file` through a shared cache gives, checked against reading it without one:
/// the same check report, the same merge result (or error text) on two threads at once.
/// Returns whether the file could be shared.
fn same_with_sharing(file: &[u8], lazy: bool) -> bool {
    let Some((chunks, metadata)) = shared(file, lazy) else {
        return false;
    };
    let reader = RecordReader::from_bytes(Bytes::copy_from_slice(file), NAME).unwrap();
    let alone = check_chunks(&reader);
    let mut sharing = check_chunks_deferring(&chunks);
    check_deferred(&chunks, &mut sharing);
    assert_eq!(sharing.faults, alone.faults);
    assert_eq!(sharing.record_lengths, alone.record_lengths);
    let expected = merge(file, lazy).map_err(|e| e.to_string());
    let root = metadata.message.unwrap_or_default();
    let merged: Vec<Result<Vec<u8>, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    Merger::new(&chunks)
                        .merge(&many_fields(), &root)
                        .and_then(|m| Ok(m.to_vec()?))
                        .map_err(|e| e.to_string())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for m in merged {
        assert_eq!(m, expected);
    }
    true
}

#[test]
fn shared_chunks_are_decoded_once_for_check_and_merges() {
    for (compression, chunk_size) in LAYOUTS {
        let file = write(&[], compression, chunk_size);
        let (chunks, metadata) = shared(&file, true).expect("an honest file is shared");
        let cache = chunks.cache().unwrap();
        let kept: Vec<u64> = chunks
            .message_chunks()
            .into_iter()
            .filter(|&i| cache.is_cached(i))
            .collect();
        if chunk_size == 1 {
            // One record per Riegeli chunk: every message chunk is kept.
            assert_eq!(kept, chunks.message_chunks());
            assert!(kept.len() >= 4, "{kept:?}");
        }
        let mut checked = check_chunks_deferring(&chunks);
        check_deferred(&chunks, &mut checked);
        assert!(checked.faults.is_empty());
        assert_eq!(
            cache.decodes(),
            kept.len() as u64,
            "the check decodes each once"
        );
        let root = metadata.message.unwrap_or_default();
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    let m = Merger::new(&chunks).merge(&many_fields(), &root).unwrap();
                    assert_eq!(m.to_vec().unwrap(), original().0);
                });
            }
        });
        assert_eq!(
            cache.decodes(),
            kept.len() as u64,
            "{compression:?}: three merges after the check decoded a kept chunk again"
        );
        for index in kept {
            let bytes = cache.get(index).unwrap();
            assert_eq!(bytes, original().1[index as usize]);
        }
        assert!(same_with_sharing(&file, true) && same_with_sharing(&file, false));
    }
}

#[test]
fn damaged_chunks_give_the_same_faults_with_sharing() {
    let file = write(&[], Compression::Zstd { level: 1 }, 1);
    let mut shared_cases = 0;
    // One byte changed at a time, through the chunk data and headers.
    for at in (64..file.len()).step_by(7) {
        let mut damaged = file.clone();
        damaged[at] ^= 0x41;
        for lazy in [true, false] {
            shared_cases += usize::from(same_with_sharing(&damaged, lazy));
        }
    }
    assert!(
        shared_cases > 20,
        "only {shared_cases} damaged files could be shared"
    );
}

const LAYOUTS: [(Compression, u64); 4] = [
    (Compression::None, 1),
    (Compression::None, 1 << 12),
    (Compression::Zstd { level: 1 }, 1),
    (Compression::Zstd { level: 1 }, 1 << 12),
];

#[test]
fn honest_files_merge_back_and_check_clean() {
    for (compression, chunk_size) in LAYOUTS {
        let file = write(&[], compression, chunk_size);
        for lazy in [true, false] {
            assert_eq!(merge(&file, lazy).unwrap(), original().0);
        }
        let reader = RecordReader::from_bytes(Bytes::from(file), NAME).unwrap();
        let report = check_chunks(&reader);
        assert!(report.faults.is_empty(), "{:?}", report.faults);
        assert_eq!(report.metadata.unwrap().1.chunks.len(), original().1.len());
    }
}

/// The lies the campaign of issue 13 found merged into a different model, one by one.
#[test]
fn each_kind_of_lie_is_refused() {
    let (_, chunks, _) = original();
    let n = chunks.len();
    let last = format!("chunk {}:", n - 1);
    let cases: Vec<(Vec<Lie>, &str)> = vec![
        // Into padding, or onto the next chunk's record (which then repeats).
        (vec![Lie::Shift(1, 1)], "bad chunk metadata"),
        // Onto padding (one record per Riegeli chunk) or onto the record before.
        (vec![Lie::Shift(n - 1, -1)], &last),
        (vec![Lie::Size(2, 1)], "size"),
        (vec![Lie::Type(0, 3)], "invalid chunk type 3"),
        (vec![Lie::Swap(1, 2)], "is not after the previous chunk's"),
        (vec![Lie::Duplicate(3)], "is not after the previous chunk's"),
        (vec![Lie::Remove(n - 1)], "not named by any chunk"),
        (vec![Lie::ExtraRecord(2, 10)], "not named by any chunk"),
        (vec![Lie::TreeIndexPast(0, 0)], "out of range"),
        (
            vec![Lie::Position(0, 1 << 40)],
            "not before the metadata record",
        ),
    ];
    for (compression, chunk_size) in LAYOUTS {
        for (lies, needle) in &cases {
            let file = write(lies, compression, chunk_size);
            for lazy in [true, false] {
                match merge(&file, lazy) {
                    Err(e) => {
                        let text = e.to_string();
                        assert!(text.starts_with(NAME), "{lies:?}: {text}");
                        assert!(text.contains(needle), "{lies:?}: {text} lacks {needle:?}");
                    }
                    Ok(_) => panic!("{lies:?} ({compression:?}, {chunk_size}) merged"),
                }
            }
            let reader = RecordReader::from_bytes(Bytes::from(file), NAME).unwrap();
            let report = check_chunks(&reader);
            assert!(
                report.faults.iter().any(|f| f.to_string().contains(needle))
                    || (*needle == "bad chunk metadata" && !report.faults.is_empty()),
                "{lies:?}: {:?}",
                report.faults
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(300),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn lying_metadata_never_merges_into_another_message(
        lies in prop::collection::vec(lie(), 1..4),
        layout in 0usize..LAYOUTS.len(),
        lazy in any::<bool>(),
    ) {
        let (compression, chunk_size) = LAYOUTS[layout];
        let file = write(&lies, compression, chunk_size);
        let merged = merge(&file, lazy);
        if let Ok(bytes) = &merged {
            prop_assert!(bytes == &original().0, "{:?} merged into a different message", lies);
        }
        same_with_sharing(&file, lazy);
        let reader = RecordReader::from_bytes(Bytes::from(file), NAME).unwrap();
        let report = check_chunks(&reader);
        if !report.faults.is_empty() {
            prop_assert!(merged.is_err(), "{:?}: verify finds {:?} but it merged", lies, report.faults);
        }
    }
}

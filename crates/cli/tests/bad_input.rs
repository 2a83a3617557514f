//! Bad `.cpb` input, end to end through the `unbound` binary.
//!
//! Every fault is put into a SavedModel directory as its `saved_model.cpb` and given to
//! `unbound merge` and `unbound proto merge` (and `unbound inspect` where the fault is in what
//! inspect reads). Each must exit with code 1, name the file and the fault (and the position
//! where there is one), never panic, and leave neither its output nor a temporary file behind.

mod common;

use std::ffi::OsStr;
use std::path::Path;

use bytes::Bytes;
use common::highway::{chunk_header, rehash_chunk_header, signature};
use common::*;
use prost::Message;
use unbound_proto::tensorflow::proto_splitter::{
    field_index::{map_key::Type as K, Kind},
    ChunkMetadata, ChunkedField, ChunkedMessage, FieldIndex,
};
use unbound_proto::tensorflow::SavedModel;
use unbound_test_support::chunks::{
    chunked_field as cf, field_tag as f, index_tag as ix, map_key_tag as key,
};

/// What `unbound inspect` must do with a damaged file.
#[derive(Clone, Copy, PartialEq)]
enum Inspect {
    /// The fault is in what inspect reads: it fails like the merges.
    Fails,
    /// The fault is in chunk data: inspect prints its report with the fault listed (text:
    /// a `FILE: FAULT` line; JSON: the `faults` list) and exits 1, or (when the damaged
    /// Riegeli chunk also holds the metadata) fails like the merges.
    Flags,
    /// The fault is in chunk contents or in how the metadata fits the schema, which inspect
    /// does not look at: it may succeed, or fail cleanly naming the file.
    MayPass,
}

/// One damaged file and what the errors must say about it.
struct Fault {
    name: String,
    bytes: Vec<u8>,
    /// Substrings every failing command's stderr must contain (besides the file name).
    expect: Vec<String>,
    inspect: Inspect,
}

fn fault(name: impl Into<String>, bytes: Vec<u8>, expect: &[&str], inspect: Inspect) -> Fault {
    Fault {
        name: name.into(),
        bytes,
        expect: expect.iter().map(|s| s.to_string()).collect(),
        inspect,
    }
}

/// Runs merge, proto merge and inspect on the fault and checks each outcome.
fn check(f: &Fault) {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("model");
    fixture("none").write_dir(&model, &f.bytes);
    let cpb = model.join("saved_model.cpb");
    let out_root = tmp.path().join("out");
    std::fs::create_dir(&out_root).unwrap();
    let cpb_name = cpb.display().to_string();
    let mut needles: Vec<&str> = vec![&cpb_name];
    needles.extend(f.expect.iter().map(String::as_str));

    let merged = out_root.join("merged");
    let out = unbound([OsStr::new("merge"), model.as_os_str(), merged.as_os_str()]);
    if std::env::var_os("UNBOUND_TEST_SHOW_ERRORS").is_some() {
        eprintln!(
            "{}: {}",
            f.name,
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    assert_clean_failure(&out, &needles, &format!("{}: merge", f.name));
    assert_left_nothing(&out_root, &format!("{}: merge", f.name));

    let prefix = model.join("saved_model");
    let pb = out_root.join("model.pb");
    let out = unbound([
        OsStr::new("proto"),
        OsStr::new("merge"),
        OsStr::new("--type"),
        OsStr::new("tensorflow.SavedModel"),
        prefix.as_os_str(),
        pb.as_os_str(),
    ]);
    assert_clean_failure(&out, &needles, &format!("{}: proto merge", f.name));
    assert_left_nothing(&out_root, &format!("{}: proto merge", f.name));

    let out = unbound([OsStr::new("inspect"), cpb.as_os_str()]);
    let what = format!("{}: inspect", f.name);
    match f.inspect {
        Inspect::Fails => assert_clean_failure(&out, &needles, &what),
        Inspect::Flags if out.stdout.is_empty() => assert_clean_failure(&out, &needles, &what),
        Inspect::Flags => {
            assert_clean_failure(&out, &[&cpb_name, "corrupt"], &what);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                stdout
                    .lines()
                    .any(|l| needles.iter().all(|needle| l.contains(needle))),
                "{what}: no fault line with all of {needles:?}\n{}",
                describe(&out)
            );
        }
        Inspect::MayPass => {
            if !out.status.success() {
                assert_clean_failure(&out, &[&cpb_name], &what);
            }
        }
    }
    let out = unbound([OsStr::new("inspect"), OsStr::new("--json"), cpb.as_os_str()]);
    let what = format!("{}: inspect --json", f.name);
    match f.inspect {
        Inspect::Fails => assert_clean_failure(&out, &needles, &what),
        Inspect::Flags if out.stdout.is_empty() => assert_clean_failure(&out, &needles, &what),
        Inspect::Flags => {
            assert_clean_failure(&out, &[&cpb_name, "corrupt"], &what);
            let json: serde_json::Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{what}: not JSON: {e}\n{}", describe(&out)));
            let faults = json["faults"].as_array().expect("a faults list");
            for needle in needles.iter().skip(1) {
                assert!(
                    faults
                        .iter()
                        .any(|f| f.as_str().is_some_and(|f| f.contains(needle))),
                    "{what}: no fault with {needle:?}\n{}",
                    describe(&out)
                );
            }
        }
        Inspect::MayPass => {
            if !out.status.success() {
                assert_clean_failure(&out, &[&cpb_name], &what);
            }
        }
    }
    // The damaged input itself is left alone.
    assert_eq!(
        std::fs::read(&cpb).unwrap(),
        f.bytes,
        "{}: input modified",
        f.name
    );
}

fn assert_left_nothing(out_root: &Path, what: &str) {
    let left = entries(out_root);
    assert!(
        left.is_empty(),
        "{what}: left {left:?} beside the output (neither the output nor temporary files may remain)"
    );
}

fn flip(bytes: &[u8], at: usize) -> Vec<u8> {
    let mut b = bytes.to_vec();
    b[at] ^= 0x5a;
    b
}

/// Begin offsets of the fixture's chunks (the signature at 0 excluded) and the file size.
fn chunk_begins(file: &[u8]) -> Vec<u64> {
    let reader =
        unbound_records::RecordReader::from_bytes(Bytes::from(file.to_vec()), "x").unwrap();
    reader
        .chunks()
        .map(|c| c.unwrap().begin)
        .filter(|b| *b != 0)
        .collect()
}

/// The fixture's chunks and metadata rewritten, with `edit` applied to the metadata.
fn with_metadata(edit: impl FnOnce(&mut ChunkMetadata)) -> Vec<u8> {
    let fx = fixture("none");
    write_cpb(&fx.chunks, fx.metadata.clone(), edit)
}

/// Index of the first BYTES chunk and of the first MESSAGE chunk after the root.
fn bytes_and_message_chunks() -> (u64, u64) {
    let md = &fixture("none").metadata;
    let bytes = md.chunks.iter().position(|c| c.r#type == 2).unwrap() as u64;
    let message = md
        .chunks
        .iter()
        .skip(1)
        .position(|c| c.r#type == 1)
        .unwrap() as u64
        + 1;
    (bytes, message)
}

#[test]
fn test_hash_matches_real_files() {
    // The hand-made headers below rely on the test's own HighwayHash.
    let fx = fixture("none");
    assert_eq!(signature(), fx.cpb[..64].to_vec());
    for begin in chunk_begins(&fx.cpb) {
        let begin = begin as usize;
        let mut copy = fx.cpb.clone();
        copy[begin..begin + 8].fill(0);
        rehash_chunk_header(&mut copy, begin);
        assert_eq!(copy, fx.cpb, "chunk header at {begin}");
    }
    let last = *chunk_begins(&fx.cpb).last().unwrap() as usize;
    let size = u64::from_le_bytes(fx.cpb[last + 8..last + 16].try_into().unwrap()) as usize;
    let data = &fx.cpb[last + 40..last + 40 + size];
    let stored = u64::from_le_bytes(fx.cpb[last + 16..last + 24].try_into().unwrap());
    assert_eq!(
        common::highway::hh(data),
        stored,
        "data hash of the last chunk"
    );
}

#[test]
fn the_undamaged_fixture_merges() {
    // The control for every test below: the same commands succeed on the intact file.
    let fx = fixture("none");
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("model");
    fx.write_dir(&model, &fx.cpb);
    let merged = tmp.path().join("merged");
    let out = unbound([OsStr::new("merge"), model.as_os_str(), merged.as_os_str()]);
    assert!(out.status.success(), "{}", describe(&out));
    let got = SavedModel::decode(
        std::fs::read(merged.join("saved_model.pb"))
            .unwrap()
            .as_slice(),
    )
    .unwrap();
    assert_eq!(got, SavedModel::decode(fx.original_pb.as_slice()).unwrap());

    let pb = tmp.path().join("model.pb");
    let out = unbound([
        OsStr::new("proto"),
        OsStr::new("merge"),
        OsStr::new("--type"),
        OsStr::new("tensorflow.SavedModel"),
        model.join("saved_model").as_os_str(),
        pb.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        std::fs::read(&pb).unwrap(),
        std::fs::read(merged.join("saved_model.pb")).unwrap()
    );

    let out = unbound([
        OsStr::new("inspect"),
        model.join("saved_model.cpb").as_os_str(),
    ]);
    assert!(out.status.success(), "{}", describe(&out));

    // Rewriting the fixture's records with the test writer gives a file that merges too, so
    // the metadata faults below fail because of the fault alone.
    std::fs::write(model.join("saved_model.cpb"), with_metadata(|_| {})).unwrap();
    let merged2 = tmp.path().join("merged2");
    let out = unbound([OsStr::new("merge"), model.as_os_str(), merged2.as_os_str()]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        std::fs::read(merged2.join("saved_model.pb")).unwrap(),
        std::fs::read(merged.join("saved_model.pb")).unwrap()
    );
}

#[test]
fn not_riegeli_and_empty() {
    let fx = fixture("none");
    let cases = vec![
        fault("empty file", Vec::new(), &["empty"], Inspect::Fails),
        fault(
            "text file",
            b"saved_model {\n  meta_graphs { }\n}\n".repeat(10),
            &["not a Riegeli file"],
            Inspect::Fails,
        ),
        fault(
            "a binary .pb renamed .cpb",
            fx.original_pb.clone(),
            &["not a Riegeli file"],
            Inspect::Fails,
        ),
        fault(
            "zeros",
            vec![0; 100_000],
            &["not a Riegeli file"],
            Inspect::Fails,
        ),
        fault("one byte", vec![0x83], &["truncated"], Inspect::Fails),
        fault(
            "signature only",
            signature(),
            &["no records"],
            Inspect::Fails,
        ),
    ];
    for c in &cases {
        check(c);
    }
}

#[test]
fn truncated() {
    let fx = fixture("none");
    let file = &fx.cpb;
    let begins = chunk_begins(file);
    let last = *begins.last().unwrap() as usize;
    let mut cuts: Vec<(usize, &[&str])> = vec![
        (10, &["truncated", "64-byte signature"]),
        (63, &["truncated", "64-byte signature"]),
        (64, &["no records"]),
        (64 + 20, &["truncated"]),
        (64 + 40 + 100, &["truncated"]),
        (65_536 + 10, &["truncated"]),
        (200_000, &["truncated"]),
        (last + 20, &["truncated"]),
        (last + 60, &["truncated"]),
        (file.len() - 1, &["truncated"]),
    ];
    // A cut at a chunk boundary leaves a valid Riegeli file whose last record is a tensor, not
    // the metadata.
    cuts.push((last, &["not a ChunkMetadata"]));
    for (cut, expect) in cuts {
        let inspect = Inspect::Fails;
        check(&fault(
            format!("truncated to {cut} bytes"),
            file[..cut].to_vec(),
            expect,
            inspect,
        ));
    }
}

#[test]
fn flipped_header_and_data_bytes() {
    for compression in ["none", "brotli"] {
        let fx = fixture(compression);
        let file = &fx.cpb;
        let begins = chunk_begins(file);
        let mut cases = Vec::new();
        // The block header at 0 is part of the signature.
        cases.push(fault(
            format!("{compression}: flip in the first block header"),
            flip(file, 5),
            &["not a Riegeli file"],
            Inspect::Fails,
        ));
        // Block headers inside the file.
        let mut block = 65_536;
        while block + 24 < file.len() {
            for at in [block, block + 9, block + 23] {
                // Inspect walks chunk headers and need not cross this block header.
                cases.push(fault(
                    format!("{compression}: flip at {at} in a block header"),
                    flip(file, at),
                    &["block header", &format!("offset {block}")],
                    Inspect::MayPass,
                ));
            }
            block += 65_536;
        }
        // Chunk headers: the root chunk, a middle chunk, the metadata chunk.
        for &begin in [begins[0], begins[begins.len() / 2], *begins.last().unwrap()].iter() {
            for d in [0, 8, 16, 24, 25, 32, 39] {
                let at = begin as usize + d;
                if at % 65_536 < 24 {
                    continue;
                }
                cases.push(fault(
                    format!("{compression}: flip at {at} in the chunk header at {begin}"),
                    flip(file, at),
                    &["chunk header", &format!("offset {begin}")],
                    Inspect::Fails,
                ));
            }
        }
        // Chunk data: of the root message chunk and of the metadata chunk (both always read by
        // a merge; inspect reads the metadata only).
        let root = begins[0] as usize;
        cases.push(fault(
            format!("{compression}: flip in the root chunk's data"),
            flip(file, root + 40 + 3),
            &["chunk data hash mismatch", &format!("offset {root}")],
            Inspect::Flags,
        ));
        let meta = *begins.last().unwrap() as usize;
        cases.push(fault(
            format!("{compression}: flip in the metadata chunk's data"),
            flip(file, file.len() - 2),
            &["chunk data hash mismatch", &format!("offset {meta}")],
            Inspect::Fails,
        ));
        for c in &cases {
            check(c);
        }
    }
}

#[test]
fn metadata_chunk_index_out_of_range() {
    let n = fixture("none").chunks.len();
    check(&fault(
        "root chunk index out of range",
        with_metadata(|m| m.message.as_mut().unwrap().chunk_index = Some(99)),
        &["chunk index 99 is out of range", &format!("{n} chunks")],
        Inspect::MayPass,
    ));
    check(&fault(
        "chunked field's chunk index out of range",
        with_metadata(|m| {
            let root = m.message.as_mut().unwrap();
            root.chunked_fields[1].message.as_mut().unwrap().chunk_index = Some(u64::MAX);
        }),
        &[&format!("chunk index {} is out of range", u64::MAX)],
        Inspect::MayPass,
    ));
    // Fewer ChunkInfos than the metadata refers to.
    check(&fault(
        "ChunkInfo list shorter than the chunks used",
        with_metadata(|m| m.chunks.truncate(1)),
        &["out of range for 1 chunks"],
        Inspect::MayPass,
    ));
}

#[test]
fn metadata_position_past_the_end() {
    let (bytes_chunk, message_chunk) = bytes_and_message_chunks();
    for (label, index) in [
        ("BYTES", bytes_chunk),
        ("MESSAGE", message_chunk),
        ("root", 0),
    ] {
        for pos in [1u64 << 40, u64::MAX] {
            check(&fault(
                format!("{label} chunk's ChunkInfo position {pos}"),
                with_metadata(|m| m.chunks[index as usize].offset = pos),
                &[
                    &format!("record position {pos}"),
                    "not before the metadata record",
                ],
                Inspect::MayPass,
            ));
        }
    }
    // A position that is inside the file but after the last record (the metadata's own
    // position + 1).
    let file = with_metadata(|_| {});
    let begins = chunk_begins(&file);
    let meta_pos = *begins.last().unwrap();
    check(&fault(
        "ChunkInfo position after the last record",
        with_metadata(|m| m.chunks[bytes_chunk as usize].offset = meta_pos + 1),
        &[
            &format!("record position {}", meta_pos + 1),
            "not before the metadata record",
        ],
        Inspect::MayPass,
    ));
}

/// The rewritten fixture with the header of chunk `victim` (counting the metadata chunk as the
/// last) edited by `edit`, its header hash recomputed so the edit is believed. Returns the file
/// and where that chunk begins.
fn with_header_edit(victim: usize, edit: impl Fn(&mut [u8; 40])) -> (Vec<u8>, u64) {
    let file = with_metadata(|_| {});
    let begin = chunk_begins(&file)[victim] as usize;
    let mut file = file;
    let mut header: [u8; 40] = file[begin..begin + 40].try_into().unwrap();
    edit(&mut header);
    file[begin..begin + 40].copy_from_slice(&header);
    rehash_chunk_header(&mut file, begin);
    (file, begin as u64)
}

#[test]
fn sizes_claiming_terabytes() {
    const TB4: u64 = 4 << 40;
    let n = fixture("none").chunks.len();
    // The chunk header's stored data size, for the root chunk and for the metadata chunk.
    for victim in [0, n] {
        let (file, begin) =
            with_header_edit(victim, |h| h[8..16].copy_from_slice(&TB4.to_le_bytes()));
        check(&fault(
            format!("chunk {victim}'s data size claims 4 TiB"),
            file,
            &[&format!("{TB4}")],
            Inspect::Fails,
        ));
        let _ = begin;
    }
    // The decoded size: the sum of the record sizes must match it.
    for victim in [0, n] {
        let (file, begin) =
            with_header_edit(victim, |h| h[32..40].copy_from_slice(&TB4.to_le_bytes()));
        check(&fault(
            format!("chunk {victim}'s decoded size claims 4 TiB"),
            file,
            &[&format!("offset {begin}")],
            if victim == n {
                Inspect::Fails
            } else {
                Inspect::MayPass
            },
        ));
    }
    // The record count: 2^50 records in a chunk of a few bytes.
    for victim in [0, n] {
        let (file, begin) = with_header_edit(victim, |h| {
            let t = u64::from_le_bytes(h[24..32].try_into().unwrap());
            h[24..32].copy_from_slice(&((t & 0xff) | (1u64 << 50) << 8).to_le_bytes());
        });
        check(&fault(
            format!("chunk {victim} claims 2^50 records"),
            file,
            &[
                &format!("chunk at {begin}"),
                &format!("{} records", 1u64 << 50),
            ],
            Inspect::Fails,
        ));
    }
    // A hand-made file: the signature, then one chunk whose header claims 4 TiB of data.
    let mut file = signature();
    file.extend_from_slice(&chunk_header(b"tiny", b'r', 1, 4, Some(TB4)));
    file.extend_from_slice(b"tiny");
    check(&fault(
        "hand-made chunk of 4 TiB",
        file,
        &["64", &format!("{TB4}")],
        Inspect::Fails,
    ));
    // A protobuf length inside the metadata claiming 4 TiB.
    let mut meta = fixture("none").metadata.encode_to_vec();
    meta.extend_from_slice(&[0x1a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]);
    let chunks: Vec<&[u8]> = fixture("none")
        .chunks
        .iter()
        .map(|c| &c[..])
        .chain([&meta[..]])
        .collect();
    let (file, _) = write_records(&chunks);
    check(&fault(
        "metadata field length of 4 TiB",
        file,
        &["not a ChunkMetadata"],
        Inspect::Fails,
    ));
    // A length inside the root chunk claiming 4 TiB.
    let mut root = fixture("none").chunks[0].to_vec();
    root.extend_from_slice(&[0x12, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]);
    let mut chunks = fixture("none").chunks.clone();
    let root_len = root.len() as u64;
    chunks[0] = Bytes::from(root);
    // The metadata states the chunk's true size: only the length inside it lies.
    let file = write_cpb(&chunks, fixture("none").metadata.clone(), |m| {
        m.chunks[0].size = root_len
    });
    check(&fault(
        "root chunk field length of 4 TiB",
        file,
        &["chunk 0", "malformed protobuf"],
        Inspect::MayPass,
    ));
}

/// Appends a varint.
fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_len(v: u64) -> u64 {
    let mut b = Vec::new();
    varint(v, &mut b);
    b.len() as u64
}

/// A `ChunkedMessage` nested `depth` levels deep (each level a chunked field with tag `tag`
/// holding the next level), encoded by hand without recursion.
fn nested_chunked_message(depth: usize, tag: &[FieldIndex]) -> Vec<u8> {
    let tag_bytes: Vec<u8> = tag
        .iter()
        .flat_map(|t| {
            let mut b = vec![0x0a];
            let e = t.encode_to_vec();
            varint(e.len() as u64, &mut b);
            b.extend_from_slice(&e);
            b
        })
        .collect();
    let innermost = ChunkedMessage {
        chunk_index: Some(0),
        chunked_fields: vec![],
    }
    .encode_to_vec();
    // Sizes from the inside out: cm[k] is the size of level k's ChunkedMessage.
    let mut cm_len = vec![innermost.len() as u64];
    let mut cf_len = vec![0u64];
    for k in 1..=depth {
        let inner = cm_len[k - 1];
        let field = tag_bytes.len() as u64 + 1 + varint_len(inner) + inner;
        cf_len.push(field);
        cm_len.push(1 + varint_len(field) + field);
    }
    let mut out = Vec::with_capacity(cm_len[depth] as usize);
    for k in (1..=depth).rev() {
        out.push(0x12); // ChunkedMessage.chunked_fields
        varint(cf_len[k], &mut out);
        out.extend_from_slice(&tag_bytes);
        out.push(0x1a); // ChunkedField.message
        varint(cm_len[k - 1], &mut out);
    }
    out.extend_from_slice(&innermost);
    assert_eq!(out.len() as u64, cm_len[depth]);
    out
}

/// The tag path to `meta_graphs[0].graph_def.node[0].attr["a"]` followed by `repeat` times
/// `.func.attr["a"]` (AttrValue → NameAttrList → AttrValue ...), a path as deep as one likes.
fn deep_attr_path(repeat: usize) -> Vec<FieldIndex> {
    let mut tags = vec![f(2), ix(0), f(2), f(1), ix(0), f(5), key(K::S("a".into()))];
    for _ in 0..repeat {
        tags.extend([f(10), f(2), key(K::S("a".into()))]);
    }
    tags
}

#[test]
fn absurdly_deep_nesting() {
    // ChunkedMessages nested 100 000 deep: more than any protobuf parser accepts.
    let deep = nested_chunked_message(100_000, &[f(1)]);
    let mut meta = ChunkMetadata {
        message: None,
        ..fixture("none").metadata.clone()
    }
    .encode_to_vec();
    meta.push(0x1a);
    varint(deep.len() as u64, &mut meta);
    meta.extend_from_slice(&deep);
    let chunks: Vec<&[u8]> = fixture("none")
        .chunks
        .iter()
        .map(|c| &c[..])
        .chain([&meta[..]])
        .collect();
    let (file, positions) = write_records(&chunks);
    let meta_pos = positions.last().unwrap().to_string();
    check(&fault(
        "ChunkedMessage nested 100000 deep",
        file,
        &["not a ChunkMetadata", &meta_pos, "recursion limit"],
        Inspect::Fails,
    ));

    // One field tag path 100 000 steps deep.
    check(&fault(
        "field tag path of 100000 steps",
        with_metadata(|m| {
            m.message
                .as_mut()
                .unwrap()
                .chunked_fields
                .push(cf(deep_attr_path(33_333), Some(1)));
        }),
        &["nesting deeper than"],
        Inspect::MayPass,
    ));

    // ChunkedMessages nested only 45 deep (fine for a protobuf parser) whose tag paths add up
    // to a message nested far deeper than the Merger builds.
    let nested = nested_chunked_message(45, &[f(10), f(2), key(K::S("a".into()))]);
    let mut meta = fixture("none").metadata.clone();
    meta.message
        .as_mut()
        .unwrap()
        .chunked_fields
        .push(ChunkedField {
            field_tag: deep_attr_path(0),
            message: Some(ChunkedMessage::decode(nested.as_slice()).unwrap()),
        });
    let file = write_cpb(&fixture("none").chunks, meta, |_| {});
    check(&fault(
        "45 nested ChunkedMessages",
        file,
        &["nesting deeper than"],
        Inspect::MayPass,
    ));
}

#[test]
fn field_tags_that_do_not_fit_the_schema() {
    let (bytes_chunk, message_chunk) = bytes_and_message_chunks();
    let cases: Vec<(&str, Vec<FieldIndex>, u64, Vec<&str>)> = vec![
        (
            "unknown field number",
            vec![f(2), ix(0), f(999)],
            message_chunk,
            vec!["field number 999 not found", "tensorflow.MetaGraphDef"],
        ),
        (
            "unknown top-level field",
            vec![f(77)],
            message_chunk,
            vec!["field number 77 not found"],
        ),
        (
            "field number 0",
            vec![f(0)],
            message_chunk,
            vec!["field number 0 not found"],
        ),
        (
            "index on a singular field",
            vec![f(2), ix(0), f(3), ix(3)],
            message_chunk,
            vec!["saver_def", "not repeated"],
        ),
        (
            "map key on a repeated field",
            vec![f(2), ix(0), f(6), key(K::S("x".into()))],
            message_chunk,
            vec!["asset_file_def"],
        ),
        (
            "map field without a key",
            vec![f(2), ix(0), f(5)],
            message_chunk,
            vec!["signature_def", "map key"],
        ),
        (
            "text map key for a uint32 key",
            // meta_graphs[0].graph_def.library.function[0].arg_attr["not a number"]
            vec![
                f(2),
                ix(0),
                f(2),
                f(2),
                f(1),
                ix(0),
                f(7),
                key(K::S("not a number".into())),
            ],
            message_chunk,
            vec!["arg_attr", "not a number"],
        ),
        (
            "repeated field without index in the middle",
            vec![f(2), ix(0), f(6), f(1)],
            message_chunk,
            vec!["asset_file_def", "needs an index"],
        ),
        (
            "field inside a scalar",
            vec![f(1), f(3)],
            message_chunk,
            vec!["saved_model_schema_version", "cannot hold more fields"],
        ),
        (
            "index first",
            vec![ix(0)],
            message_chunk,
            vec!["index does not follow a field"],
        ),
        (
            "map key first",
            vec![key(K::I32(1))],
            message_chunk,
            vec!["map key does not follow a field"],
        ),
        (
            "tag with no kind",
            vec![f(2), FieldIndex { kind: None }],
            message_chunk,
            vec!["no kind"],
        ),
        (
            "tensor bytes as a text int64",
            vec![f(1)],
            bytes_chunk,
            vec![
                "saved_model_schema_version",
                "chunk",
                "not a valid UTF-8 text",
            ],
        ),
        (
            "tensor bytes as a message",
            vec![f(2), ix(0), f(1)],
            bytes_chunk,
            vec!["malformed protobuf"],
        ),
    ];
    for (name, tags, chunk, expect) in cases {
        // A tag that does not start with a field is given alone: next to the fixture's own
        // fields it would be reported as a tag-kind mismatch first.
        let alone = !matches!(tags[0].kind, Some(Kind::Field(_))) || tags.len() == 2;
        check(&fault(
            format!("field tag: {name}"),
            with_metadata(|m| {
                let fields = &mut m.message.as_mut().unwrap().chunked_fields;
                if alone {
                    fields.clear();
                }
                fields.push(cf(tags, Some(chunk)))
            }),
            &expect,
            Inspect::MayPass,
        ));
    }
    // Text that is not a number for a numeric field.
    let fx = fixture("none");
    let mut chunks = fx.chunks.clone();
    chunks.push(Bytes::from_static(b"twelve"));
    let mut metadata = fx.metadata.clone();
    metadata
        .chunks
        .push(unbound_proto::tensorflow::proto_splitter::ChunkInfo {
            r#type: 2,
            size: 6,
            offset: 0,
        });
    let text_chunk = chunks.len() as u64 - 1;
    metadata
        .message
        .as_mut()
        .unwrap()
        .chunked_fields
        .push(cf(vec![f(1)], Some(text_chunk)));
    check(&fault(
        "field tag: text that is not an int64",
        write_cpb(&chunks, metadata, |_| {}),
        &[
            &format!(
                "chunk {text_chunk} for field tensorflow.SavedModel.saved_model_schema_version"
            ),
            "int64",
            "twelve",
        ],
        Inspect::MayPass,
    ));
    // Neighbouring tags of different kinds at one depth (TensorFlow's "Field tag mismatch").
    check(&fault(
        "field tag kind mismatch",
        with_metadata(|m| {
            let root = m.message.as_mut().unwrap();
            root.chunked_fields
                .push(cf(vec![f(2), ix(0), f(4), f(1)], Some(message_chunk)));
            root.chunked_fields.push(cf(
                vec![f(2), ix(0), f(4), key(K::S("k".into()))],
                Some(message_chunk),
            ));
        }),
        &["mismatch"],
        Inspect::MayPass,
    ));
}

#[test]
fn chunk_contents_of_the_wrong_kind() {
    let (bytes_chunk, _) = bytes_and_message_chunks();
    // The root names a BYTES chunk of float data: not a SavedModel.
    check(&fault(
        "root is a BYTES chunk",
        with_metadata(|m| m.message.as_mut().unwrap().chunk_index = Some(bytes_chunk)),
        &[&format!("chunk {bytes_chunk}"), "malformed protobuf"],
        Inspect::MayPass,
    ));
    // A metadata record that is not a ChunkMetadata at all.
    let chunks: Vec<&[u8]> = fixture("none")
        .chunks
        .iter()
        .map(|c| &c[..])
        .chain([&b"\xff\xff\xff"[..]])
        .collect();
    let (file, _) = write_records(&chunks);
    check(&fault(
        "metadata record is garbage",
        file,
        &["not a ChunkMetadata"],
        Inspect::Fails,
    ));
}

/// Reads a varint at `at`: (value, length).
fn read_varint(data: &[u8], at: usize) -> (u64, usize) {
    let mut v = 0u64;
    for (i, b) in data[at..].iter().enumerate().take(10) {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return (v, i + 1);
        }
    }
    panic!("bad varint at {at}");
}

/// The fixture's records written with `compression` one chunk per record, with the data of
/// the last chunk (the metadata) replaced by `edit` of it and its header rebuilt with valid
/// hashes. Returns the file and where the last chunk begins.
fn with_last_chunk_data(
    compression: unbound_records::Compression,
    edit: impl Fn(&[u8]) -> Vec<u8>,
) -> (Vec<u8>, u64) {
    let fx = fixture("none");
    let options = unbound_records::WriterOptions {
        compression,
        chunk_size: Some(1),
        store_incompressible: false,
    };
    let mut w = unbound_records::RecordWriter::new(Vec::new(), options).unwrap();
    let mut metadata = fx.metadata.clone();
    for (i, c) in fx.chunks.iter().enumerate() {
        metadata.chunks[i].offset = w.write_record(c).unwrap();
    }
    w.write_record(&metadata.encode_to_vec()).unwrap();
    let mut file = w.finish().unwrap();
    let begin = *chunk_begins(&file).last().unwrap() as usize;
    let header = &file[begin..begin + 40];
    let size = u64::from_le_bytes(header[8..16].try_into().unwrap()) as usize;
    let type_and_count = u64::from_le_bytes(header[24..32].try_into().unwrap());
    let decoded = u64::from_le_bytes(header[32..40].try_into().unwrap());
    assert_eq!(
        file.len(),
        begin + 40 + size,
        "the metadata chunk ends the file"
    );
    let data = edit(&file[begin + 40..]);
    assert!(
        begin % 65_536 + 40 + data.len() < 65_536,
        "the edited chunk stays inside its block"
    );
    file.truncate(begin);
    file.extend_from_slice(&chunk_header(
        &data,
        type_and_count as u8,
        type_and_count >> 8,
        decoded,
        None,
    ));
    file.extend_from_slice(&data);
    (file, begin as u64)
}

#[test]
fn compressed_buffers_claiming_terabytes() {
    use unbound_records::Compression;
    const TB4: u64 = 4 << 40;
    for compression in [
        Compression::Brotli { level: 6 },
        Compression::Zstd { level: 3 },
        Compression::Snappy,
    ] {
        // The values buffer's decompressed-size prefix.
        let (file, begin) = with_last_chunk_data(compression, |data| {
            let (sizes_len, n) = read_varint(data, 1);
            let values = 1 + n + sizes_len as usize;
            let (_, m) = read_varint(data, values);
            let mut out = data[..values].to_vec();
            varint(TB4, &mut out);
            out.extend_from_slice(&data[values + m..]);
            out
        });
        check(&fault(
            format!("{compression:?}: values buffer claims 4 TiB"),
            file,
            &[&format!("offset {begin}")],
            Inspect::Fails,
        ));
        // The sizes buffer's decompressed-size prefix.
        let (file, begin) = with_last_chunk_data(compression, |data| {
            let (sizes_len, n) = read_varint(data, 1);
            let sizes = &data[1 + n..1 + n + sizes_len as usize];
            let (_, m) = read_varint(sizes, 0);
            let mut new_sizes = Vec::new();
            varint(TB4, &mut new_sizes);
            new_sizes.extend_from_slice(&sizes[m..]);
            let mut out = vec![data[0]];
            varint(new_sizes.len() as u64, &mut out);
            out.extend_from_slice(&new_sizes);
            out.extend_from_slice(&data[1 + n + sizes_len as usize..]);
            out
        });
        check(&fault(
            format!("{compression:?}: sizes buffer claims 4 TiB"),
            file,
            &[&format!("offset {begin}")],
            Inspect::Fails,
        ));
        // The chunk's decoded size, with the compressed data intact (which alone is valid).
        let (file, begin) = with_last_chunk_data(compression, |data| data.to_vec());
        let tmp = tempfile::tempdir().unwrap();
        let control = tmp.path().join("control.cpb");
        std::fs::write(&control, &file).unwrap();
        let out = unbound([OsStr::new("inspect"), control.as_os_str()]);
        assert!(out.status.success(), "{}", describe(&out));
        let mut file = file;
        let at = begin as usize;
        file[at + 32..at + 40].copy_from_slice(&TB4.to_le_bytes());
        rehash_chunk_header(&mut file, at);
        check(&fault(
            format!("{compression:?}: decoded size claims 4 TiB"),
            file,
            &[&format!("offset {begin}")],
            Inspect::Fails,
        ));
    }
}

/// Runs `unbound args...` under a 2 GB address-space limit, killing it after 60 s.
fn unbound_limited(args: &[&OsStr]) -> std::process::Output {
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 2000000; exec \"$0\" \"$@\"")
        .arg(bin())
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn huge_repeated_index_is_refused_not_allocated() {
    // meta_graphs[2^40]: the Merger would create 2^40 empty MetaGraphDefs. The index must be
    // refused (it is far beyond anything the file can describe), within a small memory limit.
    let index = 1u64 << 40;
    let file = with_metadata(|m| {
        m.message
            .as_mut()
            .unwrap()
            .chunked_fields
            .push(cf(vec![f(2), ix(index)], None));
    });
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("model");
    fixture("none").write_dir(&model, &file);
    let out_root = tmp.path().join("out");
    std::fs::create_dir(&out_root).unwrap();
    let merged = out_root.join("merged");
    let out = unbound_limited(&[OsStr::new("merge"), model.as_os_str(), merged.as_os_str()]);
    assert_clean_failure(
        &out,
        &[
            &model.join("saved_model.cpb").display().to_string(),
            &index.to_string(),
        ],
        "repeated index 2^40",
    );
    assert_left_nothing(&out_root, "repeated index 2^40");
}

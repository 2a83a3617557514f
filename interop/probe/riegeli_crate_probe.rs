//! riegeli_crate_probe: writes TensorFlow proto-splitter `.cpb` files with the
//! crates.io `riegeli` crate (0.2.1; an implementation independent of both
//! TensorFlow and unbound) under many Riegeli writer options, each next to
//! the expected merged message as `<case>.expected.pb`, so that TensorFlow's
//! own Merger can be asked which of them it reads (interop/check_cpb.sh).
//!
//! Not part of the workspace. To run it (see interop/README.md):
//!   cargo new --name rg /tmp/rg && cp interop/probe/riegeli_crate_probe.rs /tmp/rg/src/main.rs
//!   cd /tmp/rg && cargo add riegeli@=0.2.1 --features zstd,brotli,snappy && cargo add prost@0.13
//!   cargo run --release -- OUTDIR            # the compression/layout matrix
//!   cargo run --release -- big OUTDIR MB [none,brotli,zstd,snappy]   # timing
//!   cargo run --release -- meta FILE.cpb OUT.pb                       # dump ChunkMetadata
use prost::Message;
use riegeli::{CompressionType, ReaderOptions, RecordReader, RecordWriter, WriterOptions};
use std::collections::BTreeMap;
use std::io::Cursor;

// ---- proto_splitter chunk.proto / versions.proto ----
#[derive(Clone, PartialEq, Message)]
pub struct VersionDef {
    #[prost(int32, tag = "1")] pub splitter_version: i32,
    #[prost(int32, tag = "2")] pub join_version: i32,
    #[prost(int32, repeated, tag = "3")] pub bad_consumers: Vec<i32>,
}
#[derive(Clone, PartialEq, Message)]
pub struct ChunkMetadata {
    #[prost(message, optional, tag = "1")] pub version: Option<VersionDef>,
    #[prost(message, repeated, tag = "2")] pub chunks: Vec<ChunkInfo>,
    #[prost(message, optional, tag = "3")] pub message: Option<ChunkedMessage>,
}
#[derive(Clone, PartialEq, Message)]
pub struct ChunkInfo {
    #[prost(int32, tag = "1")] pub r#type: i32,
    #[prost(uint64, tag = "2")] pub size: u64,
    #[prost(uint64, tag = "3")] pub offset: u64,
}
#[derive(Clone, PartialEq, Message)]
pub struct ChunkedMessage {
    #[prost(uint64, optional, tag = "1")] pub chunk_index: Option<u64>,
    #[prost(message, repeated, tag = "2")] pub chunked_fields: Vec<ChunkedField>,
}
#[derive(Clone, PartialEq, Message)]
pub struct ChunkedField {
    #[prost(message, repeated, tag = "1")] pub field_tag: Vec<FieldIndex>,
    #[prost(message, optional, tag = "3")] pub message: Option<ChunkedMessage>,
}
#[derive(Clone, PartialEq, Message)]
pub struct FieldIndex {
    #[prost(oneof = "Kind", tags = "1, 2, 3")] pub kind: Option<Kind>,
}
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Kind {
    #[prost(uint32, tag = "1")] Field(u32),
    #[prost(message, tag = "2")] MapKey(MapKey),
    #[prost(uint64, tag = "3")] Index(u64),
}
#[derive(Clone, PartialEq, Message)]
pub struct MapKey {
    #[prost(oneof = "KeyType", tags = "1, 2, 3, 4, 5, 6")] pub r#type: Option<KeyType>,
}
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum KeyType {
    #[prost(string, tag = "1")] S(String),
    #[prost(bool, tag = "2")] Boolean(bool),
    #[prost(uint32, tag = "3")] Ui32(u32),
    #[prost(uint64, tag = "4")] Ui64(u64),
    #[prost(int32, tag = "5")] I32(i32),
    #[prost(int64, tag = "6")] I64(i64),
}

// ---- minimal tensorflow GraphDef ----
#[derive(Clone, PartialEq, Message)]
pub struct GraphDef {
    #[prost(message, repeated, tag = "1")] pub node: Vec<NodeDef>,
    #[prost(message, optional, tag = "2")] pub library: Option<FunctionDefLibrary>,
    #[prost(message, optional, tag = "4")] pub versions: Option<TfVersionDef>,
}
#[derive(Clone, PartialEq, Message)]
pub struct TfVersionDef {
    #[prost(int32, tag = "1")] pub producer: i32,
    #[prost(int32, tag = "2")] pub min_consumer: i32,
}
#[derive(Clone, PartialEq, Message)]
pub struct NodeDef {
    #[prost(string, tag = "1")] pub name: String,
    #[prost(string, tag = "2")] pub op: String,
    #[prost(string, repeated, tag = "3")] pub input: Vec<String>,
    #[prost(string, tag = "4")] pub device: String,
    #[prost(btree_map = "string, message", tag = "5")] pub attr: BTreeMap<String, AttrValue>,
}
#[derive(Clone, PartialEq, Message)]
pub struct AttrValue {
    #[prost(oneof = "AttrKind", tags = "2, 6, 7, 8")] pub value: Option<AttrKind>,
}
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum AttrKind {
    #[prost(bytes, tag = "2")] S(Vec<u8>),
    #[prost(int32, tag = "6")] Type(i32),
    #[prost(message, tag = "7")] Shape(TensorShapeProto),
    #[prost(message, tag = "8")] Tensor(TensorProto),
}
#[derive(Clone, PartialEq, Message)]
pub struct TensorShapeProto {
    #[prost(message, repeated, tag = "2")] pub dim: Vec<Dim>,
}
#[derive(Clone, PartialEq, Message)]
pub struct Dim {
    #[prost(int64, tag = "1")] pub size: i64,
}
#[derive(Clone, PartialEq, Message)]
pub struct TensorProto {
    #[prost(int32, tag = "1")] pub dtype: i32,
    #[prost(message, optional, tag = "2")] pub tensor_shape: Option<TensorShapeProto>,
    #[prost(bytes = "vec", tag = "4")] pub tensor_content: Vec<u8>,
}
#[derive(Clone, PartialEq, Message)]
pub struct FunctionDefLibrary {
    #[prost(message, repeated, tag = "1")] pub function: Vec<FunctionDef>,
}
#[derive(Clone, PartialEq, Message)]
pub struct FunctionDef {
    #[prost(message, optional, tag = "1")] pub signature: Option<OpDef>,
    #[prost(message, repeated, tag = "3")] pub node_def: Vec<NodeDef>,
}
#[derive(Clone, PartialEq, Message)]
pub struct OpDef {
    #[prost(string, tag = "1")] pub name: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct M {
    #[prost(btree_map = "int64, string", tag = "1")] pub m64: BTreeMap<i64, String>,
    #[prost(btree_map = "bool, message", tag = "2")] pub mb: BTreeMap<bool, M>,
    #[prost(string, repeated, tag = "3")] pub rs: Vec<String>,
    #[prost(string, tag = "4")] pub s: String,
    #[prost(message, optional, boxed, tag = "5")] pub child: Option<Box<M>>,
    #[prost(message, repeated, tag = "6")] pub rm: Vec<M>,
}
fn ms(s: &str) -> M { M { s: s.into(), ..Default::default() } }
fn mk(t: KeyType) -> FieldIndex { FieldIndex { kind: Some(Kind::MapKey(MapKey { r#type: Some(t) })) } }

const DT_FLOAT: i32 = 1;
const DT_INT32: i32 = 3;

fn f(n: u32) -> FieldIndex { FieldIndex { kind: Some(Kind::Field(n)) } }
fn idx(n: u64) -> FieldIndex { FieldIndex { kind: Some(Kind::Index(n)) } }
fn key(s: &str) -> FieldIndex {
    FieldIndex { kind: Some(Kind::MapKey(MapKey { r#type: Some(KeyType::S(s.into())) })) }
}

/// Deterministic pseudo-random bytes (xorshift64*).
fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            (s.wrapping_mul(0x2545F4914F6CDD1D) >> 56) as u8
        })
        .collect()
}

fn const_node(name: &str, dtype: i32, content: Vec<u8>) -> NodeDef {
    let elem = 4;
    let n = (content.len() / elem) as i64;
    let mut attr = BTreeMap::new();
    attr.insert("dtype".into(), AttrValue { value: Some(AttrKind::Type(dtype)) });
    attr.insert(
        "value".into(),
        AttrValue {
            value: Some(AttrKind::Tensor(TensorProto {
                dtype,
                tensor_shape: Some(TensorShapeProto { dim: vec![Dim { size: n }] }),
                tensor_content: content,
            })),
        },
    );
    NodeDef { name: name.into(), op: "Const".into(), attr, ..Default::default() }
}

fn tensor_mut(n: &mut NodeDef) -> &mut TensorProto {
    match n.attr.get_mut("value").unwrap().value.as_mut().unwrap() {
        AttrKind::Tensor(t) => t,
        _ => unreachable!(),
    }
}

enum Chunk {
    Msg(Vec<u8>),
    Bytes(Vec<u8>),
}

/// Builds (full graph, chunks, root ChunkedMessage) for a layout.
enum FullMsg { G(GraphDef), M(M) }
fn build(layout: &str) -> (FullMsg, Vec<Chunk>, ChunkedMessage) {
    let content_tags = |n: u64| vec![f(1), idx(n), f(5), key("value"), f(8), f(4)];
    match layout {
        // base + BYTES tensor_content + MESSAGE node + MESSAGE library.
        "mixed" => {
            let mut g = GraphDef {
                node: vec![
                    const_node("a", DT_FLOAT, bytes(1, 16)),
                    const_node("big", DT_FLOAT, (0..50_000u32).flat_map(|i| ((i % 1000) as f32).to_le_bytes()).collect()), // compressible; spans several 64 KiB blocks
                    const_node("c", DT_INT32, bytes(3, 4000)),
                    NodeDef {
                        name: "add".into(),
                        op: "AddV2".into(),
                        input: vec!["a".into(), "big".into()],
                        attr: [("T".to_string(), AttrValue { value: Some(AttrKind::Type(DT_FLOAT)) })].into(),
                        ..Default::default()
                    },
                ],
                library: Some(FunctionDefLibrary {
                    function: vec![FunctionDef {
                        signature: Some(OpDef { name: "fn_a".into() }),
                        node_def: vec![const_node("k", DT_FLOAT, bytes(4, 64))],
                    }],
                }),
                versions: Some(TfVersionDef { producer: 1234, min_consumer: 0 }),
            };
            let full = g.clone();
            let big = std::mem::take(&mut tensor_mut(&mut g.node[1]).tensor_content);
            let c = std::mem::take(&mut tensor_mut(&mut g.node[2]).tensor_content);
            let add = std::mem::take(&mut g.node[3]);
            let lib = g.library.take().unwrap();
            let chunks = vec![
                Chunk::Msg(g.encode_to_vec()),
                Chunk::Bytes(big),
                Chunk::Bytes(c),
                Chunk::Msg(add.encode_to_vec()),
                Chunk::Msg(lib.encode_to_vec()),
            ];
            let cf = |tags: Vec<FieldIndex>, i: u64| ChunkedField {
                field_tag: tags,
                message: Some(ChunkedMessage { chunk_index: Some(i), chunked_fields: vec![] }),
            };
            let root = ChunkedMessage {
                chunk_index: Some(0),
                chunked_fields: vec![
                    cf(content_tags(1), 1),
                    cf(content_tags(2), 2),
                    cf(vec![f(1), idx(3)], 3),
                    cf(vec![f(2)], 4),
                ],
            };
            (FullMsg::G(full), chunks, root)
        }
        // 40 Const nodes, each tensor_content a BYTES chunk (many small records).
        "many" => {
            let mut g = GraphDef { versions: Some(TfVersionDef { producer: 99, min_consumer: 0 }), ..Default::default() };
            for i in 0..40u64 {
                g.node.push(const_node(&format!("c{i}"), DT_FLOAT, bytes(100 + i, 4 * (1 + i as usize * 37))));
            }
            let full = g.clone();
            let mut chunks = vec![];
            let mut fields = vec![];
            for i in 0..40u64 {
                let c = std::mem::take(&mut tensor_mut(&mut g.node[i as usize]).tensor_content);
                chunks.push(Chunk::Bytes(c));
                fields.push(ChunkedField {
                    field_tag: content_tags(i),
                    message: Some(ChunkedMessage { chunk_index: Some(i + 1), chunked_fields: vec![] }),
                });
            }
            chunks.insert(0, Chunk::Msg(g.encode_to_vec()));
            (FullMsg::G(full), chunks, ChunkedMessage { chunk_index: Some(0), chunked_fields: fields })
        }
        "custom" | "custom-rs" | "custom-rs-inrange" | "custom-mapscalar" => {
            let mut full = ms("root");
            if layout == "custom-mapscalar" { full.m64.insert(-5, "minus five".into()); }
            full.m64.insert(7, "seven".into());
            full.mb.insert(true, M { rs: vec!["x".into()], ..ms("t") });
            full.mb.insert(false, ms("f"));
            full.child = Some(Box::new(M { rs: vec!["k1".into(), "k2".into()], ..ms("kid") }));
            full.rm = vec![ms("r0"), ms("r1")];
            let mut base = ms("root");
            base.m64.insert(7, "seven".into());
            base.rm = vec![ms("r0"), M::default()];
            let mut chunks = vec![
                Chunk::Msg(vec![]),
                Chunk::Bytes(b"unused".to_vec()),
                Chunk::Msg(full.mb[&true].encode_to_vec()),
                Chunk::Msg(full.mb[&false].encode_to_vec()),
                Chunk::Msg(full.child.as_ref().unwrap().encode_to_vec()),
                Chunk::Msg(ms("r1").encode_to_vec()),
            ];
            let cf = |tags: Vec<FieldIndex>, i: u64| ChunkedField {
                field_tag: tags,
                message: Some(ChunkedMessage { chunk_index: Some(i), chunked_fields: vec![] }),
            };
            let mut fields = vec![
                cf(vec![f(2), mk(KeyType::Boolean(true))], 2),
                cf(vec![f(2), mk(KeyType::Boolean(false))], 3),
                cf(vec![f(5)], 4),
                cf(vec![f(6), idx(1)], 5),
            ];
            if layout == "custom-mapscalar" {
                // map<int64, string> value set from a BYTES chunk.
                chunks[1] = Chunk::Bytes(b"minus five".to_vec());
                fields.push(cf(vec![f(1), mk(KeyType::I64(-5))], 1));
            }
            if layout == "custom-rs-inrange" {
                // repeated string element replaced from a BYTES chunk, index in range.
                full.rs = vec!["rs0".into(), "keep".into()];
                base.rs = vec!["placeholder".into(), "keep".into()];
                chunks.push(Chunk::Bytes(b"rs0".to_vec()));
                fields.push(cf(vec![f(3), idx(0)], 6));
            }
            if layout == "custom-rs" {
                // repeated string element set from a BYTES chunk, index past the end.
                full.rs = vec!["rs0".into()];
                chunks.push(Chunk::Bytes(b"rs0".to_vec()));
                fields.push(cf(vec![f(3), idx(0)], 6));
            }
            chunks[0] = Chunk::Msg(base.encode_to_vec());
            return (FullMsg::M(full), chunks, ChunkedMessage { chunk_index: Some(0), chunked_fields: fields });
        }
        _ => panic!("unknown layout {layout}"),
    }
}

fn opts(comp: &str, transpose: bool, chunk_size: Option<u64>, padding: Option<u64>, meta: bool) -> WriterOptions {
    let c = match comp {
        "none" => CompressionType::None,
        "brotli" => CompressionType::Brotli,
        "zstd" => CompressionType::Zstd,
        "snappy" => CompressionType::Snappy,
        _ => panic!("compression {comp}"),
    };
    let mut o = WriterOptions::new().compression(c).transpose(transpose);
    if let Some(cs) = chunk_size { o = o.chunk_size(cs); }
    if let Some(p) = padding { o = o.final_padding(p); }
    if meta {
        // An (empty-ish) RecordsMetadata: field 1 = file_comment.
        o = o.set_serialized_metadata(vec![0x0a, 0x05, b'h', b'e', b'l', b'l', b'o']);
    }
    o
}

fn write_records(recs: &[&[u8]], o: WriterOptions) -> Vec<u8> {
    let mut buf = Vec::new();
    {
        let mut w = RecordWriter::new(Cursor::new(&mut buf), o).unwrap();
        for r in recs { w.write_record(r).unwrap(); }
        w.close().unwrap();
    }
    buf
}

fn write_records_file(recs: &[&[u8]], o: WriterOptions, path: &std::path::Path) {
    let f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = RecordWriter::new(f, o).unwrap();
    for r in recs { w.write_record(r).unwrap(); }
    w.close().unwrap();
}

fn positions_file(path: &std::path::Path) -> Vec<u64> {
    let f = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut r = RecordReader::new(f, ReaderOptions::new()).unwrap();
    let mut out = vec![];
    while let Some(_rec) = r.read_record().unwrap() { out.push(r.last_pos().numeric()); }
    out
}

fn positions(file: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let mut r = RecordReader::new(Cursor::new(file), ReaderOptions::new()).unwrap();
    let mut out = vec![];
    while let Some(rec) = r.read_record().unwrap() {
        out.push((r.last_pos().numeric(), rec));
    }
    out
}

/// Pseudo-normal float32 weights (sum of 4 uniforms, scaled): realistic,
/// poorly compressible tensor data.
fn weights(seed: u64, n: usize) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    let mut next = || { s ^= s >> 12; s ^= s << 25; s ^= s >> 27; s.wrapping_mul(0x2545F4914F6CDD1D) };
    let mut out = Vec::with_capacity(n * 4);
    for _ in 0..n {
        let r = next();
        let u = ((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48)) as f32 / 65536.0 - 2.0;
        out.extend_from_slice(&(u * 0.05f32).to_le_bytes());
    }
    out
}

fn big_mode(out: &std::path::Path, mb: usize, comps: &[&str]) {
    // 8 Const nodes of mb/8 MiB each; each tensor_content is one BYTES chunk.
    let per = mb * (1 << 20) / 8 / 4;
    let mut g = GraphDef { versions: Some(TfVersionDef { producer: 1, min_consumer: 0 }), ..Default::default() };
    for i in 0..8u64 { g.node.push(const_node(&format!("w{i}"), DT_FLOAT, weights(i + 1, per))); }
    let full_enc = g.encode_to_vec();
    let mut contents = vec![];
    for n in g.node.iter_mut() { contents.push(std::mem::take(&mut tensor_mut(n).tensor_content)); }
    let base = g.encode_to_vec();
    let mut recs: Vec<&[u8]> = vec![&base];
    for c in &contents { recs.push(c); }
    if full_enc.len() < (1usize << 31) { std::fs::write(out.join("big.expected.pb"), &full_enc).unwrap(); }
    drop(full_enc);
    for comp in comps {
        let comp = *comp;
        let t = std::time::Instant::now();
        let tmp = out.join("pass1.tmp");
        write_records_file(&recs, opts(comp, false, None, None, false), &tmp);
        let pos = positions_file(&tmp);
        std::fs::remove_file(&tmp).unwrap();
        let md = ChunkMetadata {
            version: Some(VersionDef { splitter_version: 1, join_version: 0, bad_consumers: vec![] }),
            chunks: recs.iter().zip(&pos).enumerate().map(|(i, (r, p))| ChunkInfo { r#type: if i == 0 { 1 } else { 2 }, size: r.len() as u64, offset: *p }).collect(),
            message: Some(ChunkedMessage {
                chunk_index: Some(0),
                chunked_fields: (0..8u64).map(|i| ChunkedField {
                    field_tag: vec![f(1), idx(i), f(5), key("value"), f(8), f(4)],
                    message: Some(ChunkedMessage { chunk_index: Some(i + 1), chunked_fields: vec![] }),
                }).collect(),
            }),
        };
        let t1 = t.elapsed();
        let md_bytes = md.encode_to_vec();
        let mut all = recs.clone();
        all.push(&md_bytes);
        let t = std::time::Instant::now();
        let path = out.join(format!("big-{comp}.cpb"));
        write_records_file(&all, opts(comp, false, None, None, false), &path);
        let t2 = t.elapsed();
        println!("big-{comp}\t{} bytes\twrite {:.2}s (pass1 incl. read-back {:.2}s)", std::fs::metadata(&path).unwrap().len(), t2.as_secs_f64(), t1.as_secs_f64());
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 4 && args[1] == "meta" {
        let data = std::fs::read(&args[2]).unwrap();
        let recs = positions(&data);
        std::fs::write(&args[3], &recs.last().unwrap().1).unwrap();
        return;
    }
    if args.len() >= 4 && args[1] == "big" {
        let out = std::path::Path::new(&args[2]);
        std::fs::create_dir_all(out).unwrap();
        let comps: Vec<&str> = args.get(4).map(|s| s.split(',').collect()).unwrap_or(vec!["none", "brotli", "zstd", "snappy"]);
        big_mode(out, args[3].parse().unwrap(), &comps);
        return;
    }
    if args.len() != 2 {
        eprintln!("usage: rg OUTDIR");
        std::process::exit(2);
    }
    let out = std::path::Path::new(&args[1]);
    std::fs::create_dir_all(out).unwrap();
    let mut cases: Vec<(String, &str, WriterOptions)> = vec![];
    for comp in ["none", "brotli", "zstd", "snappy"] {
        for layout in ["mixed", "many"] {
            cases.push((format!("{layout}-{comp}-simple"), layout, opts(comp, false, None, None, false)));
            cases.push((format!("{layout}-{comp}-transposed"), layout, opts(comp, true, None, None, false)));
            // chunk_size 1: every record is its own Riegeli chunk.
            cases.push((format!("{layout}-{comp}-chunk1"), layout, opts(comp, false, Some(1), None, false)));
        }
    }
    cases.push(("custom".into(), "custom", opts("zstd", false, None, None, false)));
    cases.push(("custom-mapscalar".into(), "custom-mapscalar", opts("zstd", false, None, None, false)));
    cases.push(("custom-rs-inrange".into(), "custom-rs-inrange", opts("zstd", false, None, None, false)));
    cases.push(("custom-rs".into(), "custom-rs", opts("zstd", false, None, None, false)));
    cases.push(("mixed-brotli-metadata-chunk".into(), "mixed", opts("brotli", false, None, None, true)));
    cases.push(("mixed-zstd-padding64k".into(), "mixed", opts("zstd", false, None, Some(65536), false)));
    cases.push(("many-zstd-transposed-chunk4k".into(), "many", opts("zstd", true, Some(4096), None, false)));
    cases.push(("many-brotli-chunk4k".into(), "many", opts("brotli", false, Some(4096), None, false)));

    for (name, layout, o) in cases {
        let (full, chunks, root) = build(layout);
        let recs: Vec<&[u8]> = chunks.iter().map(|c| match c { Chunk::Msg(b) | Chunk::Bytes(b) => b.as_slice() }).collect();
        // Pass 1: the same records with the same options, to learn positions.
        let pass1 = write_records(&recs, o.clone());
        let pos = positions(&pass1);
        assert_eq!(pos.len(), recs.len());
        let md = ChunkMetadata {
            version: Some(VersionDef { splitter_version: 1, join_version: 0, bad_consumers: vec![] }),
            chunks: chunks
                .iter()
                .zip(&pos)
                .map(|(c, (p, _))| match c {
                    Chunk::Msg(b) => ChunkInfo { r#type: 1, size: b.len() as u64, offset: *p },
                    Chunk::Bytes(b) => ChunkInfo { r#type: 2, size: b.len() as u64, offset: *p },
                })
                .collect(),
            message: Some(root),
        };
        let md_bytes = md.encode_to_vec();
        let mut all = recs.clone();
        all.push(&md_bytes);
        let file = write_records(&all, o);
        // Verify: same positions, metadata last.
        let pos2 = positions(&file);
        assert_eq!(pos2.len(), all.len(), "{name}");
        for (i, (p, rec)) in pos2.iter().enumerate() {
            assert_eq!(rec.as_slice(), all[i], "{name} record {i}");
            if i < pos.len() { assert_eq!(*p, pos[i].0, "{name} position {i}"); }
        }
        std::fs::write(out.join(format!("{name}.cpb")), &file).unwrap();
        std::fs::write(out.join(format!("{name}.expected.pb")), match &full { FullMsg::G(g) => g.encode_to_vec(), FullMsg::M(m) => m.encode_to_vec() }).unwrap();
        println!("{name}\t{} bytes\t{} records\toffsets {:?}", file.len(), all.len(),
                 pos2.iter().map(|(p, _)| *p).take(8).collect::<Vec<_>>());
    }
}

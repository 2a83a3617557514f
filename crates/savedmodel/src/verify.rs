//! `verify`: checks a whole SavedModel directory and reports every problem found, each naming
//! the file and the fault.
//!
//! - `saved_model.cpb`: every Riegeli chunk (header and data hashes, decoding); the chunk
//!   metadata (types, record positions and sizes, chunk indices and field tags of the tree);
//!   that the chunks merge into a message that serializes; that the merged message is a valid
//!   `SavedModel` (wire structure and field types checked against the schema, strings UTF-8).
//! - `saved_model.pb` / `.pbtxt`: that it parses as a `SavedModel`.
//! - `variables/`: every tensor's size, offset and checksum, missing shards, a damaged index
//!   ([`unbound_bundle::BundleReader::verify`]); that every variable the object graphs name exists in the bundle.
//! - `assets/`: every file `asset_file_def` names exists.
//! - `fingerprint.pb`: that it parses (its values are not compared here).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use prost::Message as _;
use prost_reflect::{Kind, MessageDescriptor};
use serde::Serialize;
use unbound_chunked::merger::{FileChunks, MAX_NESTING};
use unbound_chunked::tags::steps;
use unbound_chunked::Merger;
use unbound_proto::fields::tensorflow::{meta_graph_def, saved_model};
use unbound_proto::tensorflow::proto_splitter::{
    chunk_info::Type as ChunkType, ChunkMetadata, ChunkedMessage,
};
use unbound_proto::tensorflow::{saved_object::Kind as ObjectKind, FingerprintDef, MetaGraphDef};
use unbound_records::{ChunkSummary, RecordReader};
use unbound_wire::scalar::{scalar_wire, ScalarWire};
use unbound_wire::{Payload, WireMessage, WireValue};

use crate::dir::{model_file, read_text, saved_model_descriptor, ModelFile, ModelFormat};
use crate::show::{objects::checkpoint_keys_by_path, wire};
use unbound_bundle::BundleReader;

/// One problem found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fault {
    /// The file at fault.
    pub file: PathBuf,
    /// What is wrong with it.
    pub fault: String,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.fault)
    }
}

/// What [`verify_dir`] found: the report `unbound verify` prints (each fault as a
/// `FILE: FAULT` line, or `OK: DIR: ` and the `checked` phrases joined by `; `).
#[derive(Debug, Default, Clone, Serialize)]
pub struct VerifyReport {
    /// Every problem, in the order found; empty when the directory is sound.
    pub faults: Vec<Fault>,
    /// What was checked, one short phrase per part (for the summary line).
    pub checked: Vec<String>,
}

impl VerifyReport {
    fn fault(&mut self, file: &Path, fault: impl fmt::Display) {
        // Errors of lower layers often start with the file name already.
        let text = fault.to_string();
        let prefix = format!("{}: ", file.display());
        let text = text.strip_prefix(&prefix).unwrap_or(&text).to_string();
        self.faults.push(Fault {
            file: file.to_path_buf(),
            fault: text,
        });
    }
}

/// Checks everything in the SavedModel directory `dir`.
pub fn verify_dir(dir: &Path) -> VerifyReport {
    let mut report = VerifyReport::default();
    let meta_graphs = match model_file(dir) {
        Ok(ModelFile {
            path,
            format: ModelFormat::Cpb,
        }) => verify_cpb(&path, &mut report),
        Ok(ModelFile {
            path,
            format: ModelFormat::Pb,
        }) => verify_pb(&path, &mut report),
        Ok(ModelFile {
            path,
            format: ModelFormat::Pbtxt,
        }) => match saved_model_descriptor().and_then(|d| read_text(&path, &d)) {
            Ok(m) => {
                report.checked.push(format!("{} parses", path.display()));
                Some(m)
            }
            Err(e) => {
                report.fault(&path, e);
                None
            }
        },
        Err(e) => {
            report.fault(dir, e);
            None
        }
    };
    let meta_graphs = meta_graphs
        .map(|root| decode_meta_graphs(&root, dir, &mut report))
        .unwrap_or_default();
    verify_variables(dir, &meta_graphs, &mut report);
    verify_assets(dir, &meta_graphs, &mut report);
    let fingerprint = dir.join("fingerprint.pb");
    if fingerprint.is_file() {
        match std::fs::read(&fingerprint).map(|b| FingerprintDef::decode(b.as_slice())) {
            Ok(Ok(_)) => report.checked.push("fingerprint.pb parses".into()),
            Ok(Err(e)) => report.fault(&fingerprint, format!("not a FingerprintDef: {e}")),
            Err(e) => report.fault(&fingerprint, e),
        }
    }
    report
}

/// A `.pb`: it must parse as a `SavedModel`.
fn verify_pb(path: &Path, report: &mut VerifyReport) -> Option<WireMessage> {
    let desc = saved_model_descriptor().ok()?;
    let root = match unbound_chunked::read_pb(path, &desc) {
        Ok(m) => m,
        Err(e) => {
            report.fault(path, e);
            return None;
        }
    };
    match check_message(&root, &desc, 0) {
        Ok(()) => {
            report.checked.push(format!("{} parses", file_name(path)));
            Some(root)
        }
        Err(e) => {
            report.fault(path, format!("not a valid SavedModel: {e}"));
            None
        }
    }
}

/// A `.cpb`: Riegeli chunks, metadata, merge, and the merged message.
fn verify_cpb(path: &Path, report: &mut VerifyReport) -> Option<WireMessage> {
    let reader = match RecordReader::open(path) {
        Ok(r) => Arc::new(r),
        Err(e) => {
            report.fault(path, e);
            return None;
        }
    };
    let records = check_riegeli_chunks(path, &reader, report);
    let (metadata_position, metadata) = match reader.last_record() {
        Ok((pos, bytes)) => match ChunkMetadata::decode(bytes) {
            Ok(m) => (pos, m),
            Err(e) => {
                report.fault(path, format!("the last record is not a ChunkMetadata: {e}"));
                return None;
            }
        },
        Err(e) => {
            let text = e.to_string();
            let text = text
                .strip_prefix(&format!("{}: ", path.display()))
                .unwrap_or(&text)
                .to_string();
            report.fault(
                path,
                format!("the chunk metadata (the last record) cannot be read: {text}"),
            );
            return None;
        }
    };
    let before = report.faults.len();
    check_chunk_infos(path, &metadata, metadata_position, &records, report);
    let tree = metadata.message.clone().unwrap_or_default();
    check_tree(path, &tree, metadata.chunks.len(), 0, report);
    if report.faults.len() > before {
        return None;
    }
    let desc = saved_model_descriptor().ok()?;
    let merged = FileChunks::from_reader(reader.clone())
        .and_then(|(chunks, _)| Merger::new(&chunks).merge(&desc, &tree));
    let message = match merged {
        Ok(m) => m,
        Err(e) => {
            report.fault(path, format!("the chunks do not merge: {e}"));
            return None;
        }
    };
    // Encode it; the chunk records were all decoded above, so each lazy record only has to be
    // the length its chunk said.
    let encoded = message.write_with(&mut std::io::sink(), &mut |r, _| match records
        .get(&r.position)
    {
        Some(&len) if len == r.len => Ok(()),
        other => Err(unbound_wire::WireError::RecordLength {
            source_name: reader.name().to_string(),
            position: r.position,
            actual: other.copied().unwrap_or(0),
            expected: r.len,
        }),
    });
    if let Err(e) = encoded {
        report.fault(path, format!("the merged message does not serialize: {e}"));
        return None;
    }
    if let Err(e) = check_message(&message, &desc, 0) {
        report.fault(
            path,
            format!("the merged message is not a valid SavedModel: {e}"),
        );
        return None;
    }
    report.checked.push(format!(
        "{}: {} Riegeli records, {} chunks, merged ({} bytes)",
        file_name(path),
        records.len(),
        metadata.chunks.len(),
        message.encoded_len()
    ));
    Some(message)
}

/// Decodes every Riegeli chunk (checking header and data hashes and decompression), on all
/// cores, reporting each damaged chunk. Returns the record lengths by numeric position.
fn check_riegeli_chunks(
    path: &Path,
    reader: &RecordReader,
    report: &mut VerifyReport,
) -> BTreeMap<u64, u64> {
    let mut chunks = Vec::new();
    for chunk in reader.chunks() {
        match chunk {
            Ok(c) if c.num_records > 0 => chunks.push(c),
            Ok(_) => {}
            Err(e) => {
                report.fault(path, format!("the chunk sequence is broken: {e}"));
                break;
            }
        }
    }
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4);
    let mut results: Vec<(usize, Result<Vec<u64>, String>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(c) = chunks.get(i) else { break };
                        out.push((i, record_lengths(reader, c)));
                    }
                    out
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    });
    results.sort_by_key(|(i, _)| *i);
    let mut records = BTreeMap::new();
    for (i, result) in results {
        let c = &chunks[i];
        match result {
            Ok(lens) => records.extend((c.begin..).zip(lens)),
            Err(e) => report.fault(
                path,
                format!(
                    "Riegeli chunk at offset {} ({:?}, {} records): {e}",
                    c.begin, c.chunk_type, c.num_records
                ),
            ),
        }
    }
    records
}

/// Decodes one chunk (verifying it) and returns the lengths of its records.
fn record_lengths(reader: &RecordReader, c: &ChunkSummary) -> Result<Vec<u64>, String> {
    let fault = |e: unbound_records::RecordsError| {
        let text = e.to_string();
        let prefix = format!("{}: ", reader.name());
        text.strip_prefix(&prefix).unwrap_or(&text).to_string()
    };
    let (pos, first) = reader.read_record_at(c.begin).map_err(fault)?;
    if pos != c.begin {
        return Err(format!("its first record is at position {pos}"));
    }
    let mut lens = vec![first.len() as u64];
    drop(first);
    // The chunk is decoded and verified; the other lengths come from its size table.
    for i in 1..c.num_records {
        lens.push(reader.record_len_at(c.begin + i).map_err(fault)?);
    }
    Ok(lens)
}

/// Every `ChunkInfo`: a known type, a record position before the metadata that holds a record
/// of the stated size.
fn check_chunk_infos(
    path: &Path,
    metadata: &ChunkMetadata,
    metadata_position: u64,
    records: &BTreeMap<u64, u64>,
    report: &mut VerifyReport,
) {
    for (i, info) in metadata.chunks.iter().enumerate() {
        if info.r#type != ChunkType::Message as i32 && info.r#type != ChunkType::Bytes as i32 {
            report.fault(
                path,
                format!("chunk {i}: invalid chunk type {}", info.r#type),
            );
        }
        if info.offset >= metadata_position {
            report.fault(
                path,
                format!(
                    "chunk {i}: record position {} is not before the metadata record at {metadata_position}",
                    info.offset
                ),
            );
            continue;
        }
        match records.get(&info.offset) {
            None => report.fault(
                path,
                format!("chunk {i}: no readable record at position {}", info.offset),
            ),
            Some(&len) if len != info.size => report.fault(
                path,
                format!(
                    "chunk {i}: size {} in the metadata, but the record at position {} holds {len} bytes",
                    info.size, info.offset
                ),
            ),
            Some(_) => {}
        }
    }
}

/// The `ChunkedMessage` tree: chunk indices in range, field tags that decode, bounded depth.
fn check_tree(
    path: &Path,
    cm: &ChunkedMessage,
    chunks: usize,
    depth: usize,
    report: &mut VerifyReport,
) {
    if depth > MAX_NESTING {
        report.fault(
            path,
            format!("chunk metadata nested deeper than {MAX_NESTING} levels"),
        );
        return;
    }
    if let Some(i) = cm.chunk_index {
        if i >= chunks as u64 {
            report.fault(
                path,
                format!("chunk index {i} is out of range for {chunks} chunks"),
            );
        }
    }
    for cf in &cm.chunked_fields {
        if let Err(fault) = steps(&cf.field_tag) {
            report.fault(path, format!("bad field tag {:?}: {fault}", cf.field_tag));
        }
        if let Some(child) = &cf.message {
            check_tree(path, child, chunks, depth + 1, report);
        }
    }
}

/// Checks that `m` is a valid message of type `desc`: nested messages parse, every known
/// field has a wire type its kind allows, strings are UTF-8. Unknown fields are allowed.
fn check_message(m: &WireMessage, desc: &MessageDescriptor, depth: usize) -> Result<(), String> {
    if depth > MAX_NESTING {
        return Err(format!("nested deeper than {MAX_NESTING} levels"));
    }
    let mut seen: BTreeMap<u32, usize> = BTreeMap::new();
    for f in &m.fields {
        let Some(fd) = desc.get_field(f.number) else {
            continue;
        };
        let n = seen.entry(f.number).or_default();
        let at = if fd.is_list() || fd.is_map() {
            format!("{}[{n}]", fd.name())
        } else {
            fd.name().to_string()
        };
        *n += 1;
        let in_field = |e: String| format!("{at}: {e}");
        let packed_ok = fd.is_list();
        match (fd.kind(), &f.value) {
            (Kind::Message(sub), WireValue::Message(inner)) => {
                check_message(inner, &sub, depth + 1).map_err(|e| format!("{at}.{e}"))?
            }
            (Kind::Message(sub), WireValue::Bytes(p)) => {
                let inner = wire::parse(p, &at).map_err(|e| in_field(e.to_string()))?;
                check_message(&inner, &sub, depth + 1).map_err(|e| format!("{at}.{e}"))?
            }
            (Kind::String, WireValue::Bytes(p)) => check_utf8(p).map_err(in_field)?,
            (Kind::Bytes, WireValue::Bytes(_)) => {}
            (kind, value) if wire_fits(&kind, value) => {}
            (_, WireValue::Bytes(p)) if packed_ok => {
                check_packed(&fd.kind(), p).map_err(in_field)?
            }
            (kind, value) => {
                return Err(in_field(format!(
                    "a {} value where the schema has {kind:?}",
                    wire_kind(value)
                )))
            }
        }
    }
    Ok(())
}

fn wire_kind(v: &WireValue) -> &'static str {
    match v {
        WireValue::Varint(_) => "varint",
        WireValue::Fixed64(_) => "64-bit",
        WireValue::Fixed32(_) => "32-bit",
        WireValue::Bytes(_) | WireValue::Message(_) => "length-delimited",
        WireValue::Group(_) => "group",
    }
}

/// A packed run of scalars of `kind`: whole fixed-width values, or varints that decode.
/// Whether a fixed-width or varint value has the wire layout of `kind`.
fn wire_fits(kind: &Kind, value: &WireValue) -> bool {
    matches!(
        (scalar_wire(kind), value),
        (Some(ScalarWire::Varint), WireValue::Varint(_))
            | (Some(ScalarWire::Fixed32), WireValue::Fixed32(_))
            | (Some(ScalarWire::Fixed64), WireValue::Fixed64(_))
    )
}

fn check_packed(kind: &Kind, p: &Payload) -> Result<(), String> {
    let bytes = p.bytes().map_err(|e| e.to_string())?;
    let width = match scalar_wire(kind) {
        Some(ScalarWire::Fixed64) => 8,
        Some(ScalarWire::Fixed32) => 4,
        Some(ScalarWire::Varint) => 0,
        Some(ScalarWire::Len) | None => {
            return Err("a packed run where the schema has no scalar".into())
        }
    };
    if width > 0 {
        return match bytes.len() % width {
            0 => Ok(()),
            _ => Err(format!(
                "packed run of {} bytes is not a multiple of {width}",
                bytes.len()
            )),
        };
    }
    let mut pos = 0;
    while pos < bytes.len() {
        unbound_wire::codec::read_varint(&bytes, &mut pos).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn check_utf8(p: &Payload) -> Result<(), String> {
    let bytes = p.bytes().map_err(|e| e.to_string())?;
    std::str::from_utf8(&bytes)
        .map(|_| ())
        .map_err(|e| format!("string is not valid UTF-8: {e}"))
}

/// The MetaGraphDefs of `root` without their graphs (which may be huge), decoded.
fn decode_meta_graphs(
    root: &WireMessage,
    dir: &Path,
    report: &mut VerifyReport,
) -> Vec<MetaGraphDef> {
    let name = dir.display().to_string();
    let mut out = Vec::new();
    for mg in wire::messages(root, saved_model::META_GRAPHS, &name) {
        let decoded = mg
            .and_then(|mg| wire::encode_without(&mg, meta_graph_def::GRAPH_DEF))
            .map(|b| MetaGraphDef::decode(bytes::Bytes::from(b)).map_err(|e| e.to_string()));
        match decoded {
            Ok(Ok(m)) => out.push(m),
            Ok(Err(e)) => report.fault(dir, format!("a MetaGraphDef does not decode: {e}")),
            Err(e) => report.fault(dir, format!("a MetaGraphDef does not decode: {e}")),
        }
    }
    out
}

/// The bundle in `variables/`, and that every variable the object graphs name is in it.
fn verify_variables(dir: &Path, meta_graphs: &[MetaGraphDef], report: &mut VerifyReport) {
    let prefix = dir.join("variables").join("variables");
    let index = dir.join("variables").join("variables.index");
    let wants_variables = meta_graphs.iter().any(|mg| {
        mg.object_graph_def.as_ref().is_some_and(|og| {
            og.nodes
                .iter()
                .any(|n| matches!(n.kind, Some(ObjectKind::Variable(_))))
        })
    });
    if !index.exists() {
        if wants_variables {
            report.fault(&index, "missing, but the model has variables");
        }
        return;
    }
    let bundle = match BundleReader::open(&prefix) {
        Ok(b) => b,
        Err(e) => {
            report.fault(&index, e);
            return;
        }
    };
    let before = report.faults.len();
    for f in bundle.verify() {
        let fault = match &f.key {
            Some(k) => format!("tensor {k}: {}", f.fault),
            None => f.fault.clone(),
        };
        let file = if f.file.as_os_str().is_empty() {
            index.clone()
        } else {
            f.file.clone()
        };
        report.fault(&file, fault);
    }
    let keys: BTreeSet<&[u8]> = bundle.keys().collect();
    let ckpt_graph = match bundle.object_graph() {
        Ok(g) => g,
        Err(e) => {
            report.fault(&index, e);
            None
        }
    };
    if let Some(g) = &ckpt_graph {
        for (node, n) in g.nodes.iter().enumerate() {
            for a in &n.attributes {
                if !keys.contains(a.checkpoint_key.as_bytes()) {
                    report.fault(
                        &index,
                        format!(
                            "the checkpoint's object graph names {:?} (node {node}, {}), which the bundle does not hold",
                            a.checkpoint_key, a.name
                        ),
                    );
                }
            }
        }
    }
    let by_path = ckpt_graph
        .as_ref()
        .map(checkpoint_keys_by_path)
        .unwrap_or_default();
    for mg in meta_graphs {
        let Some(og) = &mg.object_graph_def else {
            continue;
        };
        let info = crate::show::objects::object_graph(og, &[]);
        for v in &info.variables {
            match by_path.get(&v.path) {
                Some(key) if keys.contains(key.as_bytes()) => {}
                Some(key) => report.fault(
                    &index,
                    format!("variable {} ({key}) is not in the bundle", v.path),
                ),
                None => report.fault(
                    &index,
                    format!(
                        "variable {} of the SavedModel's object graph has no checkpoint key in the bundle's object graph",
                        v.path
                    ),
                ),
            }
        }
    }
    if report.faults.len() == before {
        report.checked.push(format!(
            "variables: {} keys in {} shard(s), checksums match",
            keys.len(),
            bundle.num_shards()
        ));
    }
}

/// Every asset file `asset_file_def` names exists under `assets/`.
fn verify_assets(dir: &Path, meta_graphs: &[MetaGraphDef], report: &mut VerifyReport) {
    let mut count = 0;
    for mg in meta_graphs {
        for a in &mg.asset_file_def {
            let path = dir.join("assets").join(&a.filename);
            if !path.is_file() {
                report.fault(&path, "missing (named by asset_file_def)");
            }
            count += 1;
        }
    }
    if count > 0 {
        report.checked.push(format!("{count} asset file(s)"));
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

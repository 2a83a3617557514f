//! `unbound inspect FILE.cpb [--json]`: what a chunked file holds, without merging it.

use std::path::PathBuf;

use serde_json::{json, Value};
use unbound_chunked::FileChunks;
use unbound_proto::tensorflow::proto_splitter::{
    chunk_info::Type as ChunkType,
    field_index::{map_key::Type as KeyType, Kind},
    ChunkedMessage, FieldIndex,
};

use super::CmdResult;

/// Arguments of `unbound inspect`.
#[derive(clap::Args)]
pub struct Args {
    /// The .cpb file.
    file: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs the command.
pub fn run(args: Args) -> CmdResult {
    let (chunks, metadata) = FileChunks::open(&args.file)?;
    let reader = chunks.reader();
    let riegeli_chunks: Vec<Value> = reader
        .chunks()
        .map(|c| {
            c.map(|c| {
                json!({
                    "offset": c.begin,
                    "type": format!("{:?}", c.chunk_type),
                    "records": c.num_records,
                    "data_size": c.data_size,
                    "decoded_size": c.decoded_data_size,
                    "compression": c.compression.map(|x| format!("{x:?}")),
                })
            })
        })
        .collect::<Result<_, _>>()?;
    let chunk_list: Vec<Value> = metadata
        .chunks
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({
                "index": i,
                "type": ChunkType::try_from(c.r#type).map(|t| t.as_str_name()).unwrap_or("INVALID"),
                "size": c.size,
                "offset": c.offset,
            })
        })
        .collect();
    let version = metadata.version.clone().unwrap_or_default();
    let tree = metadata.message.clone().unwrap_or_default();
    if args.json {
        let out = json!({
            "file": args.file.display().to_string(),
            "file_size": reader.len(),
            "version": {
                "splitter_version": version.splitter_version,
                "join_version": version.join_version,
                "bad_consumers": version.bad_consumers,
            },
            "chunks": chunk_list,
            "message": message_json(&tree),
            "riegeli_chunks": riegeli_chunks,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("{} ({} bytes)", args.file.display(), reader.len());
    println!(
        "version: splitter {}, join {}",
        version.splitter_version, version.join_version
    );
    println!("chunks: {}", metadata.chunks.len());
    for c in &chunk_list {
        println!(
            "  #{:<4} {:<7} size {:>12}  position {}",
            c["index"],
            c["type"].as_str().unwrap_or(""),
            c["size"],
            c["offset"]
        );
    }
    println!("message tree:");
    print_tree(&tree, 1);
    println!("riegeli chunks: {}", riegeli_chunks.len());
    for c in &riegeli_chunks {
        println!(
            "  at {:<10} {} records {:<5} stored {:>12} decoded {:>12} {}",
            c["offset"],
            c["type"].as_str().unwrap_or(""),
            c["records"],
            c["data_size"],
            c["decoded_size"],
            c["compression"].as_str().unwrap_or("")
        );
    }
    Ok(())
}

fn message_json(m: &ChunkedMessage) -> Value {
    json!({
        "chunk_index": m.chunk_index,
        "chunked_fields": m.chunked_fields.iter().map(|cf| json!({
            "field_tag": cf.field_tag.iter().map(tag_json).collect::<Vec<_>>(),
            "message": message_json(&cf.message.clone().unwrap_or_default()),
        })).collect::<Vec<_>>(),
    })
}

fn tag_json(t: &FieldIndex) -> Value {
    match &t.kind {
        Some(Kind::Field(f)) => json!({ "field": f }),
        Some(Kind::Index(i)) => json!({ "index": i }),
        Some(Kind::MapKey(k)) => match &k.r#type {
            Some(KeyType::S(s)) => json!({ "map_key": { "s": s } }),
            Some(KeyType::Boolean(b)) => json!({ "map_key": { "boolean": b } }),
            Some(KeyType::Ui32(v)) => json!({ "map_key": { "ui32": v } }),
            Some(KeyType::Ui64(v)) => json!({ "map_key": { "ui64": v } }),
            Some(KeyType::I32(v)) => json!({ "map_key": { "i32": v } }),
            Some(KeyType::I64(v)) => json!({ "map_key": { "i64": v } }),
            None => json!({ "map_key": null }),
        },
        None => Value::Null,
    }
}

fn tag_text(t: &FieldIndex) -> String {
    match &t.kind {
        Some(Kind::Field(f)) => format!("{f}"),
        Some(Kind::Index(i)) => format!("[{i}]"),
        Some(Kind::MapKey(k)) => match &k.r#type {
            Some(KeyType::S(s)) => format!("[{s:?}]"),
            Some(KeyType::Boolean(b)) => format!("[{b}]"),
            Some(KeyType::Ui32(v)) => format!("[{v}]"),
            Some(KeyType::Ui64(v)) => format!("[{v}]"),
            Some(KeyType::I32(v)) => format!("[{v}]"),
            Some(KeyType::I64(v)) => format!("[{v}]"),
            None => "[?]".into(),
        },
        None => "?".into(),
    }
}

fn print_tree(m: &ChunkedMessage, depth: usize) {
    let pad = "  ".repeat(depth);
    match m.chunk_index {
        Some(i) => println!("{pad}chunk {i}"),
        None => println!("{pad}(no chunk)"),
    }
    for cf in &m.chunked_fields {
        let path: Vec<String> = cf.field_tag.iter().map(tag_text).collect();
        let path = if path.is_empty() {
            "(merged into parent)".to_string()
        } else {
            path.join(".")
        };
        println!("{pad}  {path}:");
        print_tree(&cf.message.clone().unwrap_or_default(), depth + 2);
    }
}

//! Compiles the schemas under `proto/` with protox (no system `protoc`) and
//! generates Rust types with prost-build.
//!
//! Outputs in `OUT_DIR`:
//! - one `<package>.rs` per protobuf package (prost-build naming);
//! - `file_descriptor_set.bin`: the encoded `FileDescriptorSet` of every
//!   schema plus the well-known types they import, without source info.

use std::error::Error;
use std::fs;
use std::path::{Path, PathBuf};

use prost::Message;
use prost_types::{DescriptorProto, FileDescriptorSet};

fn main() -> Result<(), Box<dyn Error>> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    let proto_dir = manifest_dir.join("proto");

    let mut files = Vec::new();
    collect_protos(&proto_dir, &mut files)?;
    files.sort();
    println!("cargo:rerun-if-changed={}", proto_dir.display());
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
    }

    let mut compiler = protox::Compiler::new([&proto_dir])?;
    compiler.include_imports(true);
    compiler.include_source_info(false);
    compiler.open_files(&files)?;

    // The embedded set: compact, no comments.
    let encoded = compiler.encode_file_descriptor_set();
    fs::write(out_dir.join("file_descriptor_set.bin"), &encoded)?;

    // Code generation uses source info so proto comments become doc comments.
    compiler.include_source_info(true);
    let fds: FileDescriptorSet = compiler.file_descriptor_set();

    let mut config = prost_build::Config::new();
    config
        // Every `bytes` field is `bytes::Bytes`: decoding from a `Bytes`
        // buffer (e.g. a memory map) slices instead of copying.
        .bytes(["."])
        // Maps are ordered: encoding is deterministic and matches the key
        // order of protobuf's deterministic serialization.
        .btree_map(["."])
        // `prost::Name` impls (full names, and type URLs for `Any` with the
        // domain TensorFlow uses).
        .enable_type_names()
        .type_name_domain(["."], "type.googleapis.com");

    // `prost_reflect::ReflectMessage` for every generated message, backed by
    // the embedded descriptor pool.
    let mut names = Vec::new();
    for file in &fds.file {
        if file.package() == "google.protobuf" {
            continue; // provided by prost-types
        }
        for message in &file.message_type {
            collect_message_names(file.package(), message, &mut names);
        }
    }
    for name in &names {
        // A matcher without the leading dot matches the message and any
        // message whose full name ends in `.{name}`, but not nested types.
        // Make sure no such suffix clash exists.
        if let Some(other) = names.iter().find(|o| o.ends_with(&format!(".{name}"))) {
            return Err(format!("message name {name} is a suffix of {other}").into());
        }
        config.message_attribute(
            name,
            format!(
                "#[derive(::prost_reflect::ReflectMessage)]\n\
                 #[prost_reflect(descriptor_pool = \"crate::descriptor_pool()\", message_name = \"{name}\")]"
            ),
        );
    }

    config.compile_fds(fds)?;

    // Guard against a stale descriptor set: it must decode.
    FileDescriptorSet::decode(encoded.as_slice())?;
    Ok(())
}

/// Collects the full names of `message` and its nested messages, map entries
/// excepted (prost generates no type for them).
fn collect_message_names(scope: &str, message: &DescriptorProto, out: &mut Vec<String>) {
    if message.options.as_ref().and_then(|o| o.map_entry) == Some(true) {
        return;
    }
    let full_name = format!("{scope}.{}", message.name());
    for nested in &message.nested_type {
        collect_message_names(&full_name, nested, out);
    }
    out.push(full_name);
}

fn collect_protos(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_protos(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "proto") {
            out.push(path);
        }
    }
    Ok(())
}

//! Compiles the schemas under `proto/` with protox (no system `protoc`) and
//! generates Rust types with prost-build.
//!
//! Outputs in `OUT_DIR`:
//! - one `<package>.rs` per protobuf package (prost-build naming);
//! - `file_descriptor_set.bin`: the encoded `FileDescriptorSet` of every
//!   schema plus the well-known types they import, without source info;
//! - `fields.rs`: the body of the `fields` module, one `u32` constant per
//!   field of every message (nested messages and map entries as nested
//!   modules), one module per package;
//! - `fields_table.rs`: `(full field name, constant)` for every constant of
//!   `fields.rs`, for the test that checks them against the descriptor pool.

use std::error::Error;
use std::fs;
use std::path::{Path, PathBuf};

use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorSet};

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

    let (fields, table) = field_numbers(&fds)?;
    fs::write(out_dir.join("fields.rs"), fields)?;
    fs::write(out_dir.join("fields_table.rs"), table)?;

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

/// A module of the generated `fields` tree: a package or a message.
#[derive(Default)]
struct FieldModule {
    /// Outer doc comment lines.
    doc: Vec<String>,
    /// `(constant name, number, doc lines)`, in declaration order.
    constants: Vec<(String, i32, Vec<String>)>,
    /// `(module name, module)`, in declaration order.
    children: Vec<(String, FieldModule)>,
}

impl FieldModule {
    /// The child module `name`, created with `doc` when absent.
    fn child(&mut self, name: &str, doc: impl FnOnce() -> Vec<String>) -> &mut FieldModule {
        let at = match self.children.iter().position(|(n, _)| n == name) {
            Some(at) => at,
            None => {
                let module = FieldModule {
                    doc: doc(),
                    ..FieldModule::default()
                };
                self.children.push((name.to_string(), module));
                self.children.len() - 1
            }
        };
        &mut self.children[at].1
    }

    fn render(&self, depth: usize, out: &mut String) {
        let indent = "    ".repeat(depth);
        for (name, number, doc) in &self.constants {
            for line in doc {
                out.push_str(&format!(
                    "{indent}///{}{line}\n",
                    if line.is_empty() { "" } else { " " }
                ));
            }
            out.push_str(&format!("{indent}pub const {name}: u32 = {number};\n"));
        }
        for (name, module) in &self.children {
            for line in &module.doc {
                out.push_str(&format!(
                    "{indent}///{}{line}\n",
                    if line.is_empty() { "" } else { " " }
                ));
            }
            out.push_str(&format!("{indent}pub mod {name} {{\n"));
            module.render(depth + 1, out);
            out.push_str(&format!("{indent}}}\n"));
        }
    }
}

/// The `fields` module's body and the `(full name, constant path)` table, from every message
/// of `fds` (the well-known types included).
fn field_numbers(fds: &FileDescriptorSet) -> Result<(String, String), Box<dyn Error>> {
    // Map entry types by full name (`.pkg.Msg.FooEntry`), to render map fields as maps.
    let mut map_entries = std::collections::HashMap::new();
    for file in &fds.file {
        let scope = format!(".{}", file.package());
        for message in &file.message_type {
            collect_map_entries(&scope, message, &mut map_entries);
        }
    }

    let mut root = FieldModule::default();
    let mut table = Vec::new();
    for file in &fds.file {
        let mut module = &mut root;
        let mut path = vec!["crate".to_string(), "fields".to_string()];
        let mut package = String::new();
        for part in file.package().split('.').filter(|p| !p.is_empty()) {
            package = if package.is_empty() {
                part.to_string()
            } else {
                format!("{package}.{part}")
            };
            let name = module_name(part);
            let doc = vec![format!("Package `{package}`.")];
            module = module.child(&name, || doc);
            path.push(name);
        }
        for message in &file.message_type {
            add_message(
                file.package(),
                message,
                module,
                &path,
                &map_entries,
                &mut table,
            )?;
        }
    }
    check_unique(&root, "fields")?;

    let mut fields = String::from(
        "// Generated by unbound-proto's build.rs from the schemas' descriptors. Do not edit.\n",
    );
    root.render(0, &mut fields);
    let mut rows = String::from("&[\n");
    for (full_name, path) in &table {
        let path = path.replacen("crate::", "unbound_proto::", 1);
        rows.push_str(&format!("    (\"{full_name}\", {path}),\n"));
    }
    rows.push_str("]\n");
    Ok((fields, rows))
}

fn collect_map_entries(
    scope: &str,
    message: &DescriptorProto,
    out: &mut std::collections::HashMap<String, DescriptorProto>,
) {
    let full_name = format!("{scope}.{}", message.name());
    for nested in &message.nested_type {
        collect_map_entries(&full_name, nested, out);
    }
    if message.options.as_ref().and_then(|o| o.map_entry) == Some(true) {
        out.insert(full_name, message.clone());
    }
}

/// Adds `message`'s constants and nested modules under `parent`.
fn add_message(
    scope: &str,
    message: &DescriptorProto,
    parent: &mut FieldModule,
    parent_path: &[String],
    map_entries: &std::collections::HashMap<String, DescriptorProto>,
    table: &mut Vec<(String, String)>,
) -> Result<(), Box<dyn Error>> {
    use heck::{ToShoutySnakeCase, ToSnakeCase};

    let full_name = if scope.is_empty() {
        message.name().to_string()
    } else {
        format!("{scope}.{}", message.name())
    };
    let is_map_entry = message.options.as_ref().and_then(|o| o.map_entry) == Some(true);
    let name = module_name(&message.name().to_snake_case());
    let doc = if is_map_entry {
        vec![format!("Field numbers of the map entry `{full_name}`.")]
    } else {
        vec![format!("Field numbers of `{full_name}`.")]
    };
    let module = parent.child(&name, || doc);
    let mut path = parent_path.to_vec();
    path.push(name);

    for field in &message.field {
        let constant = field.name().to_shouty_snake_case();
        let field_name = format!("{full_name}.{}", field.name());
        let mut doc = vec![format!(
            "`{field_name}`: {}.",
            field_type(field, map_entries)
        )];
        if let Some(oneof) = field
            .oneof_index
            .filter(|_| !field.proto3_optional())
            .and_then(|i| message.oneof_decl.get(i as usize))
        {
            doc[0] = format!(
                "`{field_name}`: {}, in oneof `{}`.",
                field_type(field, map_entries),
                oneof.name()
            );
        }
        module
            .constants
            .push((constant.clone(), field.number(), doc));
        table.push((field_name, format!("{}::{constant}", path.join("::"))));
    }
    for nested in &message.nested_type {
        add_message(&full_name, nested, module, &path, map_entries, table)?;
    }
    Ok(())
}

/// How a field is declared: `repeated tensorflow.NodeDef`, `map<string, tensorflow.AttrValue>`,
/// `optional int64`, `string`.
fn field_type(
    field: &FieldDescriptorProto,
    map_entries: &std::collections::HashMap<String, DescriptorProto>,
) -> String {
    let type_name = |f: &FieldDescriptorProto| match f.r#type() {
        Type::Message | Type::Enum | Type::Group => {
            format!("`{}`", f.type_name().trim_start_matches('.'))
        }
        Type::Double => "`double`".into(),
        Type::Float => "`float`".into(),
        Type::Int64 => "`int64`".into(),
        Type::Uint64 => "`uint64`".into(),
        Type::Int32 => "`int32`".into(),
        Type::Fixed64 => "`fixed64`".into(),
        Type::Fixed32 => "`fixed32`".into(),
        Type::Bool => "`bool`".into(),
        Type::String => "`string`".into(),
        Type::Bytes => "`bytes`".into(),
        Type::Uint32 => "`uint32`".into(),
        Type::Sfixed32 => "`sfixed32`".into(),
        Type::Sfixed64 => "`sfixed64`".into(),
        Type::Sint32 => "`sint32`".into(),
        Type::Sint64 => "`sint64`".into(),
    };
    if field.r#type() == Type::Message {
        if let Some(entry) = map_entries.get(field.type_name()) {
            if let [key, value] = &entry.field[..] {
                return format!("map from {} to {}", type_name(key), type_name(value));
            }
        }
    }
    match field.label() {
        Label::Repeated => format!("repeated {}", type_name(field)),
        Label::Required => format!("required {}", type_name(field)),
        Label::Optional if field.proto3_optional() => format!("optional {}", type_name(field)),
        Label::Optional => type_name(field),
    }
}

/// A module name: Rust keywords are raw identifiers, or get a `_` when they cannot be.
fn module_name(name: &str) -> String {
    const KEYWORDS: &[&str] = &[
        "as", "break", "const", "continue", "else", "enum", "extern", "false", "fn", "for", "if",
        "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
        "static", "struct", "trait", "true", "type", "unsafe", "use", "where", "while", "async",
        "await", "dyn", "abstract", "become", "box", "do", "final", "macro", "override", "priv",
        "typeof", "unsized", "virtual", "yield", "try", "gen",
    ];
    match name {
        "self" | "super" | "crate" | "Self" => format!("{name}_"),
        _ if KEYWORDS.contains(&name) => format!("r#{name}"),
        _ => name.to_string(),
    }
}

/// Refuses two constants or two modules of one name in a module (two fields or messages whose
/// names convert to the same identifier).
fn check_unique(module: &FieldModule, path: &str) -> Result<(), Box<dyn Error>> {
    let mut seen = std::collections::HashSet::new();
    for name in module
        .constants
        .iter()
        .map(|c| &c.0)
        .chain(module.children.iter().map(|c| &c.0))
    {
        if !seen.insert(name) {
            return Err(format!("two items named {name} in {path}").into());
        }
    }
    for (name, child) in &module.children {
        check_unique(child, &format!("{path}::{name}"))?;
    }
    Ok(())
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

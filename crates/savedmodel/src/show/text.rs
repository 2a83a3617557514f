//! The text form of [`SavedModelInfo`]: `saved_model_cli show --all`'s layout for what it shows
//! (tag-sets, signatures, ops, concrete functions), then what `unbound` adds.

use std::fmt::Write as _;

use super::signature::shape_text;
use super::{ArgValue, CallableInfo, MetaGraphInfo, SavedModelInfo, TensorInfoView};

/// Renders `info` as text.
pub fn render(info: &SavedModelInfo) -> String {
    let mut out = String::new();
    header(&mut out, info);
    for mg in &info.meta_graphs {
        signatures(&mut out, mg);
    }
    for mg in &info.meta_graphs {
        extras(&mut out, mg);
    }
    if let Some(ck) = &info.checkpoint {
        let _ = writeln!(
            out,
            "\nCheckpoint {} ({} shard{}, {} keys):",
            ck.prefix,
            ck.shards,
            if ck.shards == 1 { "" } else { "s" },
            ck.keys.len()
        );
        for k in &ck.keys {
            let _ = writeln!(
                out,
                "  {}: {} {} ({} bytes)",
                k.key,
                k.dtype,
                shape_text(&k.shape),
                k.bytes
            );
        }
    }
    concrete_functions(&mut out, info);
    out
}

fn header(out: &mut String, info: &SavedModelInfo) {
    let chunks = match info.chunks {
        Some(n) => format!(", {n} chunks"),
        None => String::new(),
    };
    let _ = writeln!(out, "SavedModel: {}", info.dir);
    let _ = writeln!(
        out,
        "Format: .{} ({}, {} bytes{chunks}), schema version {}",
        info.format, info.model_file, info.model_file_bytes, info.saved_model_schema_version
    );
    let _ = writeln!(
        out,
        "Variables: {} bytes in {} files",
        info.variables_bytes, info.variables_files
    );
}

/// `saved_model_cli`'s per-MetaGraph part: signatures, inputs, outputs, method names, ops.
fn signatures(out: &mut String, mg: &MetaGraphInfo) {
    let _ = writeln!(
        out,
        "\nMetaGraphDef with tag-set: '{}' contains the following SignatureDefs:",
        mg.tags.join(", ")
    );
    for (key, sig) in &mg.signatures {
        let _ = writeln!(out, "\nsignature_def['{key}']:");
        let _ = writeln!(
            out,
            "  The given SavedModel SignatureDef contains the following input(s):"
        );
        for (k, t) in &sig.inputs {
            tensor(out, "inputs", k, t);
        }
        let _ = writeln!(
            out,
            "  The given SavedModel SignatureDef contains the following output(s):"
        );
        for (k, t) in &sig.outputs {
            tensor(out, "outputs", k, t);
        }
        for (k, t) in &sig.defaults {
            let _ = writeln!(
                out,
                "  Default for input '{k}': {} {}",
                t.dtype,
                shape_text(&t.shape)
            );
        }
        let _ = writeln!(out, "  Method name is: {}", sig.method_name);
    }
    let tags: Vec<String> = mg.tags.iter().map(|t| format!("'{t}'")).collect();
    let ops: Vec<String> = mg.ops.iter().map(|o| format!("'{o}'")).collect();
    let _ = writeln!(
        out,
        "The MetaGraph with tag set [{}] contains the following ops: {{{}}}",
        tags.join(", "),
        ops.join(", ")
    );
}

fn tensor(out: &mut String, side: &str, key: &str, t: &TensorInfoView) {
    let _ = writeln!(out, "    {side}['{key}'] tensor_info:");
    let _ = writeln!(out, "        dtype: {}", t.dtype);
    let _ = writeln!(out, "        shape: {}", shape_text(&t.shape));
    let _ = writeln!(out, "        name: {}", t.name);
    if let Some([values, indices, dense_shape]) = &t.coo_sparse {
        let _ = writeln!(
            out,
            "        coo_sparse: values {values}, indices {indices}, dense_shape {dense_shape}"
        );
    }
    for (i, c) in t.components.iter().enumerate() {
        let _ = writeln!(
            out,
            "        component {i}: {} {} {}",
            c.dtype,
            shape_text(&c.shape),
            c.name
        );
    }
}

/// What `unbound` adds per MetaGraph: graph sizes, library, aliases, assets, object graph.
fn extras(out: &mut String, mg: &MetaGraphInfo) {
    let _ = writeln!(out, "\nMetaGraph [{}]:", mg.tags.join(", "));
    let _ = writeln!(
        out,
        "  TensorFlow version: {} ({}), graph producer {}",
        mg.tensorflow_version, mg.tensorflow_git_version, mg.graph_producer
    );
    let _ = writeln!(
        out,
        "  Graph: {} nodes; library: {} functions, {} nodes",
        mg.graph_nodes,
        mg.library_functions.len(),
        mg.library_function_nodes
    );
    list(out, "Library functions", &mg.library_functions);
    if !mg.function_aliases.is_empty() {
        let _ = writeln!(out, "  Function aliases:");
        for (alias, f) in &mg.function_aliases {
            let _ = writeln!(out, "    {alias}: {f}");
        }
    }
    if !mg.assets.is_empty() {
        let _ = writeln!(out, "  Assets:");
        for a in &mg.assets {
            let _ = writeln!(out, "    {} ({})", a.filename, a.tensor_name);
        }
    }
    list(out, "Collections", &mg.collections);
    let Some(og) = &mg.object_graph else {
        return;
    };
    let _ = writeln!(out, "  Object graph: {} nodes", og.nodes);
    if !og.concrete_functions.is_empty() {
        let _ = writeln!(out, "  Concrete functions (object graph):");
        for f in &og.concrete_functions {
            let _ = writeln!(out, "    {} ({} bound inputs)", f.name, f.bound_inputs);
        }
    }
    if !og.variables.is_empty() {
        let _ = writeln!(out, "  Variables:");
        for v in &og.variables {
            let key = match &v.checkpoint_key {
                Some(k) => format!(", checkpoint key {k}"),
                None => String::new(),
            };
            let _ = writeln!(
                out,
                "    {}: {} {}{}{key}",
                v.path,
                v.dtype,
                shape_text(&v.shape),
                if v.trainable { "" } else { " (not trainable)" }
            );
        }
    }
}

fn list(out: &mut String, title: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(out, "  {title}:");
    for i in items {
        let _ = writeln!(out, "    {i}");
    }
}

/// `saved_model_cli`'s "Concrete Functions" section (functions of the root object).
fn concrete_functions(out: &mut String, info: &SavedModelInfo) {
    let functions: Vec<_> = info
        .meta_graphs
        .iter()
        .filter_map(|mg| mg.object_graph.as_ref())
        .flat_map(|og| og.functions.iter())
        .collect();
    if info.meta_graphs.iter().all(|mg| mg.object_graph.is_none()) {
        return;
    }
    out.push_str("\nConcrete Functions:");
    if functions.is_empty() {
        out.push('\n');
    }
    for f in functions {
        let _ = write!(out, "\n  Function Name: '{}'\n", f.name);
        for (i, c) in f.concrete_functions.iter().enumerate() {
            callable(out, i + 1, c);
        }
    }
}

fn callable(out: &mut String, option: usize, c: &CallableInfo) {
    if !c.args.is_empty() {
        let _ = writeln!(out, "    Option #{option}");
        let _ = writeln!(out, "      Callable with:");
        for (i, a) in c.args.iter().enumerate() {
            let _ = writeln!(out, "        Argument #{}", i + 1);
            arg(out, a);
        }
    }
    for (i, name) in c.kwargs.keys().enumerate() {
        // saved_model_cli iterates the keyword dict, which yields the names only.
        let _ = writeln!(out, "        Named Argument #{}", i + 1);
        let _ = writeln!(out, "          {name}");
    }
}

fn arg(out: &mut String, a: &ArgValue) {
    match a {
        ArgValue::TensorSpec { name, text, .. } => {
            let _ = writeln!(
                out,
                "          {}: {text}",
                name.as_deref().unwrap_or("None")
            );
        }
        ArgValue::Value { r#type, value } if r#type == "str" => {
            let _ = writeln!(out, "          {value}");
        }
        ArgValue::Value { r#type, value } => {
            let _ = writeln!(out, "          DType: {}", r#type);
            let _ = writeln!(out, "          Value: {value}");
        }
    }
}

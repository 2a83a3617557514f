//! Reading the program of a SavedModel signature through `unbound-savedmodel`.

use std::collections::HashMap;
use std::path::Path;

use prost::Message;
use unbound_graph::OpLibrary;
use unbound_proto::tensorflow::saved_object::Kind;
use unbound_proto::tensorflow::tensor_info::Encoding;
use unbound_proto::tensorflow::{SavedObjectGraph, TensorInfo};
use unbound_savedmodel::show::saved_object_paths;
use unbound_savedmodel::{ModelFormat, SavedModel};

use crate::attrs;
use crate::error::{PlanError, Result};
use crate::lite::{MetaGraphDef, SavedModel as SavedModelProto};
use crate::program::{Builder, Program, Value};

/// A signature's program with its inputs and outputs.
pub struct Signature {
    /// The program.
    pub program: Program,
    /// The signature's name.
    pub name: String,
}

fn model_err(dir: &Path, fault: impl Into<String>) -> PlanError {
    PlanError::Model {
        dir: dir.to_path_buf(),
        fault: fault.into(),
    }
}

/// The index of the MetaGraphDef with tag-set `tags` (comma-separated), else the only one,
/// else the one tagged `serve`.
fn pick_meta(dir: &Path, model: &SavedModelProto, tags: Option<&str>) -> Result<usize> {
    let tags_of = |m: &MetaGraphDef| -> Vec<String> {
        let mut t = m
            .meta_info_def
            .as_ref()
            .map(|i| i.tags.clone())
            .unwrap_or_default();
        t.sort();
        t
    };
    let want: Option<Vec<String>> = tags.map(|t| {
        let mut v: Vec<String> = t.split(',').map(|s| s.trim().to_string()).collect();
        v.sort();
        v
    });
    let found = match &want {
        Some(w) => model.meta_graphs.iter().position(|m| tags_of(m) == *w),
        None if model.meta_graphs.len() == 1 => Some(0),
        None => model
            .meta_graphs
            .iter()
            .position(|m| tags_of(m) == ["serve".to_string()]),
    };
    found.ok_or_else(|| {
        let all: Vec<String> = model
            .meta_graphs
            .iter()
            .map(|m| tags_of(m).join(","))
            .collect();
        model_err(
            dir,
            format!(
                "no MetaGraphDef with tags {:?} (the model has: {})",
                tags.unwrap_or("serve"),
                all.join("; ")
            ),
        )
    })
}

fn tensor_name(info: &TensorInfo) -> Option<&str> {
    match &info.encoding {
        Some(Encoding::Name(n)) => Some(n),
        _ => None,
    }
}

/// Reads signature `signature` of the model in `dir` and builds its program. `pins` fixes
/// dynamic dimensions of inputs (by input name).
pub fn load(
    dir: &Path,
    tags: Option<&str>,
    signature: &str,
    pins: &HashMap<String, Vec<i64>>,
) -> Result<Signature> {
    let opened = SavedModel::open(dir)?;
    // A .pb is decoded from its mapping; a .cpb is merged (and a .pbtxt parsed) first.
    let bytes = match opened.format() {
        ModelFormat::Pb => opened.data()?,
        _ => opened
            .read()?
            .message
            .to_vec()
            .map_err(|e| model_err(dir, format!("cannot re-encode the model: {e}")))?
            .into(),
    };
    let mut model = SavedModelProto::decode(bytes.clone())
        .map_err(|e| model_err(dir, format!("cannot decode the SavedModel: {e}")))?;
    drop(bytes);
    let index = pick_meta(dir, &model, tags)?;
    let mut meta = model.meta_graphs.swap_remove(index);
    drop(model);
    let sig = meta.signature_def.get(signature).ok_or_else(|| {
        let names: Vec<&String> = meta.signature_def.keys().collect();
        model_err(
            dir,
            format!("no signature {signature:?} (the model has: {names:?})"),
        )
    })?;
    for name in pins.keys() {
        if !sig.inputs.contains_key(name) {
            return Err(PlanError::Argument {
                fault: format!("--shape {name}=...: the signature has no input {name:?}"),
            });
        }
    }
    let mut graph = meta.graph_def.take().unwrap_or_default();
    let library = graph.library.take().unwrap_or_default();
    let ops = OpLibrary::new(
        None,
        meta.meta_info_def
            .as_ref()
            .and_then(|i| i.stripped_op_list.as_ref()),
    );
    let objects = meta.object_graph_def.take();
    let mut program = Program::default();
    let mut builder = Builder::new(&mut program, library.function, &ops)
        .with_captures(objects.as_ref().map(captures).unwrap_or_default());
    let mut feeds = HashMap::new();
    for (name, info) in &sig.inputs {
        let t = tensor_name(info)
            .ok_or_else(|| model_err(dir, format!("input {name:?} is not a dense tensor")))?;
        let mut shape = info.tensor_shape.as_ref().and_then(attrs::dims);
        if let Some(pin) = pins.get(name) {
            match &mut shape {
                Some(s) if s.len() == pin.len() => {
                    for (d, &p) in s.iter_mut().zip(pin) {
                        if *d >= 0 && *d != p {
                            return Err(PlanError::Argument {
                                fault: format!(
                                    "--shape {name}: dimension {d} of the signature is pinned to {p}"
                                ),
                            });
                        }
                        *d = p;
                    }
                }
                Some(s) => {
                    return Err(PlanError::Argument {
                        fault: format!(
                            "--shape {name}: {} dimensions given, the input has {}",
                            pin.len(),
                            s.len()
                        ),
                    })
                }
                None => shape = Some(pin.clone()),
            }
        }
        let v = program.values.len();
        program.values.push(Value {
            shape,
            dtype: info.dtype,
            ..Value::default()
        });
        program.inputs.push((name.clone(), v));
        let node = t.rsplit_once(':').map_or(t, |(n, _)| n);
        feeds.insert(node.to_string(), v);
    }
    let mut fetch = Vec::new();
    let mut out_names = Vec::new();
    for (name, info) in &sig.outputs {
        let t = tensor_name(info)
            .ok_or_else(|| model_err(dir, format!("output {name:?} is not a dense tensor")))?;
        fetch.push(t.to_string());
        out_names.push(name.clone());
    }
    let values = builder
        .add_main(&mut program, graph.node, &feeds, &fetch)
        .map_err(|e| model_err(dir, e))?;
    program.outputs = out_names.into_iter().zip(values).collect();
    if let Some(og) = &objects {
        name_objects(&mut program, og);
    }
    Ok(Signature {
        program,
        name: signature.to_string(),
    })
}

/// The captures of each concrete function of the object graph: its name and the nodes of its
/// bound inputs, in order (the function's trailing arguments). Negative ids are dropped with
/// the whole function: its captures could not be placed.
fn captures(og: &SavedObjectGraph) -> HashMap<String, Vec<usize>> {
    og.concrete_functions
        .iter()
        .filter(|(_, f)| !f.bound_inputs.is_empty())
        .filter_map(|(name, f)| {
            let ids: Option<Vec<usize>> = f
                .bound_inputs
                .iter()
                .map(|&i| usize::try_from(i).ok())
                .collect();
            Some((name.clone(), ids?))
        })
        .collect()
}

/// Gives each captured variable of `program` its object path: the path of its object when
/// that is a variable node (`SavedVariable`) the root reaches.
fn name_objects(program: &mut Program, og: &SavedObjectGraph) {
    let paths = saved_object_paths(og);
    for var in &mut program.variables {
        let Some(o) = var.object else { continue };
        let is_variable = matches!(
            og.nodes.get(o).and_then(|n| n.kind.as_ref()),
            Some(Kind::Variable(_))
        );
        if is_variable {
            var.path = paths.get(o).cloned().flatten();
        }
    }
}

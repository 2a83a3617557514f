//! The TPU rewrite of one graph: for each chosen function, a replicate wrapper (and a host
//! function when needed) is added to the library, and every call site of the function (a
//! `StatefulPartitionedCall` or `PartitionedCall` in the graph or in any function of the
//! library) is rewritten:
//!
//! - inside a function, it becomes a `TPUPartitionedCall` of the wrapper fed by a new
//!   `TPUOrdinalSelector` as its last input;
//! - in the top-level graph, it stays a `StatefulPartitionedCall`, of a host function that
//!   holds the selector and the `TPUPartitionedCall` (the layout the TPU Inference Converter
//!   emits). Measured with TensorFlow 2.21: a `TPUOrdinalSelector` in the top-level graph
//!   makes the TF1 loader fail when it places the graph to restore the variables, before any
//!   signature is run, since a CPU build has no kernel for it; inside a function it is only
//!   looked up when the function runs;
//! - with batching, anywhere, it becomes a `BatchFunction` of a host function taking the
//!   tensor arguments, then the resources (`Tcaptured`).
//!
//! The original functions stay as they are (the wrapper calls them), so the CPU MetaGraphDef
//! sharing nothing but unchanged bytes with this one keeps working.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use serde::Serialize;
use unbound_proto::tensorflow::{FunctionDef, NodeDef};

use crate::attrs::{self, data_input_count, function_name, referenced_functions, unique_name};
use crate::error::{Result, TpuError};
use crate::model::Graph;
use crate::options::{BatchOptions, TpuOptions};
use crate::wrapper::{self, batch_order, Callee};

/// What the rewrite did for one chosen function.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct RewrittenFunction {
    /// The chosen function.
    pub function: String,
    /// The replicate wrapper added for it.
    pub wrapper: String,
    /// The host function added for its top-level call sites (selector and
    /// `TPUPartitionedCall`), when it has some and is not batched.
    pub host_function: Option<String>,
    /// The batch function added for it, when batched.
    pub batch_function: Option<String>,
    /// The `_tpu_replicate` cluster name.
    pub cluster: String,
    /// The call sites rewritten.
    pub call_sites: Vec<CallSite>,
}

/// One rewritten call site.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct CallSite {
    /// `graph/NODE` or `FUNCTION/NODE`.
    pub at: String,
    /// The node's op now.
    pub op: String,
    /// The function it calls now.
    pub calls: String,
}

/// How one chosen function is to be rewritten.
struct Target {
    wrapper: String,
    host: Option<String>,
    batch: Option<(String, BatchOptions)>,
    /// `BatchFunction` argument order, and how many of them are batched.
    order: Vec<usize>,
    batched: usize,
    tin: Vec<i32>,
    tout: Vec<i32>,
}

/// Rewrites `graph` so that each function of `chosen` runs on TPU. `batch` maps a chosen
/// function to its batching options; `captures` a function to its number of captured
/// (trailing) arguments, where the object graph says.
pub fn rewrite_for_tpu(
    dir: &Path,
    graph: &mut Graph,
    chosen: &[String],
    options: &TpuOptions,
    batch: &HashMap<String, BatchOptions>,
    captures: &HashMap<String, usize>,
) -> Result<Vec<RewrittenFunction>> {
    let unsupported = |fault: String| TpuError::Unsupported {
        dir: dir.to_path_buf(),
        fault,
    };
    let index: HashMap<String, usize> = graph
        .functions
        .iter()
        .enumerate()
        .map(|(i, f)| (function_name(f).to_string(), i))
        .collect();
    check_not_nested(&graph.functions, &index, chosen).map_err(unsupported)?;

    let mut taken: HashSet<String> = index.keys().cloned().collect();
    let mut targets = HashMap::new();
    let mut reports = Vec::new();
    let original_functions = graph.functions.len();
    for name in chosen {
        let function = &graph.functions[index[name]];
        let (tin, tout) = attrs::signature_types(function).ok_or_else(|| {
            unsupported(format!(
                "function {name} has arguments typed by attributes (a polymorphic function); \
                 only concrete functions can be rewritten"
            ))
        })?;
        let callee = Callee {
            function,
            tin: tin.clone(),
            tout: tout.clone(),
        };
        let wrapper_name = unique_name(&format!("{name}_tpu"), &mut taken);
        let cluster = if options.shared_cluster_name {
            "cluster".to_string()
        } else {
            format!("cluster_{wrapper_name}")
        };
        let wrapper_fn = wrapper::replicate_wrapper(&callee, &wrapper_name, &cluster, options);
        let top_level = graph.nodes.iter().any(|n| {
            (n.op == "StatefulPartitionedCall" || n.op == "PartitionedCall")
                && n.attr.get("f").and_then(attrs::func_name) == Some(name.as_str())
        });
        let host_fn = (top_level && !batch.contains_key(name)).then(|| {
            let host_name = unique_name(&format!("{name}_tpu_call"), &mut taken);
            let order: Vec<usize> = (0..tin.len()).collect();
            let f = wrapper::host_function(&callee, &host_name, &wrapper_name, &order);
            (host_name, f)
        });
        let batched_args =
            wrapper::batched_args(function, &tin, captures.get(name).copied().unwrap_or(0));
        let order = batch_order(&batched_args);
        let batched = batched_args.iter().filter(|b| **b).count();
        let batch_fn = match batch.get(name) {
            None => None,
            Some(b) => {
                if batched == 0 || tout.is_empty() {
                    return Err(unsupported(format!(
                        "function {name} cannot be batched: BatchFunction needs at least one \
                         argument with a batch dimension and one result"
                    )));
                }
                let batch_name = unique_name(&format!("{name}_tpu_batch"), &mut taken);
                let f = wrapper::host_function(&callee, &batch_name, &wrapper_name, &order);
                Some((batch_name, b.clone(), f))
            }
        };
        graph.functions.push(wrapper_fn);
        let host = host_fn.map(|(host_name, f)| {
            graph.functions.push(f);
            host_name
        });
        let mut batch_target = None;
        if let Some((batch_name, b, f)) = batch_fn {
            graph.functions.push(f);
            batch_target = Some((batch_name, b));
        }
        reports.push(RewrittenFunction {
            function: name.clone(),
            wrapper: wrapper_name.clone(),
            host_function: host.clone(),
            batch_function: batch_target.as_ref().map(|(n, _)| n.clone()),
            cluster,
            call_sites: Vec::new(),
        });
        targets.insert(
            name.clone(),
            Target {
                wrapper: wrapper_name,
                host,
                batch: batch_target,
                order,
                batched,
                tin,
                tout,
            },
        );
    }

    let mut sites: BTreeMap<String, Vec<CallSite>> = BTreeMap::new();
    let node_count = graph.nodes.len();
    let mut changed = Vec::new();
    let mut names: HashSet<String> = graph.nodes.iter().map(|n| n.name.clone()).collect();
    let mut added = Vec::new();
    for i in 0..node_count {
        let node = &mut graph.nodes[i];
        if let Some(callee) =
            rewrite_call(node, false, &targets, &mut names, &mut added).map_err(unsupported)?
        {
            sites
                .entry(callee)
                .or_default()
                .push(call_site("graph", node));
            changed.push(i);
        }
    }
    for i in changed {
        graph.touch_node(i);
    }
    graph.nodes.extend(added);

    for f in 0..original_functions {
        let function = &mut graph.functions[f];
        let scope = function_name(function).to_string();
        let mut names: HashSet<String> = function.node_def.iter().map(|n| n.name.clone()).collect();
        if let Some(sig) = &function.signature {
            names.extend(sig.input_arg.iter().map(|a| a.name.clone()));
        }
        let mut added = Vec::new();
        let mut renamed = Vec::new();
        let mut touched = false;
        for node in function.node_def.iter_mut() {
            if let Some(callee) =
                rewrite_call(node, true, &targets, &mut names, &mut added).map_err(unsupported)?
            {
                sites
                    .entry(callee.clone())
                    .or_default()
                    .push(call_site(&scope, node));
                if node.op == "BatchFunction" {
                    renamed.push(node.name.clone());
                }
                touched = true;
            }
        }
        function.node_def.extend(added);
        for node_name in renamed {
            rename_output_arg(function, &node_name, "output", "out_tensors");
        }
        if touched {
            graph.touch_function(f);
        }
    }

    for report in &mut reports {
        report.call_sites = sites.remove(&report.function).unwrap_or_default();
        if report.call_sites.is_empty() {
            return Err(unsupported(format!(
                "function {} is never called by a StatefulPartitionedCall or PartitionedCall \
                 node: there is no call site to run on TPU",
                report.function
            )));
        }
    }
    Ok(reports)
}

fn call_site(scope: &str, node: &NodeDef) -> CallSite {
    CallSite {
        at: format!("{scope}/{}", node.name),
        op: node.op.clone(),
        calls: node
            .attr
            .get("f")
            .and_then(attrs::func_name)
            .unwrap_or_default()
            .to_string(),
    }
}

/// Rewrites `node` when it calls a target; returns the callee's name then. New selector nodes
/// go to `added`.
fn rewrite_call(
    node: &mut NodeDef,
    in_function: bool,
    targets: &HashMap<String, Target>,
    names: &mut HashSet<String>,
    added: &mut Vec<NodeDef>,
) -> std::result::Result<Option<String>, String> {
    if node.op != "StatefulPartitionedCall" && node.op != "PartitionedCall" {
        return Ok(None);
    }
    let Some(callee) = node
        .attr
        .get("f")
        .and_then(attrs::func_name)
        .map(str::to_string)
    else {
        return Ok(None);
    };
    let Some(target) = targets.get(&callee) else {
        return Ok(None);
    };
    let data = data_input_count(node);
    let (tin, tout) = (
        attrs::get_types(node, "Tin"),
        attrs::get_types(node, "Tout"),
    );
    if tin != target.tin || tout != target.tout || data != target.tin.len() {
        return Err(format!(
            "call site {} of {callee} does not match its signature (Tin {tin:?}, Tout {tout:?}, \
             {data} data inputs; the function takes {:?} and returns {:?})",
            node.name, target.tin, target.tout
        ));
    }
    match (&target.batch, &target.host) {
        (None, Some(host)) if !in_function => {
            node.op = "StatefulPartitionedCall".to_string();
            node.attr.insert("f".into(), attrs::func(host));
            for attr in attrs::PARTITIONED_CALL_ONLY {
                node.attr
                    .entry(attr.to_string())
                    .or_insert_with(|| attrs::s(""));
            }
        }
        (None, _) => {
            node.op = "TPUPartitionedCall".to_string();
            for attr in attrs::PARTITIONED_CALL_ONLY {
                node.attr.remove(attr);
            }
            node.attr.insert("f".into(), attrs::func(&target.wrapper));
            node.attr.insert("autotuner_thresh".into(), attrs::i(0));
            let selector = unique_name(&format!("{}/TPUOrdinalSelector", node.name), names);
            node.input.insert(
                data,
                attrs::output_ref(in_function, &selector, "device_ordinals", 0),
            );
            added.push(NodeDef {
                name: selector,
                op: "TPUOrdinalSelector".to_string(),
                device: node.device.clone(),
                ..NodeDef::default()
            });
        }
        (Some((batch_fn, b)), _) => {
            let controls = node.input.split_off(data);
            let old = std::mem::take(&mut node.input);
            node.input = target.order.iter().map(|&i| old[i].clone()).collect();
            node.input.extend(controls);
            let types: Vec<i32> = target.order.iter().map(|&i| target.tin[i]).collect();
            let (tin, captured) = types.split_at(target.batched);
            node.op = "BatchFunction".to_string();
            node.attr
                .retain(|k, _| k.starts_with('_') && k != "_read_only_resource_inputs");
            for (k, v) in batch_attrs(batch_fn, b, tin, captured, &target.tout) {
                node.attr.insert(k.to_string(), v);
            }
        }
    }
    Ok(Some(callee))
}

/// `BatchFunction`'s attributes: the options asked for, the OpDef's defaults for the rest.
pub fn batch_attrs(
    f: &str,
    b: &BatchOptions,
    tin: &[i32],
    captured: &[i32],
    tout: &[i32],
) -> Vec<(&'static str, unbound_proto::tensorflow::AttrValue)> {
    vec![
        ("f", attrs::func(f)),
        ("num_batch_threads", attrs::i(b.num_batch_threads)),
        ("max_batch_size", attrs::i(b.max_batch_size)),
        ("batch_timeout_micros", attrs::i(b.batch_timeout_micros)),
        ("max_enqueued_batches", attrs::i(b.max_enqueued_batches)),
        ("allowed_batch_sizes", attrs::ints(&b.allowed_batch_sizes)),
        ("container", attrs::s("")),
        ("shared_name", attrs::s("")),
        ("batching_queue", attrs::s("")),
        ("low_priority_max_batch_size", attrs::i(0)),
        ("low_priority_batch_timeout_micros", attrs::i(0)),
        ("low_priority_allowed_batch_sizes", attrs::ints(&[])),
        ("low_priority_max_enqueued_batches", attrs::i(0)),
        (
            "mixed_priority_policy",
            attrs::s("low_priority_padding_with_max_batch_size"),
        ),
        ("batch_padding_policy", attrs::s("PAD_UP")),
        ("Tin", attrs::types(tin)),
        ("Tcaptured", attrs::types(captured)),
        ("Tout", attrs::types(tout)),
        (
            "enable_large_batch_splitting",
            attrs::b(b.enable_large_batch_splitting),
        ),
    ]
}

/// Inside `function`, references `node:old:k` become `node:new:k` (node inputs and returns).
pub fn rename_output_arg(function: &mut FunctionDef, node: &str, old: &str, new: &str) {
    let from = format!("{node}:{old}:");
    let to = format!("{node}:{new}:");
    let fix = |s: &mut String| {
        if let Some(rest) = s.strip_prefix(&from) {
            *s = format!("{to}{rest}");
        }
    };
    for n in function.node_def.iter_mut() {
        n.input.iter_mut().for_each(fix);
    }
    function.ret.values_mut().for_each(fix);
}

/// Refuses chosen functions that reach another chosen function or themselves: TensorFlow
/// refuses nested TPU computations, and a function that calls itself never finishes loading.
fn check_not_nested(
    functions: &[FunctionDef],
    index: &HashMap<String, usize>,
    chosen: &[String],
) -> std::result::Result<(), String> {
    let chosen_set: BTreeSet<&str> = chosen.iter().map(String::as_str).collect();
    for name in chosen {
        let mut seen = BTreeSet::new();
        let mut stack = vec![name.as_str()];
        while let Some(f) = stack.pop() {
            let Some(&i) = index.get(f) else { continue };
            for node in &functions[i].node_def {
                let mut refs = vec![node.op.as_str()];
                for v in node.attr.values() {
                    referenced_functions(v, &mut refs);
                }
                for r in refs {
                    if !index.contains_key(r) {
                        continue;
                    }
                    if r == name {
                        return Err(format!("function {name} calls itself (through {f})"));
                    }
                    if chosen_set.contains(r) {
                        return Err(format!(
                            "function {r} is called from function {name}, and both are chosen: \
                             TPU computations cannot be nested"
                        ));
                    }
                    if seen.insert(r) {
                        stack.push(r);
                    }
                }
            }
        }
    }
    Ok(())
}

//! The new functions of a TPU export: the replicate wrapper laid out exactly as `tpu.rewrite`
//! lays out a one-replica computation inside a `tf.function`, and the batch function that
//! `BatchFunction` calls (ordinal selector plus `TPUPartitionedCall`).
//!
//! The wrapper of function `F`, in order (names as `tpu.rewrite` gives them):
//!
//! 1. `input{i}`: `TPUReplicatedInput(N=1)` of each non-resource argument (outside the cluster);
//! 2. `{cluster}/pivot`: `NoOp` with `_pivot_for_cluster`;
//! 3. `TPUReplicateMetadata` (`num_replicas=1` and the options), control input from the pivot;
//! 4. `replicated_input_{i}`: `Identity` with `_tpu_input_identity`, after the metadata;
//! 5. `StatefulPartitionedCall` of `F`; resource arguments go in as they are (the variables
//!    stay host-side and are never read in the wrapper);
//! 6. `Identity_{j}` per output with `_tpu_output_identity` on `TPU_REPLICATED_CORE`;
//! 7. `TPUCompilationResult` with `_tpu_compilation_status`, after the metadata;
//! 8. `output{j}`: `TPUReplicatedOutput(num_replicas=1)`, then `output_{j}_shard_0`: `Identity`,
//!    which the function returns.
//!
//! Nodes 3 to 6 carry `_tpu_replicate=cluster`.

use std::collections::{BTreeMap, HashSet};

use unbound_proto::tensorflow::{AttrValue, FunctionDef, NodeDef, OpDef};

use crate::attrs::{self, unique_name};
use crate::options::TpuOptions;

/// What building a wrapper needs to know about the function it wraps.
pub struct Callee<'a> {
    /// The function.
    pub function: &'a FunctionDef,
    /// Its argument types.
    pub tin: Vec<i32>,
    /// Its result types.
    pub tout: Vec<i32>,
}

/// The replicate wrapper `name` of `callee` in cluster `cluster`.
pub fn replicate_wrapper(
    callee: &Callee,
    name: &str,
    cluster: &str,
    options: &TpuOptions,
) -> FunctionDef {
    let sig = callee.function.signature.clone().unwrap_or_default();
    let mut taken: HashSet<String> = sig
        .input_arg
        .iter()
        .chain(&sig.output_arg)
        .map(|a| a.name.clone())
        .collect();
    let mut nodes = Vec::new();
    let in_cluster = |node: &mut NodeDef| {
        node.attr
            .insert(attrs::TPU_REPLICATE.into(), attrs::s(cluster));
    };

    // 1. Fan-in.
    let mut replicated = BTreeMap::new();
    let mut n = 0;
    for (arg, &dtype) in sig.input_arg.iter().zip(&callee.tin) {
        if attrs::is_resource(dtype) {
            continue;
        }
        let node = node(
            unique_name(&format!("input{n}"), &mut taken),
            "TPUReplicatedInput",
            vec![arg.name.clone()],
            [
                ("N", attrs::i(1)),
                ("T", attrs::ty(dtype)),
                ("index", attrs::i(-1)),
                ("is_mirrored_variable", attrs::b(false)),
                ("is_packed", attrs::b(false)),
            ],
        );
        replicated.insert(arg.name.clone(), (n, node.name.clone()));
        nodes.push(node);
        n += 1;
    }

    // 2-3. Pivot and metadata.
    let pivot = node(
        unique_name(&format!("{cluster}/pivot"), &mut taken),
        "NoOp",
        vec![],
        [(attrs::PIVOT_FOR_CLUSTER, attrs::s(cluster))],
    );
    let mut metadata = node_from(
        unique_name("TPUReplicateMetadata", &mut taken),
        "TPUReplicateMetadata",
        vec![format!("^{}", pivot.name)],
        metadata_attrs(options),
    );
    in_cluster(&mut metadata);
    let after_metadata = format!("^{}", metadata.name);
    nodes.push(pivot);
    nodes.push(metadata);

    // 4. Input identities.
    let mut call_inputs = Vec::new();
    for (arg, &dtype) in sig.input_arg.iter().zip(&callee.tin) {
        match replicated.get(&arg.name) {
            None => call_inputs.push(arg.name.clone()),
            Some((i, fan_in)) => {
                let mut identity = node(
                    unique_name(&format!("replicated_input_{i}"), &mut taken),
                    "Identity",
                    vec![format!("{fan_in}:output:0"), after_metadata.clone()],
                    [
                        ("T", attrs::ty(dtype)),
                        (attrs::TPU_INPUT_IDENTITY, attrs::b(true)),
                    ],
                );
                in_cluster(&mut identity);
                call_inputs.push(format!("{}:output:0", identity.name));
                nodes.push(identity);
            }
        }
    }

    // 5. The computation.
    call_inputs.push(after_metadata.clone());
    let mut call = node(
        unique_name("StatefulPartitionedCall", &mut taken),
        "StatefulPartitionedCall",
        call_inputs,
        [
            ("f", attrs::func(attrs::function_name(callee.function))),
            ("Tin", attrs::types(&callee.tin)),
            ("Tout", attrs::types(&callee.tout)),
            ("config", attrs::s("")),
            ("config_proto", attrs::s("")),
            ("executor_type", attrs::s("")),
        ],
    );
    in_cluster(&mut call);
    let call_name = call.name.clone();
    nodes.push(call);

    // 6-8. Output identities, compilation result, fan-out.
    let mut outputs = Vec::new();
    for (j, &dtype) in callee.tout.iter().enumerate() {
        let mut identity = node(
            unique_name(&format!("Identity_{j}"), &mut taken),
            "Identity",
            vec![format!("{call_name}:output:{j}")],
            [
                ("T", attrs::ty(dtype)),
                (attrs::TPU_OUTPUT_IDENTITY, attrs::b(true)),
            ],
        );
        if !options.use_spmd_for_xla_partitioning {
            identity.device = attrs::TPU_REPLICATED_CORE.to_string();
        }
        in_cluster(&mut identity);
        outputs.push(identity);
    }
    let compilation = node(
        unique_name("TPUCompilationResult", &mut taken),
        "TPUCompilationResult",
        vec![after_metadata],
        [(attrs::TPU_COMPILATION_STATUS, attrs::s(cluster))],
    );
    let mut ret = BTreeMap::new();
    let mut tail = Vec::new();
    for ((j, &dtype), identity) in callee.tout.iter().enumerate().zip(&outputs) {
        let fan_out = node(
            unique_name(&format!("output{j}"), &mut taken),
            "TPUReplicatedOutput",
            vec![format!("{}:output:0", identity.name)],
            [("num_replicas", attrs::i(1)), ("T", attrs::ty(dtype))],
        );
        let shard = node(
            unique_name(&format!("output_{j}_shard_0"), &mut taken),
            "Identity",
            vec![format!("{}:outputs:0", fan_out.name)],
            [("T", attrs::ty(dtype))],
        );
        if let Some(out) = sig.output_arg.get(j) {
            ret.insert(out.name.clone(), format!("{}:output:0", shard.name));
        }
        tail.push(fan_out);
        tail.push(shard);
    }
    nodes.extend(outputs);
    nodes.push(compilation);
    nodes.extend(tail);

    let mut control_ret = BTreeMap::new();
    let mut signature = OpDef {
        name: name.to_string(),
        input_arg: sig.input_arg.clone(),
        output_arg: sig.output_arg.clone(),
        is_stateful: true,
        ..OpDef::default()
    };
    if callee.tout.is_empty() {
        // Nothing to return: make the call a control output so it still runs.
        control_ret.insert(call_name.clone(), call_name.clone());
        signature.control_output.push(call_name);
    }
    FunctionDef {
        signature: Some(signature),
        node_def: nodes,
        ret,
        control_ret,
        arg_attr: callee.function.arg_attr.clone(),
        ..FunctionDef::default()
    }
}

/// A host function that calls `wrapper` through `TPUPartitionedCall` with a fresh
/// `TPUOrdinalSelector` as the ordinal (arguments in the callee's order). Its own arguments
/// are the callee's in `order`: for the function `BatchFunction` calls, the batched ones
/// (`in_tensors`) first, then the others (`captured_tensors`), see [`batch_order`].
pub fn host_function(callee: &Callee, name: &str, wrapper: &str, order: &[usize]) -> FunctionDef {
    let sig = callee.function.signature.clone().unwrap_or_default();
    let mut taken: HashSet<String> = sig
        .input_arg
        .iter()
        .chain(&sig.output_arg)
        .map(|a| a.name.clone())
        .collect();
    let input_arg = order.iter().map(|&i| sig.input_arg[i].clone()).collect();
    let arg_attr = order
        .iter()
        .enumerate()
        .filter_map(|(new, old)| {
            callee
                .function
                .arg_attr
                .get(&(*old as u32))
                .map(|a| (new as u32, a.clone()))
        })
        .collect();
    let selector = node(
        unique_name("TPUOrdinalSelector", &mut taken),
        "TPUOrdinalSelector",
        vec![],
        [],
    );
    let mut inputs: Vec<String> = sig.input_arg.iter().map(|a| a.name.clone()).collect();
    inputs.push(format!("{}:device_ordinals:0", selector.name));
    let call = node(
        unique_name("TPUPartitionedCall", &mut taken),
        "TPUPartitionedCall",
        inputs,
        [
            ("f", attrs::func(wrapper)),
            ("Tin", attrs::types(&callee.tin)),
            ("Tout", attrs::types(&callee.tout)),
            ("autotuner_thresh", attrs::i(0)),
        ],
    );
    let ret = sig
        .output_arg
        .iter()
        .enumerate()
        .map(|(j, out)| (out.name.clone(), format!("{}:output:{j}", call.name)))
        .collect();
    FunctionDef {
        signature: Some(OpDef {
            name: name.to_string(),
            input_arg,
            output_arg: sig.output_arg.clone(),
            is_stateful: true,
            ..OpDef::default()
        }),
        node_def: vec![selector, call],
        ret,
        arg_attr,
        ..FunctionDef::default()
    }
}

/// Which arguments of `function` `BatchFunction` batches (concatenates along dimension 0):
/// not resources, not the trailing `captured` ones (TensorFlow's captured inputs, known from
/// the object graph's `bound_inputs`), and not those whose recorded shape
/// (`_output_shapes` in `arg_attr`) is a scalar or has a known first dimension (a captured
/// constant, say). Arguments of unknown shape or unknown first dimension are batched.
pub fn batched_args(function: &FunctionDef, tin: &[i32], captured: usize) -> Vec<bool> {
    let first_captured = tin.len().saturating_sub(captured);
    (0..tin.len())
        .map(|i| {
            if attrs::is_resource(tin[i]) || i >= first_captured {
                return false;
            }
            let shape = function
                .arg_attr
                .get(&(i as u32))
                .and_then(|a| a.attr.get("_output_shapes"))
                .and_then(|v| match &v.value {
                    Some(unbound_proto::tensorflow::attr_value::Value::List(l)) => {
                        l.shape.first().cloned()
                    }
                    _ => None,
                });
            match shape {
                None => true,
                Some(s) if s.unknown_rank => true,
                Some(s) => s.dim.first().is_some_and(|d| d.size < 0),
            }
        })
        .collect()
}

/// The argument indices in `BatchFunction` order: the batched ones, then the others.
pub fn batch_order(batched: &[bool]) -> Vec<usize> {
    let (mut data, captured): (Vec<usize>, Vec<usize>) =
        (0..batched.len()).partition(|&i| batched[i]);
    data.extend(captured);
    data
}

/// `TPUReplicateMetadata`'s attributes for one replica.
fn metadata_attrs(options: &TpuOptions) -> Vec<(&'static str, AttrValue)> {
    let mut out = vec![
        ("num_replicas", attrs::i(1)),
        (
            "num_cores_per_replica",
            attrs::i(options.num_cores_per_replica),
        ),
        ("use_tpu", attrs::b(true)),
        ("allow_soft_placement", attrs::b(false)),
        ("step_marker_location", attrs::s("STEP_MARK_AT_ENTRY")),
        (
            "use_spmd_for_xla_partitioning",
            attrs::b(options.use_spmd_for_xla_partitioning),
        ),
        ("use_shardy_partitioner", attrs::b(false)),
        ("device_assignment", attrs::ints(&options.device_assignment)),
        ("computation_shape", attrs::ints(&[])),
        (
            "padding_map",
            AttrValue {
                value: Some(unbound_proto::tensorflow::attr_value::Value::List(
                    Default::default(),
                )),
            },
        ),
        (
            "host_compute_core",
            AttrValue {
                value: Some(unbound_proto::tensorflow::attr_value::Value::List(
                    Default::default(),
                )),
            },
        ),
        ("tpu_compile_options_proto", attrs::s("")),
    ];
    let topology = match &options.topology {
        Some(t) => AttrValue {
            value: Some(unbound_proto::tensorflow::attr_value::Value::S(t.clone())),
        },
        None => attrs::s(""),
    };
    out.push(("topology", topology));
    out
}

/// A node of a function body.
pub fn node<const N: usize>(
    name: String,
    op: &str,
    input: Vec<String>,
    attrs: [(&str, AttrValue); N],
) -> NodeDef {
    node_from(name, op, input, attrs.into_iter().collect())
}

fn node_from(name: String, op: &str, input: Vec<String>, attrs: Vec<(&str, AttrValue)>) -> NodeDef {
    NodeDef {
        name,
        op: op.to_string(),
        input,
        attr: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        ..NodeDef::default()
    }
}

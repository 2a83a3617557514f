//! The TPU export and its reverse on the TensorFlow-made `testdata/models/tf2_multi_sig`,
//! checked on the written model's protos; and the structural checks catching each defect
//! they exist for.

use std::collections::HashMap;
use std::path::Path;

use prost::Message;
use unbound_proto::tensorflow::{FunctionDef, MetaGraphDef, NodeDef, SavedModel};
use unbound_savedmodel::dir::read_saved_model;
use unbound_test_support::testdata::model;
use unbound_tpu::attrs::{self, get_s, input_node};
use unbound_tpu::check::check_graph;
use unbound_tpu::export::{export_cpu, export_tpu, ExportOptions};
use unbound_tpu::model::{Graph, Model};
use unbound_tpu::options::{BatchOptions, TpuOptions};
use unbound_tpu::tags::{edit_tags, TagEdit};
use unbound_tpu::TpuError;

fn options(functions: &[&str]) -> ExportOptions {
    ExportOptions {
        functions: functions.iter().map(|s| s.to_string()).collect(),
        tags: vec!["serve".into(), "tpu".into()],
        source_tags: None,
        tpu_only: false,
        tpu: TpuOptions::default(),
        batch: Vec::new(),
        dry_run: false,
        max_size: u64::MAX,
        writer: Default::default(),
    }
}

fn saved_model(dir: &Path) -> SavedModel {
    let bytes = read_saved_model(dir).unwrap().message.to_vec().unwrap();
    SavedModel::decode(bytes.as_slice()).unwrap()
}

fn tags(meta: &MetaGraphDef) -> Vec<String> {
    meta.meta_info_def.as_ref().unwrap().tags.clone()
}

fn function<'a>(meta: &'a MetaGraphDef, name: &str) -> &'a FunctionDef {
    let library = meta.graph_def.as_ref().unwrap().library.as_ref().unwrap();
    library
        .function
        .iter()
        .find(|f| attrs::function_name(f) == name)
        .unwrap_or_else(|| panic!("no function {name}"))
}

fn node<'a>(nodes: &'a [NodeDef], name: &str) -> &'a NodeDef {
    nodes
        .iter()
        .find(|n| n.name == name)
        .unwrap_or_else(|| panic!("no node {name}"))
}

const PREDICT_SIG: &str = "__inference_signature_wrapper_predict_48";

#[test]
fn export_adds_a_tpu_meta_graph_and_keeps_the_cpu_one_byte_for_byte() {
    let src = model("tf2_multi_sig");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let report = export_tpu(&src, &out, &options(&["serving_default"])).unwrap();
    assert_eq!(report.functions.len(), 1);
    let f = &report.functions[0];
    assert_eq!(f.function, PREDICT_SIG);
    assert_eq!(f.call_sites.len(), 1);

    let before = saved_model(&src);
    let after = saved_model(&out);
    assert_eq!(after.meta_graphs.len(), 2);
    assert_eq!(after.meta_graphs[0], before.meta_graphs[0]);
    let tpu = &after.meta_graphs[1];
    assert_eq!(tags(tpu), vec!["serve", "tpu"]);
    // Everything but the graph and the meta info is the source's.
    let (mut a, mut b) = (tpu.clone(), before.meta_graphs[0].clone());
    a.graph_def = None;
    b.graph_def = None;
    a.meta_info_def = None;
    b.meta_info_def = None;
    assert_eq!(a, b);

    // The top-level call site calls the host function, which selects the core and calls the
    // replicate wrapper through TPUPartitionedCall with the ordinal last.
    let graph = tpu.graph_def.as_ref().unwrap();
    let site = node(
        &graph.node,
        f.call_sites[0].at.strip_prefix("graph/").unwrap(),
    );
    assert_eq!(site.op, "StatefulPartitionedCall");
    let host_name = f.host_function.clone().unwrap();
    assert_eq!(
        site.attr.get("f").and_then(attrs::func_name),
        Some(host_name.as_str())
    );
    let host = function(tpu, &host_name);
    let call = host
        .node_def
        .iter()
        .find(|n| n.op == "TPUPartitionedCall")
        .unwrap();
    assert_eq!(
        call.attr.get("f").and_then(attrs::func_name),
        Some(f.wrapper.as_str())
    );
    for gone in ["config", "config_proto", "executor_type"] {
        assert!(!call.attr.contains_key(gone));
    }
    let last = input_node(call.input.last().unwrap());
    assert_eq!(node(&host.node_def, last).op, "TPUOrdinalSelector");

    // The wrapper: tpu.rewrite's layout.
    let wrapper = function(tpu, &f.wrapper);
    let ops: Vec<&str> = wrapper.node_def.iter().map(|n| n.op.as_str()).collect();
    for op in [
        "TPUReplicatedInput",
        "NoOp",
        "TPUReplicateMetadata",
        "Identity",
        "StatefulPartitionedCall",
        "TPUCompilationResult",
        "TPUReplicatedOutput",
    ] {
        assert!(ops.contains(&op), "{op} missing from {ops:?}");
    }
    let metadata = node(&wrapper.node_def, "TPUReplicateMetadata");
    assert_eq!(
        get_s(metadata, attrs::TPU_REPLICATE),
        Some(f.cluster.as_bytes())
    );
    assert_eq!(attrs::get_i(metadata, "num_replicas"), Some(1));
    let inner = node(&wrapper.node_def, "StatefulPartitionedCall");
    assert_eq!(
        inner.attr.get("f").and_then(attrs::func_name),
        Some(PREDICT_SIG)
    );
    // The original function is unchanged.
    assert_eq!(
        function(tpu, PREDICT_SIG),
        function(&before.meta_graphs[0], PREDICT_SIG)
    );

    // The stripped op list follows every function attribute.
    let ops: Vec<&str> = tpu
        .meta_info_def
        .as_ref()
        .unwrap()
        .stripped_op_list
        .as_ref()
        .unwrap()
        .op
        .iter()
        .map(|o| o.name.as_str())
        .collect();
    for op in [
        "TPUPartitionedCall",
        "TPUOrdinalSelector",
        "TPUReplicateMetadata",
    ] {
        assert!(ops.contains(&op), "{op} not in the stripped op list");
    }
    let mut sorted = ops.clone();
    sorted.sort_unstable();
    assert_eq!(ops, sorted);
}

#[test]
fn batching_wraps_the_call_in_batch_function_with_the_options_asked() {
    let src = model("tf2_multi_sig");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut opts = options(&["serving_default"]);
    opts.tpu_only = true;
    opts.batch = vec![BatchOptions::parse(
        "max_batch_size=8,allowed_batch_sizes=2,8,batch_timeout_micros=7",
    )
    .unwrap()];
    let report = export_tpu(&src, &out, &opts).unwrap();
    let f = &report.functions[0];
    let after = saved_model(&out);
    assert_eq!(after.meta_graphs.len(), 1);
    let tpu = &after.meta_graphs[0];
    assert!(tpu.object_graph_def.is_none());
    let graph = tpu.graph_def.as_ref().unwrap();
    let site = node(
        &graph.node,
        f.call_sites[0].at.strip_prefix("graph/").unwrap(),
    );
    assert_eq!(site.op, "BatchFunction");
    assert_eq!(attrs::get_i(site, "max_batch_size"), Some(8));
    assert_eq!(attrs::get_i(site, "batch_timeout_micros"), Some(7));
    let batch_fn = f.batch_function.as_deref().unwrap();
    assert_eq!(
        site.attr.get("f").and_then(attrs::func_name),
        Some(batch_fn)
    );
    // Resources travel in Tcaptured, and the variables stay host-side VarHandleOps.
    let captured = attrs::get_types(site, "Tcaptured");
    assert!(!captured.is_empty() && captured.iter().all(|t| attrs::is_resource(*t)));
    let data = attrs::data_input_count(site);
    for input in &site.input[data - captured.len()..data] {
        assert_eq!(node(&graph.node, input_node(input)).op, "VarHandleOp");
    }
    let ops: Vec<&str> = tpu
        .meta_info_def
        .as_ref()
        .unwrap()
        .stripped_op_list
        .as_ref()
        .unwrap()
        .op
        .iter()
        .map(|o| o.name.as_str())
        .collect();
    assert!(ops.contains(&"BatchFunction"));

    // The reverse rewrite keeps BatchFunction, or unbatches; no TPU op is left.
    for unbatch in [false, true] {
        let cpu = tmp.path().join(format!("cpu{unbatch}"));
        let report = export_cpu(&out, &cpu, unbatch, false, u64::MAX, Default::default()).unwrap();
        assert_eq!(report.meta_graphs[0].counts.partitioned_calls, 1);
        let m = saved_model(&cpu);
        let ops: Vec<&str> = m.meta_graphs[0]
            .meta_info_def
            .as_ref()
            .unwrap()
            .stripped_op_list
            .as_ref()
            .unwrap()
            .op
            .iter()
            .map(|o| o.name.as_str())
            .collect();
        assert!(!ops.iter().any(|o| o.starts_with("TPU")), "{ops:?}");
        assert_eq!(ops.contains(&"BatchFunction"), !unbatch);
    }
}

#[test]
fn refusals_write_nothing() {
    let src = model("tf2_multi_sig");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let err = export_tpu(&src, &out, &options(&["no_such_thing"])).unwrap_err();
    assert!(matches!(err, TpuError::UnknownFunction { .. }), "{err}");
    assert!(err.to_string().contains("serving_default"), "{err}");
    assert!(!out.exists());

    let mut opts = options(&[]);
    opts.tags = vec!["serve".into()];
    let err = export_tpu(&src, &out, &opts).unwrap_err();
    assert!(matches!(err, TpuError::TagSetExists { .. }), "{err}");
    assert!(!out.exists());

    // Two chosen functions where one calls the other would nest TPU computations.
    let err = export_tpu(
        &src,
        &out,
        &options(&["serving_default", "__inference_predict_38"]),
    )
    .unwrap_err();
    assert!(err.to_string().contains("cannot be nested"), "{err}");
    assert!(!out.exists());

    let mut opts = options(&["serving_default"]);
    opts.dry_run = true;
    let report = export_tpu(&src, &out, &opts).unwrap();
    assert!(report.written.is_none());
    assert!(!out.exists());
}

#[test]
fn tag_sets_are_added_replaced_and_removed_and_never_doubled() {
    let src = model("tf2_multi_sig");
    let tmp = tempfile::tempdir().unwrap();
    let s = |t: &[&str]| t.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let out = tmp.path().join("a");
    let report = edit_tags(
        &src,
        &out,
        &[
            TagEdit::Duplicate {
                from: s(&["serve"]),
                to: s(&["tpu", "serve"]),
            },
            TagEdit::Replace {
                from: s(&["serve"]),
                to: s(&["serve", "gpu"]),
            },
        ],
        u64::MAX,
        Default::default(),
    )
    .unwrap();
    assert_eq!(
        report.tag_sets,
        vec![s(&["serve", "gpu"]), s(&["tpu", "serve"])]
    );
    let m = saved_model(&out);
    assert_eq!(m.meta_graphs.len(), 2);
    let (mut a, mut b) = (m.meta_graphs[0].clone(), m.meta_graphs[1].clone());
    a.meta_info_def.as_mut().unwrap().tags.clear();
    b.meta_info_def.as_mut().unwrap().tags.clear();
    assert_eq!(a, b);

    let out2 = tmp.path().join("b");
    let report = edit_tags(
        &out,
        &out2,
        &[TagEdit::Remove {
            tags: s(&["gpu", "serve"]),
        }],
        u64::MAX,
        Default::default(),
    )
    .unwrap();
    assert_eq!(report.tag_sets, vec![s(&["tpu", "serve"])]);

    for edit in [
        TagEdit::Duplicate {
            from: s(&["serve"]),
            to: s(&["serve"]),
        },
        TagEdit::Remove {
            tags: s(&["serve"]),
        },
        TagEdit::Replace {
            from: s(&["train"]),
            to: s(&["x"]),
        },
    ] {
        let out3 = tmp.path().join("c");
        assert!(edit_tags(&src, &out3, &[edit], u64::MAX, Default::default()).is_err());
        assert!(!out3.exists());
    }
}

/// The exported TPU graph of the test model, decoded.
fn exported_graph() -> (Graph, HashMap<String, BatchOptions>) {
    let src = model("tf2_multi_sig");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    export_tpu(&src, &out, &options(&["serving_default", "add_ints"])).unwrap();
    let m = Model::open(&out).unwrap();
    let graph = m.decode(1).unwrap().graph;
    check_graph(&graph, &HashMap::new()).unwrap();
    (graph, HashMap::new())
}

fn wrapper_index(graph: &Graph) -> usize {
    graph
        .functions
        .iter()
        .position(|f| f.node_def.iter().any(|n| n.op == "TPUReplicateMetadata"))
        .unwrap()
}

fn host_index(graph: &Graph) -> usize {
    graph
        .functions
        .iter()
        .position(|f| f.node_def.iter().any(|n| n.op == "TPUPartitionedCall"))
        .unwrap()
}

#[test]
fn the_checks_catch_each_defect() {
    let (good, none) = exported_graph();
    let expect_fault = |graph: &Graph, text: &str| {
        let err = check_graph(graph, &none).unwrap_err().to_string();
        assert!(err.contains(text), "{err:?} lacks {text:?}");
    };

    // The ordinal not last / not from a selector.
    let mut g = good.clone();
    let h = host_index(&g);
    let call = g.functions[h]
        .node_def
        .iter_mut()
        .find(|n| n.op == "TPUPartitionedCall")
        .unwrap();
    let ordinal = call.input.pop().unwrap();
    call.input.insert(0, ordinal);
    expect_fault(&g, "is not a TPUOrdinalSelector");

    // A missing function.
    let mut g = good.clone();
    let h = host_index(&g);
    let call = g.functions[h]
        .node_def
        .iter_mut()
        .find(|n| n.op == "TPUPartitionedCall")
        .unwrap();
    call.attr.insert("f".into(), attrs::func("gone"));
    expect_fault(&g, "does not exist");

    // Tin disagreeing with the callee.
    let mut g = good.clone();
    let h = host_index(&g);
    let call = g.functions[h]
        .node_def
        .iter_mut()
        .find(|n| n.op == "TPUPartitionedCall")
        .unwrap();
    call.attr
        .insert("Tin".into(), attrs::types(&[1, 1, 1, 1, 1, 1, 1]));
    expect_fault(&g, "Tin");

    // Two metadata nodes for one cluster.
    let mut g = good.clone();
    let w = wrapper_index(&g);
    let mut extra = g.functions[w]
        .node_def
        .iter()
        .find(|n| n.op == "TPUReplicateMetadata")
        .unwrap()
        .clone();
    extra.name = "TPUReplicateMetadata_2".into();
    g.functions[w].node_def.push(extra);
    expect_fault(&g, "2 TPUReplicateMetadata");

    // A variable read inside the cluster.
    let mut g = good.clone();
    let w = wrapper_index(&g);
    let cluster = get_s(
        g.functions[w]
            .node_def
            .iter()
            .find(|n| n.op == "TPUReplicateMetadata")
            .unwrap(),
        attrs::TPU_REPLICATE,
    )
    .unwrap()
    .to_vec();
    g.functions[w].node_def.push(NodeDef {
        name: "read".into(),
        op: "ReadVariableOp".into(),
        attr: [(
            attrs::TPU_REPLICATE.to_string(),
            attrs::s(std::str::from_utf8(&cluster).unwrap()),
        )]
        .into_iter()
        .collect(),
        ..NodeDef::default()
    });
    expect_fault(&g, "touches a variable inside cluster");

    // A cycle: the wrapped function calls the wrapper back.
    let mut g = good.clone();
    let w = wrapper_index(&g);
    let wrapper_name = attrs::function_name(&g.functions[w]).to_string();
    let inner = g.functions[w]
        .node_def
        .iter()
        .find(|n| n.op == "StatefulPartitionedCall")
        .unwrap();
    let callee = attrs::func_name(inner.attr.get("f").unwrap())
        .unwrap()
        .to_string();
    let c = g
        .functions
        .iter()
        .position(|f| attrs::function_name(f) == callee)
        .unwrap();
    g.functions[c].node_def.push(NodeDef {
        name: "back".into(),
        op: "NoOp".into(),
        attr: [("f".to_string(), attrs::func(&wrapper_name))]
            .into_iter()
            .collect(),
        ..NodeDef::default()
    });
    expect_fault(&g, "cycle");

    // Batch options not as asked.
    let src = model("tf2_multi_sig");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut opts = options(&["serving_default"]);
    let asked = BatchOptions::parse("max_batch_size=4").unwrap();
    opts.batch = vec![asked.clone()];
    let report = export_tpu(&src, &out, &opts).unwrap();
    let graph = Model::open(&out).unwrap().decode(1).unwrap().graph;
    let mut expected = HashMap::new();
    expected.insert(report.functions[0].batch_function.clone().unwrap(), asked);
    check_graph(&graph, &expected).unwrap();
    let other = BatchOptions::parse("max_batch_size=5").unwrap();
    expected.values_mut().for_each(|v| *v = other.clone());
    assert!(check_graph(&graph, &expected)
        .unwrap_err()
        .to_string()
        .contains("max_batch_size"));
}

#[test]
fn metadata_options_and_shared_cluster_names_are_written() {
    let src = model("tf2_multi_sig");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut opts = options(&["serving_default", "add_ints"]);
    opts.tpu = TpuOptions {
        num_cores_per_replica: 2,
        use_spmd_for_xla_partitioning: false,
        shared_cluster_name: true,
        topology: Some(bytes::Bytes::from_static(b"\x0a\x01\x02")),
        device_assignment: vec![0, 1],
    };
    let report = export_tpu(&src, &out, &opts).unwrap();
    assert_eq!(report.functions.len(), 2);
    assert!(report.functions.iter().all(|f| f.cluster == "cluster"));
    let after = saved_model(&out);
    let tpu = &after.meta_graphs[1];
    for f in &report.functions {
        let wrapper = function(tpu, &f.wrapper);
        let metadata = node(&wrapper.node_def, "TPUReplicateMetadata");
        assert_eq!(attrs::get_i(metadata, "num_cores_per_replica"), Some(2));
        assert_eq!(get_s(metadata, "topology"), Some(&b"\x0a\x01\x02"[..]));
        assert_eq!(
            metadata.attr.get("device_assignment"),
            Some(&attrs::ints(&[0, 1]))
        );
        assert_eq!(
            metadata.attr.get("use_spmd_for_xla_partitioning"),
            Some(&attrs::b(false))
        );
        // Without SPMD the output identities are placed on the replicated core.
        let identities: Vec<&NodeDef> = wrapper
            .node_def
            .iter()
            .filter(|n| n.attr.contains_key(attrs::TPU_OUTPUT_IDENTITY))
            .collect();
        assert!(!identities.is_empty());
        assert!(identities
            .iter()
            .all(|n| n.device == attrs::TPU_REPLICATED_CORE));
    }
}

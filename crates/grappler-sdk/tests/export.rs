//! `export_plugin!` end to end, in this executable: `TF_InitGraph` is called as TensorFlow
//! calls it, and the registered functions run against the fake host of `testing` (exported
//! from this executable by the build script, found by the SDK with `dlsym(RTLD_DEFAULT)`).

use unbound_grappler_sdk::abi::{
    TP_OPTIMIZER_CONFIGS_STRUCT_SIZE, TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE,
    TP_OPTIMIZER_STRUCT_SIZE,
};
use unbound_grappler_sdk::testing::{self, FakeItem};
use unbound_grappler_sdk::{
    export_plugin, Code, Error, GraphDef, Item, Optimizer, Outcome, PropertiesOptions, Result,
};
use unbound_proto::tensorflow::NodeDef;

/// Does what the graph's first node's op says.
struct Scripted;

fn node(name: &str, op: &str) -> NodeDef {
    NodeDef {
        name: name.into(),
        op: op.into(),
        ..Default::default()
    }
}

impl Optimizer for Scripted {
    fn new() -> Self {
        Scripted
    }

    fn optimize(&mut self, mut graph: GraphDef, item: &Item<'_>) -> Result<Outcome> {
        let mode = graph.node.first().map(|n| n.op.clone()).unwrap_or_default();
        match mode.as_str() {
            "unchanged" => Ok(Outcome::Unchanged),
            "error" => Err(Error::new(Code::FailedPrecondition, "scripted error")),
            "panic" => panic!("scripted panic"),
            "lists" => {
                // Report what the item says as node names.
                for name in item.nodes_to_preserve()? {
                    graph.node.push(node(&format!("preserve/{name}"), "NoOp"));
                }
                for name in item.fetch_nodes()? {
                    graph.node.push(node(&format!("fetch/{name}"), "NoOp"));
                }
                let identity = item.op_def("Identity")?.expect("Identity is known");
                graph
                    .node
                    .push(node(&format!("opdef/{}", identity.name), "NoOp"));
                if item.op_def("NoSuchOp")?.is_none() {
                    graph.node.push(node("opdef-missing", "NoOp"));
                }
                let props = item.properties(PropertiesOptions::default())?;
                let inputs = props.input_properties("x")?;
                let outputs = props.output_properties("x")?;
                graph.node.push(node(
                    &format!(
                        "props/{}/{}/{:?}",
                        inputs.len(),
                        outputs.len(),
                        inputs[0].shape
                    ),
                    "NoOp",
                ));
                Ok(Outcome::Changed(graph))
            }
            _ => {
                graph.node.retain(|n| n.op != "Identity");
                Ok(Outcome::Changed(graph))
            }
        }
    }
}

export_plugin!(Scripted, device_type = "TESTDEV", configs = { remapping: Off, disable_model_pruning: On });

fn registration() -> testing::Registration {
    // SAFETY: this executable's own TF_InitGraph.
    unsafe { testing::register(TF_InitGraph) }
}

fn run(graph: &GraphDef, item: &FakeItem) -> testing::Optimized {
    let reg = registration();
    assert_eq!(reg.status.code, 0);
    // SAFETY: registered just now by this executable.
    unsafe { testing::optimize(&reg.optimizer, graph, item) }
}

fn graph(first_op: &str) -> GraphDef {
    GraphDef {
        node: vec![node("mode", first_op), node("x", "Identity")],
        ..Default::default()
    }
}

#[test]
fn registration_fills_params_configs_and_optimizer() {
    let reg = registration();
    assert_eq!(reg.status.code, 0, "{:?}", reg.status.message);
    assert_eq!(reg.device_type().as_deref(), Some("TESTDEV"));
    assert_eq!(
        reg.params.struct_size,
        TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE
    );
    assert_eq!(reg.configs.struct_size, TP_OPTIMIZER_CONFIGS_STRUCT_SIZE);
    assert_eq!(reg.optimizer.struct_size, TP_OPTIMIZER_STRUCT_SIZE);
    let mut expected = [0u32; 19];
    expected[0] = 2; // disable_model_pruning On
    expected[13] = 1; // remapping Off
    assert_eq!(reg.configs.toggles, expected);
    assert!(reg.optimizer.create_func.is_some());
    assert!(reg.optimizer.optimize_func.is_some());
    assert!(reg.optimizer.destroy_func.is_some());
}

#[test]
fn changed_graph_comes_back_in_a_freeable_buffer() {
    let out = run(&graph("rewrite"), &FakeItem::default());
    assert_eq!(out.code, 0, "{}", out.message);
    assert!(out.had_deallocator);
    let names: Vec<_> = out
        .graph
        .unwrap()
        .node
        .into_iter()
        .map(|n| n.name)
        .collect();
    assert_eq!(names, ["mode"]);
}

#[test]
fn unchanged_is_aborted() {
    let out = run(&graph("unchanged"), &FakeItem::default());
    assert_eq!(out.code, Code::Aborted as i32);
    assert_eq!(out.message, "did nothing");
}

#[test]
fn errors_and_panics_become_statuses() {
    let out = run(&graph("error"), &FakeItem::default());
    assert_eq!(out.code, Code::FailedPrecondition as i32);
    assert_eq!(out.message, "scripted error");
    let out = run(&graph("panic"), &FakeItem::default());
    assert_eq!(out.code, Code::Internal as i32);
    assert!(out.message.contains("scripted panic"), "{}", out.message);
}

#[test]
fn bad_input_bytes_are_invalid_argument() {
    let reg = registration();
    // Field 1 (node), length-delimited, claiming 100 bytes that are not there.
    // SAFETY: registered just now.
    let out =
        unsafe { testing::optimize_bytes(&reg.optimizer, &[0x0a, 100, 1], &FakeItem::default()) };
    assert_eq!(out.code, Code::InvalidArgument as i32);
    assert!(out.message.contains("not a GraphDef"), "{}", out.message);
}

#[test]
fn item_lists_op_defs_and_properties_reach_the_optimizer() {
    let item = FakeItem {
        preserve: vec!["out".into(), "init".into()],
        fetch: vec!["out:0".into()],
    };
    let out = run(&graph("lists"), &item);
    assert_eq!(out.code, 0, "{}", out.message);
    let names: Vec<_> = out
        .graph
        .unwrap()
        .node
        .into_iter()
        .map(|n| n.name)
        .collect();
    assert_eq!(
        names[2..6],
        [
            "preserve/out",
            "preserve/init",
            "fetch/out:0",
            "opdef/Identity"
        ]
    );
    assert_eq!(names[6], "opdef-missing");
    assert!(names[7].starts_with("props/1/1/Some("), "{}", names[7]);
    assert!(names[7].contains("size: 2"), "{}", names[7]);
}

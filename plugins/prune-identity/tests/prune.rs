//! The pruning rules on hand-made graphs.

mod common;

use common::{graph, inputs, n, names, set, typed};
use unbound_plugin_prune_identity::prune;
use unbound_proto::tensorflow::DataType;

#[test]
fn identity_chain_is_removed_and_consumers_read_the_source() {
    let g = graph(vec![
        n("x", "Placeholder", &[]),
        typed("id1", "Identity", &["x:1"], DataType::DtFloat),
        typed("id2", "Identity", &["id1"], DataType::DtFloat),
        n("out", "Neg", &["id2:0"]),
    ]);
    let (g, removed) = prune(g, &set(&["out"]));
    assert_eq!(removed, 2);
    assert_eq!(names(&g), ["x", "out"]);
    assert_eq!(inputs(&g, "out"), ["x:1"]);
}

#[test]
fn chain_in_reverse_order_is_removed_too() {
    let g = graph(vec![
        n("out", "Neg", &["id2"]),
        n("id2", "Identity", &["id1"]),
        n("id1", "Identity", &["x"]),
        n("x", "Placeholder", &[]),
    ]);
    let (g, removed) = prune(g, &set(&["out"]));
    assert_eq!(removed, 2);
    assert_eq!(inputs(&g, "out"), ["x"]);
}

#[test]
fn preserved_identity_is_kept() {
    let g = graph(vec![
        n("x", "Placeholder", &[]),
        n("id1", "Identity", &["x"]),
        n("id2", "Identity", &["id1"]),
        n("out", "Neg", &["id2"]),
    ]);
    let (g, removed) = prune(g, &set(&["id2", "out"]));
    assert_eq!(removed, 1);
    assert_eq!(names(&g), ["x", "id2", "out"]);
    assert_eq!(inputs(&g, "id2"), ["x"]);
    assert_eq!(inputs(&g, "out"), ["id2"]);
}

#[test]
fn control_dependencies_move_to_the_consumers() {
    let g = graph(vec![
        n("x", "Placeholder", &[]),
        n("c", "NoOpLike", &[]),
        n("id", "Identity", &["x", "^c"]),
        n("data_user", "Neg", &["id"]),
        n("control_user", "Sink", &["^id"]),
        n("both", "Add", &["x", "y", "^id"]),
    ]);
    let (g, removed) = prune(g, &set(&["data_user", "control_user", "both"]));
    assert_eq!(removed, 1);
    // A data user reads x and still runs after c.
    assert_eq!(inputs(&g, "data_user"), ["x", "^c"]);
    // A control user now waits for x (what the Identity waited for) and for c.
    assert_eq!(inputs(&g, "control_user"), ["^x", "^c"]);
    // A node already reading x gets no ^x.
    assert_eq!(inputs(&g, "both"), ["x", "y", "^c"]);
}

#[test]
fn noops_are_bypassed_when_that_adds_no_edges() {
    let g = graph(vec![
        n("a", "Placeholder", &[]),
        n("b", "Placeholder", &[]),
        n("small", "NoOp", &["^a", "^b"]),
        n("user", "Neg", &["a", "^small"]),
        n("dead", "NoOp", &["^a"]),
        n("big", "NoOp", &["^a", "^b", "^user"]),
        n("u1", "Sink", &["^big"]),
        n("u2", "Sink", &["^big"]),
        n("u3", "Sink", &["^big"]),
        n("kept", "NoOp", &["^a"]),
    ]);
    let (g, removed) = prune(g, &set(&["user", "u1", "u2", "u3", "kept"]));
    assert_eq!(removed, 2);
    assert_eq!(
        names(&g),
        ["a", "b", "user", "big", "u1", "u2", "u3", "kept"]
    );
    // 2 inputs x 1 consumer: bypassed; user already reads a, so only ^b is added.
    assert_eq!(inputs(&g, "user"), ["a", "^b"]);
    // 3 x 3 = 9 edges instead of 6: kept.
    assert_eq!(inputs(&g, "u1"), ["^big"]);
}

#[test]
fn identities_that_carry_meaning_are_kept() {
    let mut on_gpu = n("cross_device", "Identity", &["x"]);
    on_gpu.device = "/device:GPU:0".into();
    let g = graph(vec![
        n("x", "Placeholder", &[]),
        n("v", "VariableV2", &[]),
        n("h", "VarHandleOp", &[]),
        typed("read", "Identity", &["v"], DataType::DtFloat),
        typed("handle", "Identity", &["h"], DataType::DtResource),
        typed("ref", "Identity", &["x"], DataType::DtFloatRef),
        on_gpu,
        n("snap", "Snapshot", &["x"]),
        n(
            "out",
            "AddN",
            &["read", "handle", "ref", "cross_device", "snap"],
        ),
    ]);
    let before = g.clone();
    let (g, removed) = prune(g, &set(&["out"]));
    assert_eq!(removed, 0);
    assert_eq!(g, before);
}

#[test]
fn function_graph_identity_before_retval() {
    let g = graph(vec![
        n("arg", "_Arg", &[]),
        n("dep", "Placeholder", &[]),
        n("plain", "Identity", &["arg"]),
        n("ret0", "_Retval", &["plain"]),
        n("guarded", "Identity", &["arg", "^dep"]),
        n("ret1", "_Retval", &["guarded"]),
    ]);
    let (g, removed) = prune(g, &set(&["ret0", "ret1"]));
    assert_eq!(removed, 1);
    assert_eq!(inputs(&g, "ret0"), ["arg"]);
    // Moving ^dep onto a _Retval is not allowed (as in TensorFlow): kept.
    assert_eq!(inputs(&g, "ret1"), ["guarded"]);
    assert_eq!(inputs(&g, "guarded"), ["arg", "^dep"]);
}

#[test]
fn identity_after_switch_keeps_branch_control_dependencies() {
    let g = graph(vec![
        n("x", "Placeholder", &[]),
        n("p", "Placeholder", &[]),
        n("sw", "Switch", &["x", "p"]),
        n("t", "Identity", &["sw:1"]),
        n("branch_op", "Const", &["^t"]),
        n("f", "Identity", &["sw"]),
        n("f_user", "Neg", &["f"]),
        n("m", "Merge", &["branch_op", "f_user"]),
    ]);
    let (g, removed) = prune(g, &set(&["m"]));
    assert_eq!(removed, 1);
    assert!(names(&g).contains(&"t"));
    assert_eq!(inputs(&g, "branch_op"), ["^t"]);
    assert_eq!(inputs(&g, "f_user"), ["sw"]);
}

#[test]
fn no_self_dependencies_in_loops() {
    let g = graph(vec![
        n("enter", "Enter", &[]),
        n("m", "Merge", &["enter", "id"]),
        n("id", "Identity", &["m"]),
        n("c", "NoOp", &["^c2"]),
        n("c2", "Sink", &["^c"]),
    ]);
    let (g, removed) = prune(g, &set(&[]));
    assert_eq!(removed, 0, "{:?}", names(&g));
    assert_eq!(inputs(&g, "m"), ["enter", "id"]);
}

#[test]
fn dead_identity_and_library_are_handled() {
    let mut g = graph(vec![
        n("x", "Placeholder", &[]),
        n("unused", "Identity", &["x"]),
    ]);
    g.library = Some(Default::default());
    let (g, removed) = prune(g.clone(), &set(&["x"]));
    assert_eq!(removed, 1);
    assert_eq!(names(&g), ["x"]);
    assert!(g.library.is_some());
}

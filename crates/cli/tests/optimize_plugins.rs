//! `unbound optimize` with graph optimizer plugins written in C against TensorFlow's plugin ABI
//! (`tests/plugins/*.c`, built with the system C compiler). Each test runs the binary on a small
//! SavedModel made here, Placeholder "x" -> Identity "drop_a" -> Identity "drop_b" -> Relu "out"
//! on /device:CPU:0, and checks the host's contract: rewrites are saved; plugin errors, garbage
//! and empty outputs are warnings that keep the graph; registration errors fail before anything
//! is written; crashes and hangs are contained with --isolate; plugins run only for the device
//! types in the graph; configs are read in both struct layouts; lifetimes are paired.

mod common;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::describe;
use common::plugins::{build_plugin, build_tf_linked_plugin};
use prost::Message;
use unbound_proto::tensorflow::{
    attr_value, meta_graph_def::MetaInfoDef, tensor_info, tensor_shape_proto, AttrValue, DataType,
    GraphDef, MetaGraphDef, NodeDef, SavedModel, SignatureDef, TensorInfo, TensorShapeProto,
    VersionDef,
};

const CPU: &str = "/device:CPU:0";

/// A test model on disk: `<tmp>/model/saved_model.pb`; `out` is where optimize writes.
struct Model {
    tmp: tempfile::TempDir,
    graph: GraphDef,
}

impl Model {
    fn dir(&self) -> PathBuf {
        self.tmp.path().join("model")
    }
    fn out(&self) -> PathBuf {
        self.tmp.path().join("out")
    }
}

fn node(name: &str, op: &str, input: &[&str], attr: &[(&str, attr_value::Value)]) -> NodeDef {
    NodeDef {
        name: name.into(),
        op: op.into(),
        input: input.iter().map(|s| s.to_string()).collect(),
        device: CPU.into(),
        attr: attr
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    AttrValue {
                        value: Some(v.clone()),
                    },
                )
            })
            .collect(),
        ..Default::default()
    }
}

fn tensor_info(name: &str) -> TensorInfo {
    TensorInfo {
        dtype: DataType::DtFloat as i32,
        encoding: Some(tensor_info::Encoding::Name(name.into())),
        ..Default::default()
    }
}

/// Writes the test SavedModel: x -> drop_a -> drop_b -> out (Relu), signature output "out:0".
fn make_model() -> Model {
    let float = attr_value::Value::Type(DataType::DtFloat as i32);
    let shape = TensorShapeProto {
        dim: [2, 3]
            .iter()
            .map(|&size| tensor_shape_proto::Dim {
                size,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let graph = GraphDef {
        node: vec![
            node(
                "x",
                "Placeholder",
                &[],
                &[
                    ("dtype", float.clone()),
                    ("shape", attr_value::Value::Shape(shape)),
                ],
            ),
            node("drop_a", "Identity", &["x"], &[("T", float.clone())]),
            node("drop_b", "Identity", &["drop_a"], &[("T", float.clone())]),
            node("out", "Relu", &["drop_b"], &[("T", float)]),
        ],
        versions: Some(VersionDef {
            producer: 1882,
            ..Default::default()
        }),
        ..Default::default()
    };
    let signature = SignatureDef {
        inputs: BTreeMap::from([("x".to_string(), tensor_info("x:0"))]),
        outputs: BTreeMap::from([("out".to_string(), tensor_info("out:0"))]),
        method_name: "tensorflow/serving/predict".into(),
        ..Default::default()
    };
    let saved_model = SavedModel {
        saved_model_schema_version: 1,
        meta_graphs: vec![MetaGraphDef {
            meta_info_def: Some(MetaInfoDef {
                tags: vec!["serve".into()],
                ..Default::default()
            }),
            graph_def: Some(graph.clone()),
            signature_def: BTreeMap::from([("serving_default".to_string(), signature)]),
            ..Default::default()
        }],
    };
    let tmp = tempfile::tempdir().expect("temp dir");
    let model = Model { tmp, graph };
    std::fs::create_dir_all(model.dir()).unwrap();
    std::fs::write(
        model.dir().join("saved_model.pb"),
        saved_model.encode_to_vec(),
    )
    .unwrap();
    model
}

/// Runs `unbound optimize MODEL OUT --plugin P... EXTRA...` with `env` set.
fn optimize(model: &Model, plugins: &[&Path], extra: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(common::bin());
    cmd.arg("optimize").arg(model.dir()).arg(model.out());
    for plugin in plugins {
        cmd.arg("--plugin").arg(plugin);
    }
    cmd.args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_with_deadline(cmd, Duration::from_secs(120))
}

/// Runs `cmd` with stdout and stderr in files (a plugin process the host failed to end would
/// hold pipes open forever), killing it after `deadline`.
fn run_with_deadline(mut cmd: Command, deadline: Duration) -> Output {
    let logs = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (logs.path().join("stdout"), logs.path().join("stderr"));
    cmd.stdin(Stdio::null())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap());
    let mut child = cmd.spawn().expect("the unbound binary runs");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            panic!("unbound did not finish within {deadline:?}: {cmd:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: std::fs::read(out_path).unwrap(),
        stderr: std::fs::read(err_path).unwrap(),
    }
}

/// The main graph of the SavedModel optimize wrote.
fn output_graph(model: &Model, out: &Output) -> GraphDef {
    let path = model.out().join("saved_model.pb");
    let bytes = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}\n{}", path.display(), describe(out)));
    let saved = SavedModel::decode(bytes.as_slice()).unwrap_or_else(|e| {
        panic!(
            "{} is not a SavedModel: {e}\n{}",
            path.display(),
            describe(out)
        )
    });
    assert_eq!(
        saved.meta_graphs.len(),
        1,
        "meta graphs in the output\n{}",
        describe(out)
    );
    saved.meta_graphs[0]
        .graph_def
        .clone()
        .expect("the output meta graph has a graph")
}

fn node_names(graph: &GraphDef) -> Vec<&str> {
    graph.node.iter().map(|n| n.name.as_str()).collect()
}

fn assert_exit(out: &Output, code: i32, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}: exit code\n{}",
        describe(out)
    );
}

/// Exit 0 and the output graph equals the input graph.
fn assert_unchanged(model: &Model, out: &Output, what: &str) {
    assert_exit(out, 0, what);
    let graph = output_graph(model, out);
    assert_eq!(
        graph,
        model.graph,
        "{what}: expected the graph unchanged (nodes {:?}), got nodes {:?}\n{}",
        node_names(&model.graph),
        node_names(&graph),
        describe(out)
    );
}

/// Exit 0, the drop_ nodes are gone and "out" reads from the placeholder.
fn assert_rewritten(model: &Model, out: &Output, what: &str) {
    assert_exit(out, 0, what);
    let graph = output_graph(model, out);
    assert_eq!(
        node_names(&graph),
        ["x", "out"],
        "{what}: expected the drop_ nodes removed\n{}",
        describe(out)
    );
    let relu = &graph.node[1];
    assert_eq!(relu.input, ["x"], "{what}: out's inputs\n{}", describe(out));
    assert_eq!(relu.op, "Relu", "{what}: out's op\n{}", describe(out));
}

/// Exit 1, the message on stderr, and no output directory.
fn assert_refused(model: &Model, out: &Output, needles: &[&str], what: &str) {
    assert_exit(out, 1, what);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "{what}: expected {needle:?} on stderr\n{}",
            describe(out)
        );
    }
    assert!(
        !stderr.contains("panicked"),
        "{what}: panicked\n{}",
        describe(out)
    );
    assert!(
        !model.out().exists(),
        "{what}: the output was written anyway\n{}",
        describe(out)
    );
}

/// Whether some line of `text` contains every needle (case-insensitive).
fn has_line_with(text: &str, needles: &[&str]) -> bool {
    text.lines().any(|line| {
        let line = line.to_lowercase();
        needles.iter().all(|n| line.contains(&n.to_lowercase()))
    })
}

fn stdout_and_stderr(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts stderr has a warning line naming the plugin file and containing `needle`.
fn assert_warning(out: &Output, plugin: &Path, needle: &str, what: &str) {
    let file = plugin.file_name().unwrap().to_str().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        has_line_with(&stderr, &[file, needle]),
        "{what}: expected a warning line on stderr with {file:?} and {needle:?}\n{}",
        describe(out)
    );
}

/// The unsigned integers on a line.
fn numbers(line: &str) -> Vec<u64> {
    line.split(|c: char| !c.is_ascii_digit())
        .filter_map(|s| s.parse().ok())
        .collect()
}

fn check_success(extra: &[&str]) {
    let model = make_model();
    let plugin = build_plugin("identity_remover");
    let out = optimize(&model, &[&plugin], extra, &[]);
    assert_rewritten(&model, &out, "identity_remover");
    // One report line per plugin run: "identity_remover.so main graph: 4 -> 2 nodes".
    let stdout = String::from_utf8_lossy(&out.stdout);
    let reported = stdout.lines().any(|line| {
        let n = numbers(line);
        line.contains("identity_remover.so") && n.contains(&4) && n.contains(&2)
    });
    assert!(
        reported,
        "expected a stdout line with identity_remover.so, 4 and 2\n{}",
        describe(&out)
    );
}

#[test]
fn rewrite_is_saved() {
    check_success(&[]);
}

#[test]
fn rewrite_is_saved_when_isolated() {
    check_success(&["--isolate"]);
}

#[test]
fn plugin_error_keeps_the_graph() {
    let model = make_model();
    let plugin = build_plugin("error_status");
    let out = optimize(&model, &[&plugin], &[], &[]);
    assert_unchanged(&model, &out, "error_status");
    assert_warning(&out, &plugin, "plugin refused the graph", "error_status");
}

#[test]
fn garbage_output_keeps_the_graph() {
    let model = make_model();
    let plugin = build_plugin("garbage_output");
    let out = optimize(&model, &[&plugin], &[], &[]);
    assert_unchanged(&model, &out, "garbage_output");
    assert_warning(&out, &plugin, "unparsable", "garbage_output");
}

#[test]
fn empty_output_keeps_the_graph() {
    let model = make_model();
    let plugin = build_plugin("empty_output");
    let out = optimize(&model, &[&plugin], &[], &[]);
    assert_unchanged(&model, &out, "empty_output");
    assert_warning(&out, &plugin, "empty", "empty_output");
}

#[test]
fn aborted_is_a_quiet_no_op() {
    let model = make_model();
    let plugin = build_plugin("aborted");
    let out = optimize(&model, &[&plugin], &[], &[]);
    assert_unchanged(&model, &out, "aborted");
    let stderr = String::from_utf8_lossy(&out.stderr).to_lowercase();
    assert!(
        !stderr.contains("warning") && !stderr.contains("aborted.so"),
        "aborted: expected no warning\n{}",
        describe(&out)
    );
}

#[test]
fn missing_optimize_func_is_refused() {
    let model = make_model();
    let plugin = build_plugin("no_optimize_func");
    let out = optimize(&model, &[&plugin], &[], &[]);
    assert_refused(
        &model,
        &out,
        &["'optimize_func' field in TP_Optimizer must be set."],
        "no_optimize_func",
    );
}

#[test]
fn missing_device_type_is_refused() {
    let model = make_model();
    let plugin = build_plugin("no_device_type");
    let out = optimize(&model, &[&plugin], &[], &[]);
    assert_refused(
        &model,
        &out,
        &["'device_type' field in TP_OptimizerRegistrationParams must be set."],
        "no_device_type",
    );
}

#[test]
fn init_error_is_refused() {
    let model = make_model();
    let plugin = build_plugin("init_error");
    let out = optimize(&model, &[&plugin], &[], &[]);
    assert_refused(
        &model,
        &out,
        &["init_error: no supported hardware found"],
        "init_error",
    );
}

#[test]
fn two_plugins_for_one_device_type_are_refused() {
    let model = make_model();
    let built = build_plugin("identity_remover");
    let first = model.tmp.path().join("first_remover.so");
    let second = model.tmp.path().join("second_remover.so");
    std::fs::copy(&built, &first).unwrap();
    std::fs::copy(&built, &second).unwrap();
    let out = optimize(&model, &[&first, &second], &[], &[]);
    assert_refused(&model, &out, &[], "two CPU plugins");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("already registered") || stderr.contains("both register"),
        "two CPU plugins: expected \"already registered\" or \"both register\"\n{}",
        describe(&out)
    );
}

#[test]
fn crash_is_contained_when_isolated() {
    let model = make_model();
    let plugin = build_plugin("segfault");
    let out = optimize(&model, &[&plugin], &["--isolate"], &[]);
    assert_unchanged(&model, &out, "segfault --isolate");
    assert_warning(&out, &plugin, "crashed", "segfault --isolate");
    assert_warning(&out, &plugin, "SIGSEGV", "segfault --isolate");
}

#[test]
fn plugins_after_a_crash_still_run_when_isolated() {
    // segfault (CPU) crashes first; gpu_only (GPU) runs next in its own worker and removes the
    // "drop_" nodes: the crash costs its own plugin's change, not the others'.
    let model = make_model();
    let segfault = build_plugin("segfault");
    let gpu_only = build_plugin("gpu_only");
    let extra = ["--isolate", "--device-type", "CPU", "--device-type", "GPU"];
    let out = optimize(&model, &[&segfault, &gpu_only], &extra, &[]);
    assert_warning(
        &out,
        &segfault,
        "SIGSEGV",
        "segfault then gpu_only --isolate",
    );
    assert_rewritten(&model, &out, "segfault then gpu_only --isolate");
}

#[test]
fn hang_times_out_when_isolated() {
    let model = make_model();
    let plugin = build_plugin("hang");
    let start = Instant::now();
    let out = optimize(
        &model,
        &[&plugin],
        &["--isolate", "--plugin-timeout", "2"],
        &[],
    );
    let took = start.elapsed();
    assert_unchanged(&model, &out, "hang --isolate --plugin-timeout 2");
    assert_warning(&out, &plugin, "timed out", "hang");
    assert!(
        took < Duration::from_secs(15),
        "hang: expected the timeout to end the run within 15 s, took {took:?}\n{}",
        describe(&out)
    );
}

#[test]
fn plugin_for_an_absent_device_type_is_skipped() {
    let model = make_model();
    let plugin = build_plugin("gpu_only");
    let out = optimize(&model, &[&plugin], &[], &[]);
    assert_unchanged(&model, &out, "gpu_only on a CPU graph");
}

#[test]
fn device_type_option_runs_the_plugin() {
    let model = make_model();
    let plugin = build_plugin("gpu_only");
    let out = optimize(&model, &[&plugin], &["--device-type", "GPU"], &[]);
    assert_rewritten(&model, &out, "gpu_only --device-type GPU");
}

#[test]
fn old_config_layout_is_read_by_its_struct_size() {
    let model = make_model();
    let plugin = build_plugin("old_layout");
    let out = optimize(&model, &[&plugin], &[], &[]);
    assert_exit(&out, 0, "old_layout");
    let text = stdout_and_stderr(&out);
    assert!(
        has_line_with(&text, &["remapping", "off"]),
        "old_layout: expected a line reporting remapping off\n{}",
        describe(&out)
    );
    // Offset 64 is remapping in the 88-byte layout but layout_optimizer in the 92-byte one.
    assert!(
        !has_line_with(&text, &["layout_optimizer", "off"]),
        "old_layout: the 88-byte configs were read with the 92-byte layout\n{}",
        describe(&out)
    );
}

fn check_counting(extra: &[&str]) {
    let model = make_model();
    let plugin = build_plugin("counting");
    let count_file = model.tmp.path().join("counts");
    let out = optimize(
        &model,
        &[&plugin],
        extra,
        &[("UNBOUND_COUNT_FILE", &count_file)],
    );
    assert_unchanged(&model, &out, "counting");
    let log = std::fs::read_to_string(&count_file).unwrap_or_default();
    let count = |event: &str| log.lines().filter(|l| *l == event).count();
    let what = format!("counting {extra:?}: events\n{log}\n{}", describe(&out));
    assert_eq!(
        count("optimize-bad-handle"),
        0,
        "optimize got another handle than create's: {what}"
    );
    assert_eq!(
        count("destroy-bad-handle"),
        0,
        "destroy got another handle than create's: {what}"
    );
    assert!(count("create") >= 1, "create never called: {what}");
    assert_eq!(
        count("create"),
        count("destroy"),
        "create vs destroy: {what}"
    );
    assert!(count("optimize") >= 1, "optimize never called: {what}");
    assert_eq!(
        count("dealloc"),
        count("optimize"),
        "outputs released vs optimize calls: {what}"
    );
}

#[test]
fn lifetimes_are_paired() {
    check_counting(&[]);
}

#[test]
fn lifetimes_are_paired_when_isolated() {
    check_counting(&["--isolate"]);
}

#[test]
fn plugin_dir_loads_every_shared_object() {
    let model = make_model();
    let dir = model.tmp.path().join("plugins");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        build_plugin("identity_remover"),
        dir.join("identity_remover.so"),
    )
    .unwrap();
    std::fs::copy(build_plugin("gpu_only"), dir.join("gpu_only.so")).unwrap();
    // Not a shared object: loading it would fail the run.
    std::fs::write(dir.join("notes.txt"), "not a plugin").unwrap();
    let out = optimize(&model, &[], &["--plugin-dir", dir.to_str().unwrap()], &[]);
    assert_rewritten(&model, &out, "--plugin-dir");
    assert!(
        stdout_and_stderr(&out).contains("gpu_only.so"),
        "--plugin-dir: expected gpu_only.so (loaded, skipped on a CPU graph) to be mentioned\n{}",
        describe(&out)
    );
}

#[test]
fn plugin_linked_against_tensorflow_libraries_loads() {
    let model = make_model();
    let plugin = build_tf_linked_plugin();
    let out = optimize(&model, &[&plugin], &[], &[]);
    assert_rewritten(&model, &out, "tf_linked (DT_NEEDED TensorFlow's libraries)");
}

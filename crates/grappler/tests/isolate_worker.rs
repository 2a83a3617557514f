//! `--isolate` starts the worker found through `HostOptions::worker`, then `UNBOUND_WORKER`,
//! then the host's own executable.
//!
//! This test has its own `main` (`harness = false`): run with the worker argument, it is the
//! worker. The workers the host starts are shell scripts that note each start in a file and
//! `exec` this executable, so the test sees which one was started. The plugin is
//! `examples/echo_plugin.c` (returns its input), compiled here with `cc` (or `$CC`).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use unbound_grappler::host::{CallResult, HostOptions, PluginSet};
use unbound_grappler::isolate::{worker_executable, worker_main, WORKER_ARG, WORKER_ENV};
use unbound_grappler::{GrapplerError, PluginFault};
use unbound_proto::tensorflow::{GraphDef, MetaGraphDef, NodeDef};

fn main() {
    if std::env::args().nth(1).as_deref() == Some(WORKER_ARG) {
        std::process::exit(worker_main());
    }
    // Nothing else in this process reads the environment while these run: one at a time.
    std::env::remove_var(WORKER_ENV);
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let plugin = build_echo_plugin(tmp.path());
    let named = Script::new(tmp.path(), "named");
    let from_env = Script::new(tmp.path(), "from_env");

    // The explicit path is used, and the worker it starts runs the plugin.
    let mut set = load(&plugin, Some(&named.path)).expect("the plugin loads in the named worker");
    assert_eq!(set.plugins()[0].1, "CPU");
    run_once(&mut set);
    drop(set);
    assert_eq!(named.starts(), 1, "the named worker was started once");

    // Without it, UNBOUND_WORKER is used; with both, the explicit path wins.
    std::env::set_var(WORKER_ENV, &from_env.path);
    let mut set = load(&plugin, None).expect("the plugin loads in the UNBOUND_WORKER worker");
    run_once(&mut set);
    drop(set);
    assert_eq!(
        from_env.starts(),
        1,
        "the UNBOUND_WORKER worker was started"
    );
    drop(load(&plugin, Some(&named.path)).expect("loads"));
    assert_eq!(named.starts(), 2, "the named worker was started again");
    assert_eq!(
        from_env.starts(),
        1,
        "UNBOUND_WORKER was not used over the named worker"
    );
    std::env::remove_var(WORKER_ENV);

    // A named worker that does not exist is an error naming it and the plugin, not a fallback.
    let missing = tmp.path().join("no-such-worker");
    match load(&plugin, Some(&missing)) {
        Err(GrapplerError::Plugin {
            path,
            fault: PluginFault::WorkerNotStarted { worker, .. },
        }) => {
            assert_eq!(path, plugin);
            assert_eq!(worker, missing);
        }
        Err(other) => panic!("unexpected error: {other}"),
        Ok(_) => panic!("a missing worker was not reported"),
    }

    // With neither, the host's own executable.
    assert_eq!(
        worker_executable(None).expect("current_exe"),
        std::env::current_exe().expect("current_exe")
    );
    assert_eq!(
        worker_executable(Some(&missing)).expect("explicit"),
        missing
    );
    println!("isolate_worker: ok");
}

fn load(plugin: &Path, worker: Option<&Path>) -> Result<PluginSet, GrapplerError> {
    let options = HostOptions {
        isolate: true,
        worker: worker.map(Path::to_path_buf),
        ..HostOptions::default()
    };
    PluginSet::load(&[plugin.to_path_buf()], options)
}

/// Optimizes a one-node CPU graph; the echo plugin returns it as it was given.
fn run_once(set: &mut PluginSet) {
    let meta = MetaGraphDef {
        graph_def: Some(GraphDef {
            node: vec![NodeDef {
                name: "n".into(),
                op: "NoOp".into(),
                device: "/device:CPU:0".into(),
                ..NodeDef::default()
            }],
            ..GraphDef::default()
        }),
        ..MetaGraphDef::default()
    };
    let (graph, report) = set.optimize_meta_graph(meta);
    assert_eq!(graph.node.len(), 1);
    assert_eq!(report.calls.len(), 1, "{report:?}");
    assert_eq!(report.calls[0].result, CallResult::Identical, "{report:?}");
}

/// A worker script that appends a line to its log on each start, then runs this executable.
struct Script {
    path: PathBuf,
    log: PathBuf,
}

impl Script {
    fn new(dir: &Path, name: &str) -> Self {
        let path = dir.join(format!("{name}.sh"));
        let log = dir.join(format!("{name}.log"));
        let exe = std::env::current_exe().expect("current_exe");
        let text = format!(
            "#!/bin/sh\necho \"$1\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            exe.display()
        );
        fs::write(&path, text).expect("writing the worker script");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
        Self { path, log }
    }

    /// How many times the script was started as a worker.
    fn starts(&self) -> usize {
        fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|line| *line == WORKER_ARG)
            .count()
    }
}

fn build_echo_plugin(dir: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/echo_plugin.c");
    let out = dir.join("echo_plugin.so");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(cc)
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&out)
        .arg(&source)
        .status()
        .expect("running cc");
    assert!(status.success(), "compiling {}", source.display());
    out
}

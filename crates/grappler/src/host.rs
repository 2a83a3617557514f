//! The plugin set and the pass over one MetaGraphDef: which plugins run on which graph, in
//! what order, and what each call did.
//!
//! As in TensorFlow's meta optimizer: a plugin runs on a graph when its device type occurs in
//! the graph's `NodeDef.device` fields (or is one the user names); plugins run in the order
//! they were loaded; the main graph is optimized first, then each function of its library as
//! a graph of its own; a failing plugin leaves the previous graph in place. Unlike TensorFlow,
//! each plugin runs once per graph (TensorFlow's meta optimizer runs its passes twice), and a
//! plugin that fails to register is an error, not a process abort.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use prost::Message;
use unbound_proto::tensorflow::{GraphDef, MetaGraphDef};

use crate::configs::{combine, CombinedConfigs};
use crate::error::GrapplerError;
use crate::isolate::{worker_executable, IsolatedPlugin};
use crate::item::GrapplerItem;
use crate::plugin::load_plugin;
use crate::runner::{judge, Outcome, PluginRunner};
use unbound_graph::{rewrite_functions, FunctionGraph, FunctionNote, FunctionRewriter, OpLibrary};

/// How plugins are loaded and run.
#[derive(Debug, Clone)]
pub struct HostOptions {
    /// Run each plugin in a child process.
    pub isolate: bool,
    /// With `isolate`: how long one plugin call may take before its process is killed.
    pub timeout: Duration,
    /// Device types to treat as present in every graph, beyond those in `NodeDef.device`.
    pub device_types: Vec<String>,
    /// With `isolate`: the executable started as the plugin worker (with the argument
    /// [`crate::isolate::WORKER_ARG`]; see [`crate::isolate`]). None: the environment variable
    /// [`crate::isolate::WORKER_ENV`] (`UNBOUND_WORKER`) when set, else this process's own
    /// executable, which is right for the `unbound` binary but not for a host embedded in
    /// another program (a Python process is not the `unbound` binary).
    pub worker: Option<PathBuf>,
}

impl Default for HostOptions {
    fn default() -> Self {
        Self {
            isolate: false,
            timeout: Duration::from_secs(600),
            device_types: Vec::new(),
            worker: None,
        }
    }
}

/// The loaded plugins, at most one per device type.
pub struct PluginSet {
    plugins: Vec<Box<dyn PluginRunner>>,
    options: HostOptions,
}

/// The plugin files of a directory: every `*.so` or `*.so.<digits...>` file, sorted, as
/// TensorFlow's plugin discovery picks them.
pub fn plugins_in_dir(dir: &Path) -> Result<Vec<PathBuf>, GrapplerError> {
    let entries = std::fs::read_dir(dir).map_err(|source| GrapplerError::PluginDir {
        dir: dir.to_path_buf(),
        source,
    })?;
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let shared = name.ends_with(".so")
            || name
                .split_once(".so.")
                .is_some_and(|(_, v)| v.starts_with(|c: char| c.is_ascii_digit()));
        if shared && path.is_file() {
            found.push(path);
        }
    }
    found.sort();
    Ok(found)
}

impl PluginSet {
    /// Loads `paths` in order. Refuses a second plugin for a device type already taken (where
    /// TensorFlow aborts the process).
    pub fn load(paths: &[PathBuf], options: HostOptions) -> Result<Self, GrapplerError> {
        let mut plugins: Vec<Box<dyn PluginRunner>> = Vec::new();
        let mut worker = None;
        for path in paths {
            let plugin: Box<dyn PluginRunner> = if options.isolate {
                let worker = match &worker {
                    Some(worker) => worker,
                    None => worker.insert(worker_executable(options.worker.as_deref()).map_err(
                        |fault| GrapplerError::Plugin {
                            path: path.clone(),
                            fault,
                        },
                    )?),
                };
                Box::new(IsolatedPlugin::load(path, worker, options.timeout)?)
            } else {
                Box::new(load_plugin(path)?)
            };
            let device_type = &plugin.registration().device_type;
            if let Some(other) = plugins
                .iter()
                .find(|p| &p.registration().device_type == device_type)
            {
                return Err(GrapplerError::DeviceTypeTaken {
                    path: path.clone(),
                    device_type: device_type.clone(),
                    other: other.path().to_path_buf(),
                });
            }
            plugins.push(plugin);
        }
        Ok(Self { plugins, options })
    }

    /// The plugins, in load order: (file, device type).
    pub fn plugins(&self) -> Vec<(PathBuf, String)> {
        self.plugins
            .iter()
            .map(|p| (p.path().to_path_buf(), p.registration().device_type.clone()))
            .collect()
    }

    /// What TensorFlow would make of the built-in optimizers with these plugins loaded.
    pub fn combined_configs(&self) -> CombinedConfigs {
        let named: Vec<(String, &crate::configs::PluginConfigs)> = self
            .plugins
            .iter()
            .map(|p| (file_name(p.path()), &p.registration().configs))
            .collect();
        combine(&named)
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// What happened to one graph with one plugin.
#[derive(Debug, Clone)]
pub struct CallReport {
    /// The plugin file name.
    pub plugin: String,
    /// "main graph" or "function NAME".
    pub graph: String,
    /// Nodes before the call.
    pub nodes_before: usize,
    /// Nodes after it (equal to before unless the graph changed).
    pub nodes_after: usize,
    /// Wall time of the call, including the host's own work on its input and output.
    pub elapsed: Duration,
    /// What the call did.
    pub result: CallResult,
}

/// The result of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallResult {
    /// The plugin returned a new graph.
    Changed,
    /// The plugin returned ABORTED.
    Unchanged,
    /// The plugin returned OK with the very bytes it was given.
    Identical,
    /// The plugin failed; the previous graph was kept.
    Failed(String),
}

/// What a pass over one MetaGraphDef did.
#[derive(Debug, Default)]
pub struct PassReport {
    /// One entry per plugin call.
    pub calls: Vec<CallReport>,
    /// Graphs no plugin ran on, and why.
    pub skipped: Vec<String>,
    /// Problems that did not stop the pass.
    pub warnings: Vec<String>,
}

impl PluginSet {
    /// Runs the plugins on `meta`'s graph and on each function of its library. Returns the
    /// optimized graph and what happened. Takes `meta` by value so the graph is moved out, not
    /// copied: a graph past 2 GiB is held once, not twice.
    pub fn optimize_meta_graph(&mut self, mut meta: MetaGraphDef) -> (GraphDef, PassReport) {
        let mut report = PassReport::default();
        let mut graph = meta.graph_def.take().unwrap_or_default();
        let meta = &meta;
        let item = GrapplerItem::from_meta_graph(meta, &graph);
        let mut bytes = graph.encode_to_vec();
        if let Some(types) = self.device_types_of(&graph, &item.id, &mut report) {
            self.run_all(&item, &types, &mut graph, &mut bytes, &mut report);
        }
        self.optimize_functions(meta, &mut graph, &mut report);
        (graph, report)
    }

    /// Runs matching plugins on every function of `graph`'s library, replacing each function
    /// whose optimized graph converts back.
    fn optimize_functions(
        &mut self,
        meta: &MetaGraphDef,
        graph: &mut GraphDef,
        report: &mut PassReport,
    ) {
        let main_item = GrapplerItem::from_meta_graph(meta, graph);
        let ops = Arc::clone(&main_item.ops);
        let mut pass = FunctionPass {
            plugins: self,
            ops: Arc::clone(&ops),
            report,
        };
        rewrite_functions(graph, &ops, &mut pass);
    }

    /// The device types plugins are matched against for `graph`, or None (with the reason
    /// recorded) when no plugin will run on it.
    fn device_types_of(
        &self,
        graph: &GraphDef,
        id: &str,
        report: &mut PassReport,
    ) -> Option<BTreeSet<String>> {
        let mut types = match unbound_graph::device::graph_device_types(graph) {
            Ok(t) => t,
            Err(e) => {
                report.skipped.push(format!("{id}: {e}"));
                return None;
            }
        };
        types.extend(self.options.device_types.iter().cloned());
        let matching = self
            .plugins
            .iter()
            .any(|p| types.contains(&p.registration().device_type));
        if !matching {
            let found = if types.is_empty() {
                "no device is set on its nodes".to_string()
            } else {
                format!(
                    "its device types are {}",
                    types.iter().cloned().collect::<Vec<_>>().join(", ")
                )
            };
            report.skipped.push(format!(
                "{id}: no plugin for its device types ({found}; --device-type names more)"
            ));
            return None;
        }
        Some(types)
    }

    /// Runs each plugin whose device type is in `types` on `graph`, in order; each valid result
    /// replaces `graph` and `bytes`. Returns whether any plugin changed the graph.
    fn run_all(
        &mut self,
        item: &GrapplerItem,
        types: &BTreeSet<String>,
        graph: &mut GraphDef,
        bytes: &mut Vec<u8>,
        report: &mut PassReport,
    ) -> bool {
        let mut changed = false;
        for plugin in &mut self.plugins {
            if !types.contains(&plugin.registration().device_type) {
                continue;
            }
            let start = Instant::now();
            let nodes_before = graph.node.len();
            let raw = plugin.run(item, Some(graph), bytes);
            let outcome = judge(raw, nodes_before);
            let (result, nodes_after) = match outcome {
                Outcome::Changed {
                    bytes: new_bytes, ..
                } if new_bytes == *bytes => (CallResult::Identical, nodes_before),
                Outcome::Changed {
                    graph: new,
                    bytes: new_bytes,
                } => {
                    *graph = *new;
                    *bytes = new_bytes;
                    changed = true;
                    (CallResult::Changed, graph.node.len())
                }
                Outcome::Unchanged => (CallResult::Unchanged, nodes_before),
                Outcome::Failed(message) => (CallResult::Failed(message), nodes_before),
            };
            report.calls.push(CallReport {
                plugin: file_name(plugin.path()),
                graph: item.id.clone(),
                nodes_before,
                nodes_after,
                elapsed: start.elapsed(),
                result,
            });
        }
        changed
    }
}

/// One pass of the plugins over a library's functions, as [`rewrite_functions`] drives it.
struct FunctionPass<'a> {
    plugins: &'a mut PluginSet,
    ops: Arc<OpLibrary>,
    report: &'a mut PassReport,
}

impl FunctionRewriter for FunctionPass<'_> {
    fn rewrite(&mut self, function: &FunctionGraph, graph: &mut GraphDef) -> bool {
        let item = GrapplerItem {
            id: function.id.clone(),
            fetch: function.fetch.clone(),
            feed: function.feed.clone(),
            keep_ops: function.keep_ops.clone(),
            ops: Arc::clone(&self.ops),
            ..Default::default()
        };
        let Some(types) = self.plugins.device_types_of(graph, &item.id, self.report) else {
            return false;
        };
        let mut bytes = graph.encode_to_vec();
        self.plugins
            .run_all(&item, &types, graph, &mut bytes, self.report)
    }

    fn note(&mut self, note: FunctionNote) {
        match note {
            FunctionNote::Skipped { id, error } => self
                .report
                .skipped
                .push(format!("{id}: cannot be turned into a graph: {error}")),
            FunctionNote::Kept { id, error } => self.report.warnings.push(format!(
                "{id}: the optimized graph does not convert back to a function ({error}); kept \
                 the original function"
            )),
        }
    }
}

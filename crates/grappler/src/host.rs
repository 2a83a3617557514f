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
use std::time::Duration;

use bytes::Bytes;
use prost::Message;
use unbound_proto::tensorflow::{GraphDef, MetaGraphDef};

use crate::configs::{combine, CombinedConfigs};
use crate::error::GrapplerError;
use crate::isolate::{worker_executable, IsolatedPlugin};
use crate::plugin::load_plugin;
use crate::runner::PluginRunner;

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

/// The plugin files of a directory: every `*.so` or `*.so.<digits...>` entry that is not a
/// directory, sorted, as TensorFlow's plugin discovery picks them.
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
        // Anything so named but a directory is taken: a FIFO, device or dangling link is then
        // refused by name when it is loaded (the one input rule), not skipped without a word.
        if shared && !path.is_dir() {
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

pub(crate) fn file_name(path: &Path) -> String {
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
    /// The part of `elapsed` spent in the plugin's own code (in a worker process, with
    /// `--isolate`): `elapsed` minus this is the host's overhead.
    pub plugin_time: Duration,
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

impl PassReport {
    /// Time spent in the plugins' own code over all calls.
    pub fn plugin_time(&self) -> Duration {
        self.calls.iter().map(|c| c.plugin_time).sum()
    }
}

impl PluginSet {
    /// Runs the plugins on `meta`'s graph and on each function of its library. Returns the
    /// optimized graph and what happened. The decoded form of
    /// [`PluginSet::optimize_serialized`], which is what `unbound optimize` runs: the graph is
    /// serialized once for it and the result decoded once. A graph that does not serialize
    /// back into a GraphDef (it always does) is returned as it was.
    pub fn optimize_meta_graph(&mut self, mut meta: MetaGraphDef) -> (GraphDef, PassReport) {
        let graph = meta.graph_def.take().unwrap_or_default();
        let bytes = Bytes::from(graph.encode_to_vec());
        match self.optimize_serialized(&meta, bytes) {
            Ok((None, report)) => (graph, report),
            Ok((Some(new), report)) => match GraphDef::decode(new.as_slice()) {
                Ok(new) => (new, report),
                Err(_) => (graph, report),
            },
            Err(e) => {
                let report = PassReport {
                    skipped: vec![format!("main graph: {e}")],
                    ..PassReport::default()
                };
                (graph, report)
            }
        }
    }

    /// The loaded plugins, to run them.
    pub(crate) fn plugins_mut(&mut self) -> impl Iterator<Item = &mut Box<dyn PluginRunner>> {
        self.plugins.iter_mut()
    }

    /// The device types plugins are matched against for the graph `id` whose nodes name
    /// `types`, or None (with the reason recorded) when no plugin will run on it.
    pub(crate) fn device_types_of(
        &self,
        types: Result<BTreeSet<String>, unbound_graph::device::DeviceError>,
        id: &str,
        report: &mut PassReport,
    ) -> Option<BTreeSet<String>> {
        let mut types = match types {
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
}

//! The host's errors: [`GrapplerError`] for what stops a run (a plugin that does not load or
//! register, a second plugin for a device type, the model that cannot be read or written), with
//! [`PluginFault`] saying what is wrong with one plugin file.
//!
//! What goes wrong *while* a plugin optimizes a graph does not stop the run: it is reported per
//! call ([`crate::host::CallResult::Failed`]) and the previous graph is kept.

use std::path::PathBuf;
use std::time::Duration;

use unbound_savedmodel::SavedModelError;

use crate::abi::code;

/// An error of the plugin host.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GrapplerError {
    /// A plugin failed to load or register.
    #[error("plugin {}: {fault}", path.display())]
    Plugin {
        /// The plugin file.
        path: PathBuf,
        /// What is wrong with it (TensorFlow's message where TensorFlow has one).
        fault: PluginFault,
    },
    /// A plugin registered for a device type another loaded plugin already has (TensorFlow
    /// aborts the process on this).
    #[error(
        "plugin {}: a plugin optimizer for device type {device_type} is already registered \
         (by {}); TensorFlow allows one per device type",
        path.display(),
        other.display()
    )]
    DeviceTypeTaken {
        /// The plugin refused.
        path: PathBuf,
        /// The device type both register.
        device_type: String,
        /// The plugin loaded first, which keeps it.
        other: PathBuf,
    },
    /// A `--plugin-dir` directory could not be listed.
    #[error("plugin {}: cannot read the plugin directory: {source}", dir.display())]
    PluginDir {
        /// The directory.
        dir: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The graph handed to the pass is not a GraphDef (or its library does not decode).
    #[error("the graph does not decode: {fault}")]
    Graph {
        /// What is wrong.
        fault: String,
    },
    /// The SavedModel could not be read, or the optimized one written.
    #[error(transparent)]
    Model(#[from] SavedModelError),
}

/// What is wrong with a serialized `GraphDef` read at the wire level
/// ([`crate::serialized::scan_graph`], [`crate::serialized::splice_library`]): the bytes are not
/// a GraphDef at the depth the host reads (its nodes' names and devices, its library and
/// versions). The pass reports it as [`GrapplerError::Graph`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GraphFault {
    /// A field of the GraphDef (or of its library) does not decode.
    #[error("{0}")]
    Malformed(unbound_wire::DecodeError),
    /// A field of a NodeDef does not decode.
    #[error("a NodeDef: {0}")]
    MalformedNode(unbound_wire::DecodeError),
    /// A string field (`NodeDef.name`, `NodeDef.device`) that is not UTF-8.
    #[error("{field} is not UTF-8")]
    NotUtf8 {
        /// The field, as `Message.field`.
        field: &'static str,
    },
    /// The `versions` field does not decode as a `VersionDef`.
    #[error("GraphDef.versions: {0}")]
    Versions(prost::DecodeError),
}

/// What is wrong with one plugin file, or with loading it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginFault {
    /// The path is not a file.
    #[error("no such file")]
    NoSuchFile,
    /// The path is a FIFO, a device, a socket or a directory (after symbolic links).
    #[error("not a regular file (a {0})")]
    NotRegularFile(&'static str),
    /// The file could not be read.
    #[error("cannot read: {0}")]
    Unreadable(String),
    /// The file is not an ELF shared object for this machine, or its headers or segments run
    /// past its end: refused before the dynamic loader maps it (which would crash on it).
    #[error("not a loadable shared object: {0}")]
    NotSharedObject(String),
    /// `dlopen` refused it.
    #[error("cannot load: {0}")]
    CannotLoad(libloading::Error),
    /// It exports no `TF_InitGraph`.
    #[error("no TF_InitGraph symbol: not a graph optimizer plugin")]
    NotAPlugin,
    /// `TF_InitGraph` set an error status.
    #[error("TF_InitGraph failed: {0}")]
    InitFailed(StatusError),
    /// `TF_InitGraph` left a required field unset: TensorFlow's FAILED_PRECONDITION message.
    #[error("{code}: {message}", code = code::name(code::FAILED_PRECONDITION), message = .0)]
    Registration(&'static str),
    /// The registered `device_type` is not UTF-8.
    #[error("device_type is not UTF-8")]
    DeviceTypeNotUtf8,
    /// With `--isolate`: the worker executable could not be found.
    #[error("cannot find the host executable: {0}")]
    NoWorker(std::io::Error),
    /// With `--isolate`: the worker process could not be started.
    #[error("cannot start the worker process: {source}")]
    WorkerNotStarted {
        /// The worker executable.
        worker: PathBuf,
        /// Why it did not start.
        source: std::io::Error,
    },
    /// With `--isolate`: the worker ended while loading the plugin.
    #[error("the worker {0} while loading the plugin")]
    WorkerEnded(WorkerEnd),
    /// With `--isolate`: the worker could not load the plugin; its message (the worker's
    /// [`PluginFault`], as text).
    #[error("{0}")]
    InWorker(String),
}

/// How an `--isolate` worker process stopped serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerEnd {
    /// It was killed by a signal.
    #[error("crashed ({})", signal_name(*.0))]
    Crashed(i32),
    /// It exited.
    #[error("exited with status {0}")]
    Exited(i32),
    /// The request could not be written to it, and how it ended is unknown.
    #[error("could not send the request ({0})")]
    NotSent(std::io::Error),
    /// Its replies stopped, and how it ended is unknown.
    #[error("stopped answering")]
    StoppedAnswering,
    /// It did not answer within the timeout and was killed.
    #[error("timed out after {} s; killed", .0.as_secs_f64())]
    TimedOut(Duration),
}

/// "signal 11, SIGSEGV" for the usual crash signals.
fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGTRAP => "SIGTRAP",
        _ => return format!("signal {sig}"),
    };
    format!("signal {sig}, {name}")
}

/// A `TF_Status` that is not OK, as TensorFlow prints it: "CODE: message".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", code::name(*code))]
pub struct StatusError {
    /// The `TF_Code`.
    pub code: i32,
    /// The message.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_file_and_the_fault() {
        let e = GrapplerError::Plugin {
            path: "/p/x.so".into(),
            fault: PluginFault::Registration("'optimize_func' field in TP_Optimizer must be set."),
        };
        assert_eq!(
            e.to_string(),
            "plugin /p/x.so: FAILED_PRECONDITION: 'optimize_func' field in TP_Optimizer must \
             be set."
        );
        let e = GrapplerError::DeviceTypeTaken {
            path: "b.so".into(),
            device_type: "CPU".into(),
            other: "a.so".into(),
        };
        assert!(e.to_string().starts_with("plugin b.so: "));
        assert!(e.to_string().contains("already registered (by a.so)"));
        let status = StatusError {
            code: code::INTERNAL,
            message: "no supported hardware found".into(),
        };
        let fault = PluginFault::InitFailed(status);
        assert_eq!(
            fault.to_string(),
            "TF_InitGraph failed: INTERNAL: no supported hardware found"
        );
        assert_eq!(
            WorkerEnd::Crashed(libc::SIGSEGV).to_string(),
            "crashed (signal 11, SIGSEGV)"
        );
        assert_eq!(
            PluginFault::WorkerEnded(WorkerEnd::TimedOut(Duration::from_secs(2))).to_string(),
            "the worker timed out after 2 s; killed while loading the plugin"
        );
    }
}

//! Running a plugin in a child process (`--isolate`), so a plugin that crashes or hangs cannot
//! take the host down or corrupt its output.
//!
//! The child is a worker executable started with the one argument [`WORKER_ARG`]; its `main`
//! must hand over to [`worker_main`] when it sees that argument (the `unbound` binary does). Which
//! executable ([`worker_executable`]): [`crate::host::HostOptions::worker`] when set, else the
//! one the environment variable [`WORKER_ENV`] (`UNBOUND_WORKER`) names, else the host's own
//! executable (`current_exe()`). A host that is not such an executable (a Python process, say)
//! names one, for instance the `unbound` binary. Parent and child exchange length-prefixed
//! protobuf frames over the child's stdin and stdout; the child moves the plugin's own stdout
//! to stderr first, so nothing a plugin prints can corrupt a frame. A child that dies is
//! reported with its signal and restarted for the next graph; one that does not answer within
//! the timeout is killed.
//!
//! A graph crosses the pipe once, written straight from the host's bytes; the item's op
//! sources (function library, stripped ops) are sent once per worker and set of sources, not
//! with every graph: a model of thousands of functions is thousands of calls with one library.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use prost::Message;
use unbound_graph::functions::LibraryIndex;
use unbound_proto::tensorflow::OpList;
use unbound_wire::codec::{key_len, put_key, put_varint, varint_len, WireType};

use crate::abi::{CONFIG_FIELD_COUNT, TP_OPTIMIZER_CONFIGS_STRUCT_SIZE};
use crate::configs::{ConfigsLayout, PluginConfigs, TriState};
use crate::error::{GrapplerError, PluginFault, WorkerEnd};
use crate::item::{GrapplerItem, OpSources};
use crate::plugin::{open_plugin, RawOutcome, Registration};
use crate::runner::PluginRunner;
use unbound_graph::ops::OpLibrary;

/// The argument that turns the host executable into a plugin worker.
pub const WORKER_ARG: &str = "__unbound-plugin-worker";

/// The environment variable naming the worker executable when
/// [`crate::host::HostOptions::worker`] is not set.
pub const WORKER_ENV: &str = "UNBOUND_WORKER";

/// The executable started as the plugin worker: `explicit` when given, else the path in
/// [`WORKER_ENV`] when that is set and not empty, else this process's own executable.
pub fn worker_executable(explicit: Option<&Path>) -> Result<PathBuf, PluginFault> {
    if let Some(path) = explicit {
        return Ok(path.to_path_buf());
    }
    match std::env::var_os(WORKER_ENV) {
        Some(path) if !path.is_empty() => Ok(PathBuf::from(path)),
        _ => std::env::current_exe().map_err(PluginFault::NoWorker),
    }
}

/// Largest frame accepted from the other side (a GraphDef can exceed protobuf's 2 GiB, but not
/// this).
const MAX_FRAME: u64 = 64 << 30;

/// Parent to child: load a plugin, or optimize one graph.
#[derive(Clone, PartialEq, Message)]
struct Request {
    #[prost(string, tag = "1")]
    plugin_path: String,
    #[prost(bool, tag = "2")]
    optimize: bool,
    /// Not encoded with the rest: [`write_request`] appends it from the host's own bytes.
    #[prost(bytes = "bytes", tag = "3")]
    graph: Bytes,
    #[prost(string, tag = "4")]
    id: String,
    #[prost(string, repeated, tag = "5")]
    fetch: Vec<String>,
    #[prost(string, repeated, tag = "6")]
    feed: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    init_ops: Vec<String>,
    #[prost(string, repeated, tag = "8")]
    keep_ops: Vec<String>,
    #[prost(string, repeated, tag = "9")]
    save_restore: Vec<String>,
    /// A serialized `FunctionDefLibrary`, when `has_sources`.
    #[prost(bytes = "bytes", tag = "10")]
    library: Bytes,
    /// A serialized `OpList`, when `has_sources`.
    #[prost(bytes = "bytes", tag = "11")]
    stripped_ops: Bytes,
    /// The [`OpSources::id`] of the item's ops.
    #[prost(uint64, tag = "12")]
    sources_id: u64,
    /// Whether `library` and `stripped_ops` are sent (the worker does not have them yet).
    #[prost(bool, tag = "13")]
    has_sources: bool,
}

/// Child to parent.
#[derive(Clone, PartialEq, Message)]
struct Reply {
    /// 0 loaded, 1 output, 2 aborted, 3 error.
    #[prost(int32, tag = "1")]
    kind: i32,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(bytes = "bytes", tag = "3")]
    output: Bytes,
    #[prost(string, tag = "4")]
    device_type: String,
    #[prost(uint64, tag = "5")]
    configs_struct_size: u64,
    #[prost(uint32, repeated, tag = "6")]
    configs: Vec<u32>,
    /// How long the plugin's own code ran, in nanoseconds.
    #[prost(uint64, tag = "7")]
    plugin_nanos: u64,
}

const LOADED: i32 = 0;
const OUTPUT: i32 = 1;
const ABORTED: i32 = 2;
const ERROR: i32 = 3;

/// Writes `head` with `bytes` as its field `number` (a bytes field `head` leaves empty),
/// appended after the other fields straight from the caller's bytes, so a large graph is not
/// copied first; nothing is appended when `bytes` is empty.
fn write_frame_with(
    out: &mut dyn Write,
    head: &impl Message,
    number: u32,
    bytes: &[u8],
) -> std::io::Result<()> {
    let head = head.encode_to_vec();
    let mut field = Vec::with_capacity(16);
    if !bytes.is_empty() {
        put_key(number, WireType::Len, &mut field);
        put_varint(bytes.len() as u64, &mut field);
    }
    let len = head.len() as u64 + field.len() as u64 + bytes.len() as u64;
    debug_assert!(
        bytes.is_empty() || field.len() as u64 == key_len(number) + varint_len(bytes.len() as u64)
    );
    if bytes.len() < JOIN_BELOW {
        // One write: each write to the pipe can wake the other side, and a model of thousands
        // of functions is thousands of small frames.
        let mut frame = Vec::with_capacity(8 + len as usize);
        frame.extend_from_slice(&len.to_le_bytes());
        frame.extend_from_slice(&head);
        frame.extend_from_slice(&field);
        frame.extend_from_slice(bytes);
        out.write_all(&frame)?;
    } else {
        out.write_all(&len.to_le_bytes())?;
        out.write_all(&head)?;
        out.write_all(&field)?;
        out.write_all(bytes)?;
    }
    out.flush()
}

/// Frames whose appended bytes are shorter than this are joined and written in one call;
/// longer ones are written from the caller's bytes, not copied.
const JOIN_BELOW: usize = 1 << 20;

/// Writes `request` (whose own `graph` is empty) with `graph` as its field 3.
fn write_request(out: &mut dyn Write, request: &Request, graph: &[u8]) -> std::io::Result<()> {
    write_frame_with(out, request, 3, graph)
}

/// Writes `reply` with its `output` (field 3) appended from its own bytes rather than copied
/// into the encoding with the rest: the optimized graph, as large as the model.
fn write_reply(out: &mut dyn Write, mut reply: Reply) -> std::io::Result<()> {
    let output = std::mem::take(&mut reply.output);
    write_frame_with(out, &reply, 3, &output)
}

fn read_frame<M: Message + Default>(input: &mut dyn Read) -> std::io::Result<M> {
    let mut len = [0u8; 8];
    input.read_exact(&mut len)?;
    let len = u64::from_le_bytes(len);
    if len > MAX_FRAME {
        return Err(std::io::Error::other(format!("frame of {len} bytes")));
    }
    let mut bytes = Vec::new();
    // The peer is our own worker or host, but the length still comes from a pipe: reserve
    // what it says only if that can be had, else let the vector grow as bytes arrive.
    let _ = bytes.try_reserve_exact(usize::try_from(len).unwrap_or(usize::MAX));
    input.take(len).read_to_end(&mut bytes)?;
    if bytes.len() as u64 != len {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    // Decoded from `Bytes`, the large fields (graphs) are slices of the frame, not copies.
    M::decode(Bytes::from(bytes)).map_err(std::io::Error::other)
}

/// The child side: serve requests on stdin until it closes. Returns the process exit code.
pub fn worker_main() -> i32 {
    // SAFETY: plain fd juggling on fds 1 and 2 of this process: keep the real stdout for frames
    // and point fd 1 at stderr for whatever the plugin prints.
    let frames_fd = unsafe {
        let fd = libc::dup(1);
        if fd < 0 || libc::dup2(2, 1) < 0 {
            return 2;
        }
        fd
    };
    // SAFETY: frames_fd is a fresh descriptor owned from here on.
    let mut frames: std::fs::File = unsafe { std::os::fd::FromRawFd::from_raw_fd(frames_fd) };
    // Requests are read from fd 0 itself, buffered here: std's stdin buffers too, and the
    // reader below must see only whether the pipe itself has bytes.
    // SAFETY: fd 0 is this process's stdin, owned by this loop from here on (nothing else in
    // the worker reads stdin).
    let requests: std::fs::File = unsafe { std::os::fd::FromRawFd::from_raw_fd(0) };
    let mut stdin = std::io::BufReader::with_capacity(1 << 16, AwakeReader(requests));
    let mut plugin = None;
    let mut ops = None;
    loop {
        let request: Request = match read_frame(&mut stdin) {
            Ok(r) => r,
            Err(_) => return 0,
        };
        let reply = serve(&mut plugin, &mut ops, request);
        if write_reply(&mut frames, reply).is_err() {
            return 1;
        }
    }
}

/// A pipe read after waiting for it awake for up to [`SPIN`]: the host sends a function's
/// graph every few hundred microseconds while it walks a library, and a worker asleep between
/// two was woken for each, which took longer than serving it on a virtual machine (issue 15).
struct AwakeReader(std::fs::File);

impl Read for AwakeReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::fd::AsRawFd;
        let start = std::time::Instant::now();
        let mut ready = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        while start.elapsed() < SPIN {
            // SAFETY: one pollfd of a descriptor this reader owns; a zero timeout only asks.
            if unsafe { libc::poll(&mut ready, 1, 0) } != 0 {
                break;
            }
            std::hint::spin_loop();
        }
        self.0.read(buf)
    }
}

/// The ops a worker holds: the sources' id, the sources and what they build.
type WorkerOps = Option<(Arc<OpSources>, Arc<OpLibrary>)>;

fn serve(
    plugin: &mut Option<crate::plugin::LoadedPlugin>,
    ops: &mut WorkerOps,
    request: Request,
) -> Reply {
    let mut reply = Reply::default();
    if !request.optimize {
        match open_plugin(Path::new(&request.plugin_path)) {
            Ok(p) => {
                reply.kind = LOADED;
                reply.device_type = p.registration.device_type.clone();
                let (size, words) = raw_configs(&p.registration.configs);
                reply.configs_struct_size = size;
                reply.configs = words;
                *plugin = Some(p);
            }
            Err(fault) => {
                reply.kind = ERROR;
                reply.message = fault.to_string();
            }
        }
        return reply;
    }
    let Some(p) = plugin.as_mut() else {
        reply.kind = ERROR;
        reply.message = "no plugin loaded".to_string();
        return reply;
    };
    if request.has_sources {
        match worker_ops(&request) {
            Ok(built) => *ops = Some(built),
            Err(message) => {
                reply.kind = ERROR;
                reply.message = message;
                return reply;
            }
        }
    }
    let Some((sources, library)) = ops.as_ref().filter(|(s, _)| s.id == request.sources_id) else {
        reply.kind = ERROR;
        reply.message = format!("the worker lacks op sources {}", request.sources_id);
        return reply;
    };
    let item = GrapplerItem {
        id: request.id,
        fetch: request.fetch,
        feed: request.feed,
        init_ops: request.init_ops,
        keep_ops: request.keep_ops,
        save_restore: request.save_restore,
        ops: Arc::clone(library),
        sources: Arc::clone(sources),
    };
    let (outcome, plugin_time) = p.run(&item, &request.graph);
    reply.plugin_nanos = u64::try_from(plugin_time.as_nanos()).unwrap_or(u64::MAX);
    match outcome {
        RawOutcome::Output(bytes) => {
            reply.kind = OUTPUT;
            reply.output = Bytes::from(bytes);
        }
        RawOutcome::Aborted => reply.kind = ABORTED,
        RawOutcome::Error(message) => {
            reply.kind = ERROR;
            reply.message = message;
        }
    }
    reply
}

/// The ops of the sources a request carries, built as the host built them.
fn worker_ops(request: &Request) -> Result<(Arc<OpSources>, Arc<OpLibrary>), String> {
    let index = LibraryIndex::new(&request.library).map_err(|e| e.to_string())?;
    let stripped = match request.stripped_ops.is_empty() {
        true => None,
        false => Some(OpList::decode(request.stripped_ops.clone()).map_err(|e| e.to_string())?),
    };
    let ops = Arc::new(index.op_library(stripped.as_ref()));
    let sources = OpSources {
        id: request.sources_id,
        library: request.library.clone(),
        stripped_ops: request.stripped_ops.clone(),
    };
    Ok((Arc::new(sources), ops))
}

/// The configs as sent to the parent: the layout's `struct_size` and one `TF_TriState` word
/// per field of [`crate::abi::CONFIG_FIELDS`].
fn raw_configs(configs: &PluginConfigs) -> (u64, Vec<u32>) {
    let words = configs.values.iter().map(|t| t.to_raw()).collect();
    (configs.layout.struct_size() as u64, words)
}

/// The configs [`raw_configs`] sent (missing words read as Default).
fn configs_from_raw(struct_size: u64, words: &[u32]) -> PluginConfigs {
    let mut values = [TriState::Default; CONFIG_FIELD_COUNT];
    for (value, &word) in values.iter_mut().zip(words) {
        *value = TriState::from_raw(word);
    }
    let struct_size = usize::try_from(struct_size).unwrap_or(usize::MAX);
    PluginConfigs {
        layout: ConfigsLayout::from_struct_size(struct_size),
        values,
    }
}

/// A plugin running in a child process.
pub struct IsolatedPlugin {
    path: PathBuf,
    worker: PathBuf,
    registration: Registration,
    timeout: Duration,
    child: Option<Worker>,
}

struct Worker {
    /// The [`OpSources::id`] this worker was last sent.
    sources_id: Option<u64>,
    child: Child,
    stdin: ChildStdin,
    replies: Receiver<std::io::Result<Reply>>,
}

/// Bytes a worker pipe is asked to hold: Linux's default (64 KiB) made a graph of hundreds of
/// megabytes cross in tens of thousands of writes, each a switch between the two processes
/// (issue 15). 1 MiB is the most an unprivileged process may ask by default
/// (`/proc/sys/fs/pipe-max-size`).
const PIPE_BYTES: libc::c_int = 1 << 20;

/// Asks the kernel to enlarge the pipe behind `end` to [`PIPE_BYTES`]; where it refuses (an
/// older kernel, a lower limit) the pipe keeps its size, which is only slower.
fn widen_pipe(end: &impl std::os::fd::AsRawFd) {
    // SAFETY: F_SETPIPE_SZ on a descriptor this process owns; it changes only the pipe's
    // capacity, and a failure is returned, not raised.
    #[cfg(target_os = "linux")]
    unsafe {
        libc::fcntl(end.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_BYTES);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = end;
}

/// How long a call waits for its reply awake before it sleeps ([`Worker::reply_within`]).
const SPIN: Duration = Duration::from_micros(200);

impl Worker {
    fn spawn(exe: &Path) -> std::io::Result<Self> {
        let mut child = Command::new(exe)
            .arg(WORKER_ARG)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no stdin"))?;
        let mut stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        widen_pipe(&stdin);
        widen_pipe(&stdout);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || loop {
            let reply = read_frame::<Reply>(&mut stdout);
            let stop = reply.is_err();
            if tx.send(reply).is_err() || stop {
                break;
            }
        });
        Ok(Self {
            sources_id: None,
            child,
            stdin,
            replies: rx,
        })
    }

    /// Sends `request`, with `graph` as its graph, and waits up to `timeout` for the reply.
    /// On failure the child is gone and the error says how it ended.
    fn call(
        &mut self,
        request: &Request,
        graph: &[u8],
        timeout: Duration,
    ) -> Result<Reply, WorkerEnd> {
        if let Err(e) = write_request(&mut self.stdin, request, graph) {
            return Err(self.ended(WorkerEnd::NotSent(e)));
        }
        match self.reply_within(timeout) {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) | Err(RecvTimeoutError::Disconnected) => {
                Err(self.ended(WorkerEnd::StoppedAnswering))
            }
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                Err(WorkerEnd::TimedOut(timeout))
            }
        }
    }

    /// The next reply, waited for up to `timeout`. A reply that comes within [`SPIN`] is
    /// taken without this thread going to sleep: most replies to a function's graph come in a
    /// few dozen microseconds, and waking up a sleeping thread for each took longer than that
    /// on a virtual machine (issue 15: 10,000 calls, one per function, on the 3M-node model).
    fn reply_within(&self, timeout: Duration) -> Result<std::io::Result<Reply>, RecvTimeoutError> {
        let start = std::time::Instant::now();
        while start.elapsed() < SPIN.min(timeout) {
            match self.replies.try_recv() {
                Ok(reply) => return Ok(reply),
                Err(mpsc::TryRecvError::Disconnected) => {
                    return Err(RecvTimeoutError::Disconnected)
                }
                Err(mpsc::TryRecvError::Empty) => std::hint::spin_loop(),
            }
        }
        self.replies
            .recv_timeout(timeout.saturating_sub(start.elapsed()))
    }

    /// Waits for the child and says how it ended (`fallback` when that is unknown).
    fn ended(&mut self, fallback: WorkerEnd) -> WorkerEnd {
        match self.child.wait() {
            Ok(status) => {
                use std::os::unix::process::ExitStatusExt;
                match (status.signal(), status.code()) {
                    (Some(sig), _) => WorkerEnd::Crashed(sig),
                    (None, Some(code)) => WorkerEnd::Exited(code),
                    _ => fallback,
                }
            }
            Err(_) => fallback,
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl IsolatedPlugin {
    /// Starts `worker` (see [`worker_executable`]) and loads the plugin there. Registration
    /// errors, including a crash while registering, are returned like in-process ones.
    pub fn load(path: &Path, worker: &Path, timeout: Duration) -> Result<Self, GrapplerError> {
        let mut plugin = Self {
            path: path.to_path_buf(),
            worker: worker.to_path_buf(),
            registration: Registration {
                device_type: String::new(),
                configs: configs_from_raw(TP_OPTIMIZER_CONFIGS_STRUCT_SIZE as u64, &[]),
            },
            timeout,
            child: None,
        };
        plugin.start().map_err(|fault| GrapplerError::Plugin {
            path: path.to_path_buf(),
            fault,
        })?;
        Ok(plugin)
    }

    /// (Re)starts the worker and loads the plugin in it.
    fn start(&mut self) -> Result<(), PluginFault> {
        let mut worker =
            Worker::spawn(&self.worker).map_err(|source| PluginFault::WorkerNotStarted {
                worker: self.worker.clone(),
                source,
            })?;
        let request = Request {
            plugin_path: self.path.display().to_string(),
            ..Default::default()
        };
        let reply = worker
            .call(&request, &[], self.timeout)
            .map_err(PluginFault::WorkerEnded)?;
        if reply.kind != LOADED {
            return Err(PluginFault::InWorker(reply.message));
        }
        self.registration = Registration {
            device_type: reply.device_type,
            configs: configs_from_raw(reply.configs_struct_size, &reply.configs),
        };
        self.child = Some(worker);
        Ok(())
    }
}

impl PluginRunner for IsolatedPlugin {
    fn path(&self) -> &Path {
        &self.path
    }

    fn registration(&self) -> &Registration {
        &self.registration
    }

    fn run(&mut self, item: &GrapplerItem, graph_bytes: &[u8]) -> (RawOutcome, Duration) {
        if self.child.is_none() {
            if let Err(e) = self.start() {
                let error = format!("could not restart the plugin's worker: {e}");
                return (RawOutcome::Error(error), Duration::ZERO);
            }
        }
        let Some(worker) = self.child.as_mut() else {
            let error = "the plugin's worker is not running".to_string();
            return (RawOutcome::Error(error), Duration::ZERO);
        };
        let sources = &item.sources;
        let send_sources = worker.sources_id != Some(sources.id);
        let (library, stripped_ops) = match send_sources {
            true => (sources.library.clone(), sources.stripped_ops.clone()),
            false => (Bytes::new(), Bytes::new()),
        };
        let request = Request {
            plugin_path: self.path.display().to_string(),
            optimize: true,
            graph: Bytes::new(),
            id: item.id.clone(),
            fetch: item.fetch.clone(),
            feed: item.feed.clone(),
            init_ops: item.init_ops.clone(),
            keep_ops: item.keep_ops.clone(),
            save_restore: item.save_restore.clone(),
            library,
            stripped_ops,
            sources_id: sources.id,
            has_sources: send_sources,
        };
        match worker.call(&request, graph_bytes, self.timeout) {
            Ok(reply) => {
                worker.sources_id = Some(sources.id);
                let plugin_time = Duration::from_nanos(reply.plugin_nanos);
                let outcome = match reply.kind {
                    OUTPUT => RawOutcome::Output(reply.output.into()),
                    ABORTED => RawOutcome::Aborted,
                    _ => RawOutcome::Error(reply.message),
                };
                (outcome, plugin_time)
            }
            Err(e) => {
                // The worker is gone; the next graph starts a new one.
                self.child = None;
                (RawOutcome::Error(format!("the plugin {e}")), Duration::ZERO)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_cross_the_process_boundary_unchanged() {
        for layout in [ConfigsLayout::Current, ConfigsLayout::Before2_10] {
            let mut values = [TriState::Default; CONFIG_FIELD_COUNT];
            values[0] = TriState::On;
            values[13] = TriState::Off;
            values[18] = TriState::Invalid(7);
            let configs = PluginConfigs { layout, values };
            let (size, words) = raw_configs(&configs);
            assert_eq!(configs_from_raw(size, &words), configs);
        }
    }
}

//! Long work off the interpreter: the GIL released, Ctrl-C honoured.
//!
//! A binding hands its work to [`run`]. The work runs on a worker thread while the calling
//! thread waits without the GIL (so other Python threads go on) and wakes every 50 ms to let
//! Python deliver signals. On `KeyboardInterrupt` (or any exception a signal handler raises),
//! the worker's cancel token is set, so none of its temporary outputs may become a final file
//! ([`unbound_io::set_cancel_token`]), the temporaries in progress are removed, and the
//! exception is raised at once; the abandoned worker finishes on its own and writes nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;

/// How often the waiting thread lets Python check for signals.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Runs `work` on a worker thread with the GIL released, returning its result, or the
/// exception a signal raised meanwhile (see the module documentation).
pub fn run<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let token = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::sync_channel(1);
    let worker_token = token.clone();
    std::thread::Builder::new()
        .name("unbound-worker".into())
        .spawn(move || {
            unbound_io::set_cancel_token(Some(worker_token));
            let _ = tx.send(work());
        })
        .map_err(|e| {
            pyo3::exceptions::PyRuntimeError::new_err(format!("cannot start a worker thread: {e}"))
        })?;
    let mut rx = rx;
    loop {
        // The receiver is moved into the GIL-free closure and back: it is `Send`, not `Sync`.
        let (received, back) = py.detach(move || (rx.recv_timeout(SIGNAL_POLL), rx));
        rx = back;
        match received {
            Ok(value) => return Ok(value),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(pyo3::exceptions::PyRuntimeError::new_err(
                    "unbound: the worker thread stopped without a result (a bug: please report it)",
                ))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(interrupt) = py.check_signals() {
                    token.store(true, Ordering::SeqCst);
                    unbound_io::remove_temporaries();
                    return Err(interrupt);
                }
            }
        }
    }
}

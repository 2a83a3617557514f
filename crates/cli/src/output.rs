//! The one writer of standard output (and the one of standard error) for every command.
//!
//! The rule, the same for every subcommand:
//! - **A closed pipe** (`EPIPE`, e.g. `unbound inspect --json X | head -c 10`): the reader
//!   wants no more output, which is not a failure. Everything later written to standard
//!   output is dropped silently, the command runs to its end and exits with the code its
//!   work earned (0 when it succeeded; 1 when it failed, e.g. `verify` on a broken model,
//!   with its error on standard error). Never a signal, never a panic.
//! - **Any other write error** (`> /dev/full`, an I/O error): exit 1 with
//!   `unbound: error: writing to standard output: ...`. For `split` and `merge`, which print
//!   only after OUT was written, renamed into place and synced, the message also says that
//!   OUT is complete, so the failure is never mistaken for one of OUT.
//! - Standard error is best effort: a message that cannot be written is dropped.
//!
//! Commands print with [`out!`](crate::out) and [`outln!`](crate::outln), which return a
//! [`StdoutError`] through `?`.

use std::fmt;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write to standard output met a closed pipe; later output is dropped.
static PIPE_CLOSED: AtomicBool = AtomicBool::new(false);

/// Standard output could not be written (other than a closed pipe).
#[derive(Debug)]
pub struct StdoutError {
    source: std::io::Error,
    /// The output a command had already written completely when printing failed.
    written: Option<PathBuf>,
}

impl StdoutError {
    /// The same error, saying that `out` was written completely before printing failed.
    pub fn after_writing(mut self, out: &Path) -> Self {
        self.written = Some(out.to_path_buf());
        self
    }
}

impl fmt::Display for StdoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "writing to standard output: {}", self.source)?;
        if let Some(out) = &self.written {
            write!(
                f,
                " ({} was written and is complete; only this report is lost)",
                out.display()
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for StdoutError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Writes `args` to standard output and flushes it; after a closed pipe, does nothing.
pub fn write_stdout(args: fmt::Arguments<'_>) -> Result<(), StdoutError> {
    if PIPE_CLOSED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut stdout = std::io::stdout().lock();
    let result = stdout.write_fmt(args).and_then(|()| stdout.flush());
    match result {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => {
            PIPE_CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        Err(source) => Err(StdoutError {
            source,
            written: None,
        }),
    }
}

/// Writes one line to standard error, dropping it if standard error cannot be written.
pub fn write_stderr(args: fmt::Arguments<'_>) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr
        .write_fmt(args)
        .and_then(|()| stderr.write_all(b"\n"));
}

/// `print!` through [`write_stdout`]: evaluates to `Result<(), StdoutError>`.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!($($arg)*))
    };
}

/// `println!` through [`write_stdout`]: evaluates to `Result<(), StdoutError>`.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::output::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` through [`write_stderr`]: never fails, never panics.
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::write_stderr(format_args!($($arg)*))
    };
}

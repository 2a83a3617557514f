//! `unbound-io`: how every unbound crate reads and writes files.
//!
//! Two rules live here, once, so that no crate re-implements them:
//!
//! - **Input is memory-mapped** ([`map_file`]): a model file becomes a [`bytes::Bytes`] whose
//!   slices are handed out without copying. Only regular files are mapped; a FIFO, a device or a
//!   directory is refused by name before it is opened, so a command never blocks on a pipe or
//!   reads `/dev/zero` forever. Every other input follows the same rule ([`open_regular`], and
//!   [`read_file`] for small files read whole, with a bound on their size): symbolic links are
//!   followed, and only a regular file at the end of them is read.
//! - **Output is atomic** ([`write_atomically`], [`TempPath`]): bytes go to a temporary name
//!   beside the target, are synced, then renamed into place. A crash, a signal or an error never
//!   leaves a partial file under the final name. Temporaries in progress are registered, so a
//!   signal handler can remove them ([`remove_temporaries`]). Temporaries a killed writer left
//!   behind are removed by the next writer of the same target ([`remove_stale_temporaries`],
//!   reported by [`take_removed_stale`]; for many targets in one directory, one listing:
//!   [`remove_stale_temporaries_of`]); a temporary's name never passes the 255-byte limit.
//!   A slice larger than the write buffer reaches the file 1 MiB at a time ([`InPieces`]):
//!   the kernel copied one call of hundreds of megabytes several times slower.
//!
//! ```
//! use std::io::Write;
//! # let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("out.bin");
//! unbound_io::write_atomically(&path, |out| {
//!     out.write_all(b"hello").map_err(unbound_io::io_err(&path))
//! })?;
//! assert_eq!(&unbound_io::map_file(&path)?[..], b"hello");
//! # Ok::<(), unbound_io::IoError>(())
//! ```
//!
//! Files written at once by several threads go through [`run_until_error`]: it stops
//! starting work at the first error and returns that error, so every writer fails the same
//! way (and nothing is renamed into place after a failure).
//!
//! Errors are [`IoError`]s naming the path; each crate above wraps them with `#[from]`.

mod atomic;
mod error;
mod map;
mod open;
mod parallel;
mod pieces;
mod stale;
mod temp_name;

pub use atomic::{
    cancel_token, copy_atomically, remove_temporaries, set_cancel_token, sync_parent,
    write_atomically, AtomicOut, TempPath, BUFFER_SIZE,
};
pub use error::{io_err, IoError};
pub use map::{map_file, release_pages};
pub use open::{open_regular, read_file, regular_file_len};
pub use parallel::{each_in_order, run_until_error};
pub use pieces::{InPieces, WRITE_PIECE};
pub use stale::{remove_stale_temporaries, remove_stale_temporaries_of, take_removed_stale};
pub use temp_name::{temp_path_for, MAX_FILE_NAME};

//! The chunks of a split prepared for writing on worker threads, handed over in order.
//!
//! Preparing a chunk is finding its pieces ([`SplitOutput::segments`]) and, for one large
//! enough to take a Riegeli chunk of its own, compressing it
//! ([`unbound_records::encode_own_chunk`]): nearly all the work of writing a `.cpb`, and
//! independent from chunk to chunk. Writing stays on the caller's thread, in file order.
//! Issue 15: a split of a model of millions of nodes compressed its ten 64 MiB chunks on one
//! core.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Condvar, Mutex, PoisonError};

use bytes::Bytes;
use unbound_records::{encode_own_chunk, EncodedChunk, WriterOptions};

use crate::error::Result;
use crate::split::SplitOutput;

/// A chunk's record, ready to be written.
pub(crate) enum Prepared {
    /// Compressed ahead, as a Riegeli chunk of its own.
    Encoded(EncodedChunk),
    /// Its pieces, for the writer to add (a small record, or one stored uncompressed).
    Pieces(Vec<Bytes>),
}

/// A prepared chunk and its record's size before compression.
pub(crate) struct Ready {
    pub record: Prepared,
    pub size: u64,
}

/// What the workers and the writer share.
struct Queue {
    /// Chunk `i`'s preparation once done (a worker's panic is carried to the writer).
    slots: Vec<Option<std::thread::Result<Result<Ready>>>>,
    /// The next chunk a worker takes.
    next: usize,
    /// Chunks handed to the writer so far.
    handed: usize,
    /// Set when the writer stops early (an error): workers take nothing more.
    stop: bool,
}

/// Prepares every chunk of `split` on worker threads (one per core) and calls
/// `write` with each, in order, on this thread. At most a few chunks are prepared ahead of
/// the one being written, so memory holds a few compressed chunks, not the file. The first
/// error, from a preparation or from `write`, ends it.
pub(crate) fn for_each_prepared(
    split: &SplitOutput,
    options: &WriterOptions,
    name: &str,
    mut write: impl FnMut(usize, Ready) -> Result<()>,
) -> Result<()> {
    let count = split.chunks.len();
    // One worker per core, the writer (which mostly waits) besides: on two cores, what runs
    // alongside the writing (the split's fingerprint) takes its turns with both workers, and
    // when it ends, both cores compress. With one worker fewer, the last chunks of a split of
    // millions of nodes were compressed on one core while the other had nothing to do (issue
    // 15: 0.4 s of a 1.6 s split; median of 8 alternating runs 1.67 -> 1.43 s).
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(count)
        .max(1);
    let ahead = workers + 1;
    let queue = Mutex::new(Queue {
        slots: (0..count).map(|_| None).collect(),
        next: 0,
        handed: 0,
        stop: false,
    });
    let changed = Condvar::new();
    let lock = || queue.lock().unwrap_or_else(PoisonError::into_inner);
    let work = || loop {
        let index = {
            let mut q = lock();
            while !q.stop && q.next < count && q.next >= q.handed + ahead {
                q = changed.wait(q).unwrap_or_else(PoisonError::into_inner);
            }
            if q.stop || q.next >= count {
                return;
            }
            q.next += 1;
            q.next - 1
        };
        let prepared = catch_unwind(AssertUnwindSafe(|| prepare(split, index, options, name)));
        lock().slots[index] = Some(prepared);
        changed.notify_all();
    };
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(work);
        }
        let stop = |q: &mut Queue| {
            q.stop = true;
            changed.notify_all();
        };
        for index in 0..count {
            let prepared = {
                let mut q = lock();
                loop {
                    if let Some(done) = q.slots[index].take() {
                        q.handed = index + 1;
                        changed.notify_all();
                        break done;
                    }
                    q = changed.wait(q).unwrap_or_else(PoisonError::into_inner);
                }
            };
            let written = match prepared {
                Ok(ready) => ready.and_then(|ready| write(index, ready)),
                Err(panic) => {
                    stop(&mut lock());
                    resume_unwind(panic)
                }
            };
            if let Err(e) = written {
                stop(&mut lock());
                return Err(e);
            }
        }
        Ok(())
    })
}

/// Chunk `index` of `split`, prepared.
fn prepare(
    split: &SplitOutput,
    index: usize,
    options: &WriterOptions,
    name: &str,
) -> Result<Ready> {
    let segments = split.segments_at(index)?;
    let parts: Vec<&[u8]> = segments.iter().map(|b| b.as_ref()).collect();
    let size: u64 = parts.iter().map(|p| p.len() as u64).sum();
    let encoded = if options.takes_own_chunk(size) {
        encode_own_chunk(options, &parts, name)?
    } else {
        None
    };
    let record = match encoded {
        Some(encoded) => Prepared::Encoded(encoded),
        None => Prepared::Pieces(segments),
    };
    Ok(Ready { record, size })
}

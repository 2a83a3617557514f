//! Decoding lazy records ahead of the writer, on worker threads.
//!
//! Merging a `.cpb` whose large values are compressed records is bound by decompression, which
//! is single-threaded per record. [`write_prefetched`] decodes the records that are really
//! compressed on `workers` threads, in write order and round-robin, each worker at most one
//! record ahead, while the calling thread writes. Memory stays bounded by `workers` decoded
//! records. Records stored uncompressed (or as Brotli's stored blocks, which is what TensorFlow's
//! writer produces for incompressible tensors) cost no more than a copy: they are streamed
//! straight from the input to the output in small pieces, which keeps the copy in cache.

use std::io::Write;
use std::sync::mpsc::{sync_channel, Receiver};
use std::thread;

use crate::error::{Result, WireError};
use unbound_io::IoError;

use crate::message::{check_record_len, RecordRef, WireMessage};

/// Below this many bytes of lazy records, plain streaming is as fast and uses less memory.
const MIN_PREFETCH_BYTES: u64 = 64 << 20;

/// Serializes `message` into `out`, decoding its lazy records on worker threads when that pays.
pub fn write_prefetched(message: &WireMessage, out: &mut dyn Write) -> Result<()> {
    let all: Vec<RecordRef> = message.lazy_records().into_iter().cloned().collect();
    let costly: Vec<bool> = all.iter().map(is_costly).collect();
    let records: Vec<RecordRef> = all
        .iter()
        .zip(&costly)
        .filter(|(_, c)| **c)
        .map(|(r, _)| r.clone())
        .collect();
    let total: u64 = records.iter().map(|r| r.len).sum();
    let workers = thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(records.len());
    if total < MIN_PREFETCH_BYTES || workers < 2 {
        return message.write_to(out);
    }
    thread::scope(|scope| {
        let mut queues: Vec<Receiver<Result<Vec<u8>>>> = Vec::with_capacity(workers);
        for w in 0..workers {
            // A rendezvous channel: a worker hands over its record and only then decodes the next, so
            // at most one decoded record per worker is held.
            let (tx, rx) = sync_channel(0);
            queues.push(rx);
            let mine: Vec<RecordRef> = records.iter().skip(w).step_by(workers).cloned().collect();
            scope.spawn(move || {
                for r in mine {
                    let decoded = decode(&r);
                    let failed = decoded.is_err();
                    if tx.send(decoded).is_err() || failed {
                        return; // the writer stopped, or this record failed: stop early
                    }
                }
            });
        }
        let mut index = 0usize;
        let mut next = 0usize;
        let result = message.write_with(out, &mut |record, out| {
            let is_costly = costly[index];
            index += 1;
            if !is_costly {
                return crate::message::Payload::Record(record.clone()).write_to(out);
            }
            let queue = &queues[next % workers];
            next += 1;
            let bytes = queue.recv().map_err(|_| {
                WireError::Io(IoError::os(
                    "<prefetch>",
                    std::io::Error::other("a decoding worker stopped"),
                ))
            })??;
            // Small writes keep the source of each kernel copy in cache.
            for piece in bytes.chunks(1 << 20) {
                out.write_all(piece)
                    .map_err(|e| WireError::Io(IoError::os("<output>", e)))?;
            }
            Ok(())
        });
        drop(queues); // unblocks workers still waiting to send
        result
    })
}

/// Whether reading `r` means real decompression (as opposed to a copy).
fn is_costly(r: &RecordRef) -> bool {
    r.reader.decoding_is_costly(r.position)
}

fn decode(r: &RecordRef) -> Result<Vec<u8>> {
    // The length comes from the file: reserve at most 256 MiB up front and let the buffer grow.
    let capacity = usize::try_from(r.len).unwrap_or(usize::MAX).min(1 << 28);
    let mut buf = Vec::with_capacity(capacity);
    let written = r
        .reader
        .copy_record_to(r.position, &mut buf)
        .map_err(WireError::Source)?;
    check_record_len(r, written)?;
    Ok(buf)
}

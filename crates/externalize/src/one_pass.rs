//! Several constants' values that lie in one record of a `.cpb`, read in one pass over it.
//!
//! A message chunk too large to decode whole leaves each large value in its record, read
//! on demand from the record's start ([`unbound_wire::RecordSource::copy_record_range_to`]):
//! for a compressed record of several values, value `k` decompressed the `k - 1` before it
//! again (the values of a 600 MB chunk of three were decompressed 1.2 GB deep). Consecutive
//! new variables whose values lie in one record, in order, are instead streamed together:
//! one thread decompresses the span from the first value's start to the last one's end, a
//! few blocks ahead, while the checkpoint writer takes each value's bytes in turn and skips
//! the bytes between them.

use std::io::Write;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use unbound_wire::{Payload, RecordSource, SourceError};

use crate::graph_edit::{NewVariable, Value};

/// Bytes of one block handed from the decompressing thread to the writer.
const BLOCK: usize = 256 << 10;
/// Blocks in flight; the same ones go round (fresh ones would each fault their pages in).
const BLOCKS_AHEAD: usize = 8;

/// Where a value lies inside a record: the file of whole records, the record, the value's
/// offset in it and its length.
pub(crate) struct InRecord<'a> {
    pub file: &'a Arc<Box<dyn RecordSource>>,
    pub position: u64,
    pub offset: u64,
    pub len: u64,
}

/// Where `var`'s value lies, when it is a value inside a record.
pub(crate) fn in_record(var: &NewVariable) -> Option<InRecord<'_>> {
    let Value::Raw(Payload::Record(r)) = &var.value else {
        return None;
    };
    let (file, offset) = match (r.reader.record_file(), r.reader.offset_in_record()) {
        (Some(file), Some(offset)) => (file, offset),
        // A whole record (a chunk of bytes).
        (None, None) => (&r.reader, 0),
        _ => return None,
    };
    Some(InRecord {
        file,
        position: r.position,
        offset,
        len: r.len,
    })
}

/// How many of `vars`, from the first, have values in the same record, each after the one
/// before it: the variables [`stream_span`] can write in one pass. 0 or 1 when there is
/// nothing to share.
pub(crate) fn values_in_one_record(vars: &[(String, NewVariable)]) -> usize {
    let Some(first) = vars.first().and_then(|(_, v)| in_record(v)) else {
        return 0;
    };
    let mut end = first.offset.saturating_add(first.len);
    let mut count = 1;
    for (_, var) in &vars[1..] {
        match in_record(var) {
            Some(next)
                if Arc::ptr_eq(next.file, first.file)
                    && next.position == first.position
                    && next.offset >= end =>
            {
                end = next.offset.saturating_add(next.len);
                count += 1;
            }
            _ => break,
        }
    }
    count
}

/// Streams `len` bytes of the record at `position` of `file`, from its byte `start`, on a
/// thread of its own, while `consume` takes them through the [`Span`] it is given (on this
/// thread). Returns what `consume` returns; a fault of the stream (the record is damaged or
/// shorter) is returned as `Err(Left(fault))`, and one of `consume` as `Err(Right(..))`.
pub(crate) fn stream_span<T, E>(
    file: &Arc<Box<dyn RecordSource>>,
    position: u64,
    start: u64,
    len: u64,
    consume: impl FnOnce(&mut Span) -> Result<T, E>,
) -> Result<T, SpanFault<E>> {
    let (full, filled) = sync_channel::<Vec<u8>>(BLOCKS_AHEAD);
    let (empty, emptied) = sync_channel::<Vec<u8>>(BLOCKS_AHEAD);
    for _ in 0..BLOCKS_AHEAD {
        empty
            .send(Vec::with_capacity(BLOCK))
            .expect("the channel holds BLOCKS_AHEAD blocks");
    }
    std::thread::scope(|s| {
        let producer = s.spawn(move || {
            let mut sender = BlockSender {
                block: None,
                full,
                emptied,
            };
            let copied = file.copy_record_range_to(position, start, len, &mut sender)?;
            sender.flush()?;
            Ok::<u64, SourceError>(copied)
        });
        let mut span = Span {
            filled,
            empty,
            block: Vec::new(),
            at: 0,
            ended: false,
        };
        let consumed = consume(&mut span);
        let ended = span.ended;
        // Dropping the channels stops the producer at its next block, if it is not done.
        drop(span);
        let produced = producer
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        match (consumed, produced) {
            (Ok(value), Ok(_)) => Ok(value),
            // The stream failed first: the consumer only saw it end.
            (_, Err(fault)) if ended => Err(SpanFault::Stream(fault)),
            (Err(fault), _) => Err(SpanFault::Consumer(fault)),
            (Ok(_), Err(fault)) => Err(SpanFault::Stream(fault)),
        }
    })
}

/// What failed in [`stream_span`].
#[derive(Debug)]
pub(crate) enum SpanFault<E> {
    /// Reading the record.
    Stream(SourceError),
    /// What the consumer did with it.
    Consumer(E),
}

/// The bytes of a span, as the decompressing thread sends them.
pub(crate) struct Span {
    filled: Receiver<Vec<u8>>,
    empty: SyncSender<Vec<u8>>,
    /// The block being read, and how far.
    block: Vec<u8>,
    at: usize,
    /// Whether the stream ended before what was asked of it.
    ended: bool,
}

impl Span {
    /// Writes the next `n` bytes to `out`.
    pub(crate) fn copy_to(&mut self, mut n: u64, out: &mut dyn Write) -> std::io::Result<()> {
        while n > 0 {
            let piece = self.piece(n)?;
            let len = piece.len();
            out.write_all(piece)?;
            self.at += len;
            n -= len as u64;
        }
        Ok(())
    }

    /// Passes over the next `n` bytes.
    pub(crate) fn skip(&mut self, mut n: u64) -> std::io::Result<()> {
        while n > 0 {
            let len = self.piece(n)?.len();
            self.at += len;
            n -= len as u64;
        }
        Ok(())
    }

    /// Up to `n` bytes of the current block, the next one taken when it is read.
    fn piece(&mut self, n: u64) -> std::io::Result<&[u8]> {
        if self.at == self.block.len() {
            let mut used = std::mem::take(&mut self.block);
            match self.filled.recv() {
                Ok(next) => self.block = next,
                Err(_) => {
                    self.ended = true;
                    return Err(std::io::Error::other("the record ended before the value"));
                }
            }
            self.at = 0;
            if used.capacity() > 0 {
                used.clear();
                // Refused once the producer has sent its last block: nothing to recycle.
                let _ = self.empty.send(used);
            }
        }
        let take = (self.block.len() - self.at).min(usize::try_from(n).unwrap_or(usize::MAX));
        Ok(&self.block[self.at..self.at + take])
    }
}

/// Gathers what it is given into [`BLOCK`]-sized blocks, taken from `emptied` and sent down
/// `full`.
struct BlockSender {
    block: Option<Vec<u8>>,
    full: SyncSender<Vec<u8>>,
    emptied: Receiver<Vec<u8>>,
}

impl Write for BlockSender {
    fn write(&mut self, mut data: &[u8]) -> std::io::Result<usize> {
        let n = data.len();
        while !data.is_empty() {
            if self.block.is_none() {
                let block = self
                    .emptied
                    .recv()
                    .map_err(|_| std::io::Error::other("the checkpoint writer stopped"))?;
                self.block = Some(block);
            }
            let block = self.block.as_mut().expect("just taken");
            let take = (BLOCK - block.len()).min(data.len());
            block.extend_from_slice(&data[..take]);
            data = &data[take..];
            if block.len() == BLOCK {
                self.flush()?;
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.block.take() {
            Some(block) if !block.is_empty() => self
                .full
                .send(block)
                .map_err(|_| std::io::Error::other("the checkpoint writer stopped")),
            other => {
                self.block = other;
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One record of pseudo-random bytes, written in pieces of uneven sizes.
    #[derive(Debug)]
    struct Uneven(Vec<u8>);

    impl RecordSource for Uneven {
        fn name(&self) -> &str {
            "uneven"
        }
        fn read_record(&self, _: u64) -> Result<bytes::Bytes, SourceError> {
            Ok(self.0.clone().into())
        }
        fn copy_record_to(&self, _: u64, out: &mut dyn Write) -> Result<u64, SourceError> {
            let (mut at, mut step) = (0, 1);
            while at < self.0.len() {
                let end = (at + step).min(self.0.len());
                out.write_all(&self.0[at..end])?;
                at = end;
                step = (step * 7 + 13) % (3 * BLOCK);
            }
            Ok(self.0.len() as u64)
        }
        fn decoding_is_costly(&self, _: u64) -> bool {
            true
        }
    }

    fn record(len: usize) -> Vec<u8> {
        unbound_test_support::data::random_bytes(len, 0x9e37_79b9)
    }

    #[test]
    fn values_of_a_span_come_whole_in_order_and_the_gaps_are_skipped() {
        let bytes = record(5 * BLOCK + 12_345);
        let file: Arc<Box<dyn RecordSource>> = Arc::new(Box::new(Uneven(bytes.clone())));
        // Three values with gaps between them, the last one crossing several blocks.
        let values = [
            (10u64, 100u64),
            (BLOCK as u64 - 5, 20),
            (BLOCK as u64 + 100, 3 * BLOCK as u64),
        ];
        let start = values[0].0;
        let end = values[2].0 + values[2].1;
        let got = stream_span(&file, 0, start, end - start, |span| {
            let mut at = start;
            let mut got = Vec::new();
            for &(offset, len) in &values {
                span.skip(offset - at)?;
                let mut out = Vec::new();
                span.copy_to(len, &mut out)?;
                got.push(out);
                at = offset + len;
            }
            Ok::<_, std::io::Error>(got)
        })
        .unwrap();
        for (&(offset, len), out) in values.iter().zip(&got) {
            let want = &bytes[offset as usize..(offset + len) as usize];
            assert!(out == want, "the value at {offset} differs");
        }
    }

    #[test]
    fn a_record_shorter_than_the_span_is_the_stream_s_fault() {
        let file: Arc<Box<dyn RecordSource>> = Arc::new(Box::new(Uneven(record(1000))));
        let result = stream_span(&file, 0, 0, 2000, |span| {
            let mut out = Vec::new();
            span.copy_to(2000, &mut out)
        });
        assert!(matches!(result, Err(SpanFault::Stream(_))), "{result:?}");
    }

    #[test]
    fn a_consumer_that_stops_stops_the_stream() {
        let file: Arc<Box<dyn RecordSource>> = Arc::new(Box::new(Uneven(record(9 * BLOCK))));
        let result = stream_span(&file, 0, 0, 9 * BLOCK as u64, |span| {
            span.skip(10)?;
            Err::<(), _>(std::io::Error::other("the disk is full"))
        });
        match result {
            Err(SpanFault::Consumer(e)) => assert_eq!(e.to_string(), "the disk is full"),
            other => panic!("{other:?}"),
        }
    }
}

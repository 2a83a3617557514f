//! The large values of a `.cpb`'s streamed chunks, written out as the verification streams
//! them: the one decompression of a compressed chunk (issue 33).
//!
//! Every writer verifies its source first, and the verification's merge streams each chunk
//! too large to keep decoded ([`unbound_chunked::StreamTap`]). Copying the constants' values
//! afterwards decompressed those chunks a second time: from a zstd `.cpb` of 1.2 GB of
//! constants, `externalize` took four times a `cp` of what it wrote, half of it the second
//! decompression. A [`Spool`] is tapped into that stream instead: of each value the merge
//! leaves in the file (announced before its bytes: [`unbound_chunked::TapSink::lazy_value`])
//! and at least `min_len` long, it writes the bytes into one file beside the output, with
//! their CRC-32C, as they go by. That file then becomes the output's data shard
//! ([`unbound_bundle::ShardWriter::adopt`]): a new variable whose value is a spooled one
//! (the same record of the same file, the same offset and length) takes its index entry from
//! where the spool put it; the rest are copied as before, after it. A spooled value no
//! variable takes (a large string, a constant kept) is cut out of the file (a hole punched).
//!
//! A stream that fails leaves nothing: its bytes are cut out (and verification fails). A fault writing the spool stops the spooling, never the verification; it is
//! reported once verification is done, naming the spool file.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use unbound_chunked::{StreamTap, StreamedChunk, TapSink};
use unbound_io::TempPath;

/// Bytes spooled between two syncs of the spool file.
const SYNC_EVERY: u64 = 64 << 20;

/// Where a value lies in the `.cpb`: the position of its chunk's record, and its offset and
/// length in the decoded record (those of its lazy reference, [`crate::one_pass::InRecord`]).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) struct ValueAt {
    pub position: u64,
    pub offset: u64,
    pub len: u64,
}

/// Where a spooled value lies in the spool file, and its CRC-32C (unmasked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Spooled {
    pub offset: u64,
    pub crc: u32,
}

/// A spool being filled by the streams of one verification (see the module docs).
pub(crate) struct Spool {
    tmp: TempPath,
    min_len: u64,
    file: Arc<File>,
    state: Arc<Mutex<State>>,
}

/// What a spool holds. Each stream writes a region of its own: its chunk's place among the
/// decoded bytes of every streamed chunk ([`StreamedChunk::start`]), so the spool's layout
/// depends on the source alone, not on which of the streams running at once (`ahead.rs`)
/// began first; what a stream does not fill (its chunk's other bytes) is never written, a
/// hole of the sparse file.
struct State {
    /// The values spooled whole, from streams that ended without fault.
    values: HashMap<ValueAt, Spooled>,
    /// The records spooled or being spooled (a chunk streamed again is let pass).
    records: HashSet<u64>,
    /// The first fault writing the file; spooling stops there.
    fault: Option<std::io::Error>,
}

/// A spool filled: its file and the values in it.
pub(crate) struct SpooledValues {
    /// The file (under a temporary name, removed unless moved).
    pub tmp: TempPath,
    /// It, open.
    pub file: File,
    /// The values in it.
    pub values: HashMap<ValueAt, Spooled>,
}

impl Spool {
    /// A spool for values of at least `min_len` bytes, in a temporary file beside `out` (so
    /// on the output's filesystem, where it is moved).
    pub(crate) fn beside(out: &Path, min_len: u64) -> Result<Arc<Self>, crate::ExternalizeError> {
        let name = out.file_name().map_or_else(
            || "externalized".into(),
            |n| n.to_string_lossy().into_owned(),
        );
        let tmp = TempPath::new(&out.with_file_name(format!("{name}.values")));
        let file = tmp
            .create_file()
            .map_err(|e| unbound_savedmodel::SavedModelError::io(tmp.path(), e))?;
        Ok(Arc::new(Self {
            tmp,
            min_len,
            file: Arc::new(file),
            state: Arc::new(Mutex::new(State {
                values: HashMap::new(),
                records: HashSet::new(),
                fault: None,
            })),
        }))
    }

    /// What was spooled, once no stream runs; a fault writing the spool is returned naming
    /// its file.
    pub(crate) fn into_values(self: Arc<Self>) -> Result<SpooledValues, crate::ExternalizeError> {
        let spool = Arc::try_unwrap(self).map_err(|_| {
            crate::ExternalizeError::invalid("the value spool", "still streamed into")
        })?;
        let file = Arc::try_unwrap(spool.file).map_err(|_| {
            crate::ExternalizeError::invalid("the value spool", "a stream never ended")
        })?;
        let mut state = spool
            .state
            .lock()
            .map_err(|_| crate::ExternalizeError::invalid("the value spool", "poisoned"))?;
        if let Some(fault) = state.fault.take() {
            return Err(unbound_savedmodel::SavedModelError::io(spool.tmp.path(), fault).into());
        }
        let values = std::mem::take(&mut state.values);
        drop(state);
        Ok(SpooledValues {
            tmp: spool.tmp,
            file,
            values,
        })
    }
}

impl StreamTap for Spool {
    fn begin(&self, chunk: StreamedChunk) -> Option<Box<dyn TapSink>> {
        let mut state = self.state.lock().ok()?;
        if state.fault.is_some() || !state.records.insert(chunk.position) {
            return None;
        }
        // A region past the largest offset cannot be: nothing spooled.
        let base = chunk.start;
        let _end = base.checked_add(chunk.len)?;
        Some(Box::new(SpoolSink {
            state: Arc::clone(&self.state),
            file: Arc::clone(&self.file),
            base,
            written: 0,
            position: chunk.position,
            min_len: self.min_len,
            at: 0,
            ahead: VecDeque::new(),
            current: None,
            done: Vec::new(),
            fault: None,
            finished: false,
        }))
    }
}

/// Spools the values of one chunk as it streams, into its region of the spool.
struct SpoolSink {
    state: Arc<Mutex<State>>,
    file: Arc<File>,
    /// Where its region starts.
    base: u64,
    /// Bytes this stream spooled.
    written: u64,
    /// The chunk's record.
    position: u64,
    min_len: u64,
    /// Offset in the record of the next byte.
    at: u64,
    /// Values announced whose bytes have not all come (offset, length), in order.
    ahead: VecDeque<(u64, u64)>,
    /// The value being spooled: where in the spool it starts, and its CRC so far.
    current: Option<Spooled>,
    /// The values spooled whole.
    done: Vec<(ValueAt, Spooled)>,
    /// The first fault writing.
    fault: Option<std::io::Error>,
    /// Whether the stream ended whole.
    finished: bool,
}

impl SpoolSink {
    /// Writes `bytes` of the front value to the spool.
    fn spool(&mut self, bytes: &[u8]) {
        let at = self.base + self.written;
        if let Err(e) = self.file.write_all_at(bytes, at) {
            self.fault = Some(e);
            return;
        }
        let current = self.current.get_or_insert(Spooled { offset: at, crc: 0 });
        current.crc = unbound_bundle::crc::extend(current.crc, bytes);
        self.written += bytes.len() as u64;
        // Written back as it goes, so the sync of the data shard at the end has little left
        // to do.
        if self.written / SYNC_EVERY != (self.written - bytes.len() as u64) / SYNC_EVERY {
            start_writeback(&self.file);
        }
    }
}

impl Write for SpoolSink {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let end = self.at + data.len() as u64;
        while let Some(&(offset, len)) = self.ahead.front() {
            if self.fault.is_some() || offset >= end {
                break;
            }
            let value_end = offset + len;
            let (from, to) = (offset.max(self.at), value_end.min(end));
            if from < to {
                let piece = &data[(from - self.at) as usize..(to - self.at) as usize];
                self.spool(piece);
            }
            if value_end > end {
                break;
            }
            self.ahead.pop_front();
            if let Some(spooled) = self.current.take() {
                let at = ValueAt {
                    position: self.position,
                    offset,
                    len,
                };
                self.done.push((at, spooled));
            }
        }
        self.at = end;
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl TapSink for SpoolSink {
    fn lazy_value(&mut self, offset: u64, len: u64) {
        // Values start where the stream has not been yet; one that does not is not spooled
        // (its bytes would be missing).
        if len >= self.min_len && offset >= self.at {
            self.ahead.push_back((offset, len));
        }
    }

    fn finish(mut self: Box<Self>) {
        self.finished = true;
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        match self.fault.take() {
            Some(fault) => {
                state.fault.get_or_insert(fault);
            }
            None => state.values.extend(self.done.drain(..)),
        }
    }
}

impl Drop for SpoolSink {
    /// A stream that did not finish: what it wrote is cut out of the spool.
    fn drop(&mut self) {
        if !self.finished && self.written > 0 {
            punch_hole(&self.file, self.base, self.written);
        }
    }
}

/// Starts the writeback of what `file` holds, without waiting for it: the kernel's answer to
/// `POSIX_FADV_DONTNEED` on dirty pages (a hint: where it is not one, the final sync does it
/// all).
fn start_writeback(file: &File) {
    #[cfg(target_os = "linux")]
    {
        let _ = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = file;
}

/// Frees `len` bytes at `offset` of `file` (they read as zeros after); where the filesystem
/// cannot, they stay, referenced by nothing (TensorFlow's reader reads entries only).
pub(crate) fn punch_hole(file: &File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{fallocate, FallocateFlags};
        let _ = fallocate(
            file,
            FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
            offset,
            len,
        );
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    /// A record of `len` bytes, each its offset's low byte.
    fn record(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + 3) as u8).collect()
    }

    /// Streams `record` (chunk at `position`, its place `start`) into `spool` in pieces cut
    /// at `cuts`, announcing each of `values` just before the piece it starts in, as the
    /// stream parser's tee does; finished when `finish`, else dropped midway.
    fn stream(
        spool: &Spool,
        position: u64,
        start: u64,
        record: &[u8],
        values: &[(u64, u64)],
        cuts: &[usize],
        finish: bool,
    ) -> bool {
        let chunk = StreamedChunk {
            index: 0,
            position,
            len: record.len() as u64,
            start,
        };
        let Some(mut sink) = spool.begin(chunk) else {
            return false;
        };
        let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (record.len() + 1)).collect();
        bounds.push(0);
        bounds.push(record.len());
        bounds.sort_unstable();
        bounds.dedup();
        let mut announced = 0;
        for piece in bounds.windows(2) {
            let (from, to) = (piece[0], piece[1]);
            if !finish && to > record.len() / 2 {
                return true; // dropped: the stream failed
            }
            while announced < values.len() && values[announced].0 < to as u64 {
                sink.lazy_value(values[announced].0, values[announced].1);
                announced += 1;
            }
            sink.write_all(&record[from..to]).unwrap();
        }
        sink.finish();
        true
    }

    proptest::proptest! {
        /// However the stream is cut, each value of at least the spool's length is spooled
        /// whole with its CRC, in its chunk's region; a shorter one is not; a stream that did
        /// not finish leaves no value and no bytes; a chunk is spooled once.
        #[test]
        fn values_are_spooled_whole_wherever_the_stream_is_cut(
            cuts in proptest::collection::vec(0usize..200, 0..12),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let spool = Spool::beside(&dir.path().join("out"), 8).unwrap();
            let bytes = record(200);
            // Values: two spooled, one too short, one ending the record.
            let values = [(10, 30), (40, 5), (60, 100), (180, 20)];
            proptest::prop_assert!(stream(&spool, 1000, 0, &bytes, &values, &cuts, true));
            proptest::prop_assert!(!stream(&spool, 1000, 0, &bytes, &values, &cuts, true));
            proptest::prop_assert!(stream(&spool, 2000, 200, &bytes, &values, &cuts, false));
            let spooled = spool.into_values().unwrap();
            let mut file = Vec::new();
            File::open(spooled.tmp.path()).unwrap().read_to_end(&mut file).unwrap();
            let mut expected = HashMap::new();
            let mut at = 0u64;
            for &(offset, len) in values.iter().filter(|(_, len)| *len >= 8) {
                let value = &bytes[offset as usize..(offset + len) as usize];
                expected.insert(
                    ValueAt { position: 1000, offset, len },
                    Spooled { offset: at, crc: unbound_bundle::crc::crc32c(value) },
                );
                proptest::prop_assert_eq!(&file[at as usize..(at + len) as usize], value);
                at += len;
            }
            proptest::prop_assert_eq!(&spooled.values, &expected);
            // The unfinished stream's region reads as zeros.
            proptest::prop_assert!(file.get(200..).unwrap_or(&[]).iter().all(|&b| b == 0));
        }
    }
}

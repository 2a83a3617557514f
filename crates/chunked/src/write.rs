//! Writing a split: `PREFIX.pb` when nothing was chunked, otherwise `PREFIX.cpb`, a Riegeli
//! file with one record per chunk followed by the `ChunkMetadata` record, exactly as
//! TensorFlow's `ComposableSplitter.write` lays it out (`ChunkInfo.offset` is each record's
//! numeric position).

use std::io::Write;
use std::path::{Path, PathBuf};

use prost::Message as _;
use unbound_proto::tensorflow::proto_splitter::{
    chunk_info::Type as ChunkType, ChunkInfo, ChunkMetadata, VersionDef,
};
use unbound_records::{RecordWriter, WriterOptions};

use crate::error::Result;
use crate::split::{Chunk, SplitOutput};
use crate::write_ahead::{for_each_prepared, Prepared};
use unbound_io::{io_err, write_atomically};
use unbound_wire::WireMessage;

/// The splitter version this implementation writes (TensorFlow's is 1, join version 0).
pub fn version_def() -> VersionDef {
    VersionDef {
        splitter_version: 1,
        join_version: 0,
        bad_consumers: Vec::new(),
    }
}

/// What [`write_split`] wrote.
#[derive(Clone, Debug)]
pub struct Written {
    /// The file written (`PREFIX.pb` or `PREFIX.cpb`).
    pub path: PathBuf,
    /// Whether it is a chunked `.cpb`.
    pub chunked: bool,
    /// Number of chunks (records before the metadata); 0 for a `.pb`.
    pub chunks: usize,
    /// Bytes of chunk data before compression.
    pub data_bytes: u64,
}

/// Writes `base`, the message of a split that chunked nothing
/// ([`SplitOutput::into_unchunked`]), as `prefix.pb`, as [`write_split`] does.
pub fn write_unchunked(
    prefix: &Path,
    base: &WireMessage,
    progress: &mut dyn FnMut(u64),
) -> Result<Written> {
    let path = with_suffix(prefix, "pb");
    let data_bytes = write_message(&path, base)?;
    progress(data_bytes);
    Ok(Written {
        path,
        chunked: false,
        chunks: 0,
        data_bytes,
    })
}

/// Writes `source`, a serialized message file, as `prefix.pb` byte for byte: the
/// [`write_unchunked`] of a message read from a `.pb` and left as it was, copied by the
/// kernel instead of written from memory ([`unbound_io::copy_atomically`]).
pub fn copy_unchunked(
    prefix: &Path,
    source: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<Written> {
    let path = with_suffix(prefix, "pb");
    let data_bytes = unbound_io::copy_atomically(source, &path, progress)?;
    Ok(Written {
        path,
        chunked: false,
        chunks: 0,
        data_bytes,
    })
}

/// Writes `split` under `prefix` atomically: `prefix.pb` when it chunked nothing
/// ([`write_unchunked`]), else `prefix.cpb` ([`write_chunked`]). `progress` is called with the
/// bytes of each chunk as it is written.
pub fn write_split(
    prefix: &Path,
    split: SplitOutput,
    options: WriterOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<Written> {
    match split.into_unchunked() {
        Ok(base) => write_unchunked(prefix, &base, progress),
        Err(split) => write_chunked(prefix, &split, options, progress),
    }
}

/// Writes `split` as the Riegeli file `prefix.cpb`, atomically, whatever it chunked (a split
/// that chunked nothing gives a `.cpb` of one chunk). Takes the split by reference, so that
/// its fingerprint can be computed from it on another thread while it is written.
pub fn write_chunked(
    prefix: &Path,
    split: &SplitOutput,
    options: WriterOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<Written> {
    let path = with_suffix(prefix, "cpb");
    let count = split.chunks.len();
    let data_bytes = write_atomically(&path, |out| -> Result<u64> {
        let mut writer = RecordWriter::new(out, options)?;
        let mut infos = Vec::with_capacity(count);
        let mut total = 0;
        let name = path.display().to_string();
        for_each_prepared(split, &options, &name, |index, ready| {
            let kind = match &split.chunks[index] {
                Chunk::Message(_) | Chunk::SerializedMessage(_) => ChunkType::Message,
                Chunk::Bytes(_) => ChunkType::Bytes,
            };
            let offset = match ready.record {
                Prepared::Encoded(encoded) => writer.write_encoded(encoded)?,
                Prepared::Pieces(segments) => {
                    let parts: Vec<&[u8]> = segments.iter().map(|b| b.as_ref()).collect();
                    writer.write_record_parts(&parts)?
                }
            };
            infos.push(ChunkInfo {
                r#type: kind as i32,
                size: ready.size,
                offset,
            });
            total += ready.size;
            progress(ready.size);
            Ok(())
        })?;
        let metadata = ChunkMetadata {
            version: Some(version_def()),
            chunks: infos,
            message: Some(split.message.clone()),
        };
        writer.write_record(&metadata.encode_to_vec())?;
        writer.finish()?;
        Ok(total)
    })?;
    Ok(Written {
        path,
        chunked: true,
        chunks: count,
        data_bytes,
    })
}

/// Writes one message as a binary protobuf file, atomically. Returns its size.
pub fn write_message(path: &Path, message: &WireMessage) -> Result<u64> {
    write_message_with_progress(path, message, &mut |_| {})
}

/// [`write_message`], calling `progress` with the number of bytes of each write.
pub fn write_message_with_progress(
    path: &Path,
    message: &WireMessage,
    progress: &mut dyn FnMut(u64),
) -> Result<u64> {
    write_atomically(path, |out| {
        let mut counting = Counting {
            inner: &mut *out,
            progress,
            pending: 0,
        };
        unbound_wire::write_prefetched(message, &mut counting)?;
        counting.report();
        out.flush().map_err(io_err(path))?;
        Ok(message.encoded_len())
    })
}

/// Bytes written between two progress reports: a message of millions of small nodes is
/// written a field at a time, and a report per field cost 3% of a merge (issue 15).
const PROGRESS_STEP: u64 = 1 << 20;

/// A writer that reports how many bytes pass through it, at most once per
/// [`PROGRESS_STEP`] bytes (and once more at the end, [`Counting::report`]).
struct Counting<'a, W: Write> {
    inner: W,
    progress: &'a mut dyn FnMut(u64),
    /// Written but not reported yet.
    pending: u64,
}

/// The most handed to the file in one write. A model kept as one slice of its source (a graph
/// no rewrite changed) was written in one call of hundreds of megabytes, which Linux copied
/// into the page cache several times slower than the same bytes in pieces (issue 15: 1.7 s
/// against 0.3 s for 566 MB, measured with strace in `optimize`); pieces also keep the
/// progress reports flowing.
const MAX_WRITE: usize = 4 << 20;

impl<W: Write> Counting<'_, W> {
    /// Reports what was written since the last report.
    fn report(&mut self) {
        if self.pending > 0 {
            (self.progress)(self.pending);
            self.pending = 0;
        }
    }
}

impl<W: Write> Write for Counting<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(&buf[..buf.len().min(MAX_WRITE)])?;
        self.pending += n as u64;
        if self.pending >= PROGRESS_STEP {
            self.report();
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// `prefix` with `.suffix` appended (not replacing any extension of its own).
pub fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(".");
    s.push(suffix);
    PathBuf::from(s)
}

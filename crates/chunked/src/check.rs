//! The complete check of a `.cpb`'s records and chunk metadata, what `verify` reports
//! ([`check_chunks`]): every Riegeli chunk read, and the metadata checked against the records
//! ([`check_layout`], the check every merge makes, with each record's size).

use std::collections::{BTreeMap, HashSet};

use prost::Message as _;
use unbound_proto::tensorflow::proto_splitter::ChunkMetadata;
use unbound_records::{ChunkSummary, ChunkType, RecordReader, RecordsError};

pub use crate::fault::ChunkFault;
pub use crate::layout::check_layout;
use crate::layout::layout_faults;
use crate::merger::{ChunkSource, FileChunks};

/// Everything [`check_chunks`] found.
#[derive(Debug, Default)]
pub struct ChunkReport {
    /// Every fault, in file order within each kind (Riegeli chunks first, then the metadata).
    pub faults: Vec<ChunkFault>,
    /// The metadata and its record position, when the last record is one.
    pub metadata: Option<(u64, ChunkMetadata)>,
    /// The length of every readable record, by numeric position.
    pub record_lengths: BTreeMap<u64, u64>,
    /// Chunks whose decompression [`check_chunks_deferring`] left to the merge that follows
    /// (by file position): [`check_deferred`] completes their check.
    pub deferred: Vec<u64>,
}

/// The complete check of a `.cpb`'s records and metadata (what `verify` reports): every
/// Riegeli chunk is verified and decoded ([`RecordReader::check_chunk`]: streamed, so a chunk
/// declaring gigabytes of zeros costs time, not memory), on up to four threads; the last
/// record is decoded as the `ChunkMetadata`; then [`check_layout`]'s checks and every
/// `ChunkInfo` size against its record. Never fails: what cannot be read is a fault.
pub fn check_chunks(reader: &RecordReader) -> ChunkReport {
    check_chunks_with(reader, Deferral::Nothing)
}

/// [`check_chunks`] of the file of `chunks`, reading the chunks it keeps decoded
/// ([`FileChunks::keep_decoded`]) through its cache: each is decoded whole once, and the merge
/// (and any other reader) that follows takes the same bytes instead of decoding it again. A
/// kept chunk that fails to decode is checked again the streaming way, which gives the fault
/// its usual words.
///
/// A chunk a merge of `chunks` streams
/// ([`FileChunks::streams_chunk_at`]: one record of 64 MiB or more) is checked up to its
/// decompression only (block headers, data hash, framing, record size) and listed in
/// [`ChunkReport::deferred`]. The merge that follows streams it whole, which decompresses it
/// and checks its size as the check would; [`check_deferred`] then completes the check
/// without decompressing again the chunks the merge streamed whole (the reader remembers
/// them), and the others as usual; the two together report what [`check_chunks`] reports. A
/// model of gigabytes of constants was decompressed three times by `verify`: the check, the
/// merge and the fingerprint.
pub fn check_chunks_deferring(chunks: &FileChunks) -> ChunkReport {
    check_chunks_with(chunks.reader(), Deferral::Streamed(chunks))
}

/// Completes the check of the chunks [`check_chunks_deferring`] deferred, once the merge has
/// run: their faults join `report`'s, in the words [`check_chunks`] gives them.
///
/// What the merge did not stream (a chunk of bytes, a value too large to keep decoded, or a
/// message chunk no merge reached) is streamed whole here, once, on every core, through the
/// chunks' tap ([`FileChunks::set_stream_tap`]: the fingerprint's hash of each chunk,
/// `externalize`'s spool), instead of once by this check and once by each tap's owner.
pub fn check_deferred(chunks: &FileChunks, report: &mut ChunkReport) {
    let reader = chunks.reader();
    let left: Vec<u64> = report
        .deferred
        .iter()
        .copied()
        .filter(|&begin| !reader.decompressed_whole(begin))
        .collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4);
    // A fault is reported below, by the check, in its words.
    unbound_io::each_in_order(&left, threads, |&begin| chunks.stream_whole(begin));
    complete_deferred(reader, report);
}

/// [`check_chunks`], but the chunks of one record at the file positions in `left` are
/// checked up to their decompression only (block headers, data hash, framing, record size)
/// and listed in [`ChunkReport::deferred`]: for a reader that decodes each of them whole next
/// (`verify` of a graph in chunks it leaves unmerged, reading each on its own), so that a
/// chunk of a graph is not decompressed once for this check and once more for its reading.
/// [`complete_deferred`] then completes the check of those chunks; the two together report
/// what [`check_chunks`] reports.
pub fn check_chunks_leaving(reader: &RecordReader, left: &HashSet<u64>) -> ChunkReport {
    check_chunks_with(reader, Deferral::These(left))
}

/// Completes the check of the chunks [`check_chunks_leaving`] (or
/// [`check_chunks_deferring`]) deferred: each is checked as [`check_chunks`] checks it, its
/// decompression only if `reader` did not decompress it whole since
/// ([`RecordReader::decompressed_whole`]), and its faults join `report`'s in the words
/// [`check_chunks`] gives them.
pub fn complete_deferred(reader: &RecordReader, report: &mut ChunkReport) {
    for begin in std::mem::take(&mut report.deferred) {
        if let Err(e) = reader.check_chunk(begin) {
            let summary = reader.chunk_of(begin);
            report.faults.push(ChunkFault::Riegeli {
                offset: begin,
                chunk_type: summary.as_ref().map_or(ChunkType::Simple, |c| c.chunk_type),
                num_records: summary.map_or(1, |c| c.num_records),
                detail: strip_name(reader, &e),
            });
        }
    }
}

/// The text of `e` without the file name it begins with (the report names the file).
fn strip_name(reader: &RecordReader, e: &RecordsError) -> String {
    let text = e.to_string();
    let prefix = format!("{}: ", reader.name());
    text.strip_prefix(&prefix).unwrap_or(&text).to_string()
}

/// Which chunks [`check_chunks_with`] checks up to their decompression only, leaving the rest
/// of their check to [`complete_deferred`].
#[derive(Clone, Copy)]
enum Deferral<'a> {
    /// None: every chunk is checked whole.
    Nothing,
    /// Those a merge of these chunks streams ([`check_chunks_deferring`]); the chunks they
    /// keep decoded are read through their cache.
    Streamed(&'a FileChunks),
    /// Those at these file positions ([`check_chunks_leaving`]).
    These(&'a HashSet<u64>),
}

/// [`check_chunks`], the chunks `deferral` names checked up to their decompression only.
fn check_chunks_with(reader: &RecordReader, deferral: Deferral<'_>) -> ChunkReport {
    let shared = match deferral {
        Deferral::Streamed(chunks) => Some(chunks),
        _ => None,
    };
    let deferred = |c: &ChunkSummary| {
        c.num_records == 1
            && match deferral {
                Deferral::Nothing => false,
                Deferral::Streamed(fc) => fc.streams_chunk_at(c.begin),
                Deferral::These(left) => left.contains(&c.begin),
            }
    };
    let check = |c: &ChunkSummary| -> Result<Vec<u64>, RecordsError> {
        if deferred(c) {
            return reader.record_len_at(c.begin).map(|len| vec![len]);
        }
        let kept = shared
            .filter(|_| c.num_records == 1)
            .and_then(|fc| Some((fc, fc.kept_chunk_at(c.begin)?)));
        match kept {
            Some((fc, index)) => match fc.bytes(index) {
                Ok(bytes) => Ok(vec![bytes.len() as u64]),
                Err(_) => reader.check_chunk(c.begin),
            },
            None => reader.check_chunk(c.begin),
        }
    };
    let mut report = ChunkReport::default();
    let strip = |e: &RecordsError| strip_name(reader, e);
    let mut chunks: Vec<ChunkSummary> = Vec::new();
    for chunk in reader.chunks() {
        match chunk {
            Ok(c) if c.num_records > 0 => chunks.push(c),
            Ok(_) => {}
            Err(e) => {
                report.faults.push(ChunkFault::BrokenSequence {
                    offset: e.offset(),
                    detail: strip(&e),
                });
                break;
            }
        }
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4);
    let results = unbound_io::each_in_order(&chunks, threads, |c| {
        let checked = check(c);
        if shared.is_none() {
            // Checked: its pages leave resident memory, so a check of a file larger than
            // memory holds a few chunks of it (a later reader maps them back from the page
            // cache).
            reader.release_chunk_pages(c.begin);
        }
        checked
    });
    for (c, result) in chunks.iter().zip(results) {
        match result {
            Ok(lens) => {
                report.record_lengths.extend((c.begin..).zip(lens));
                if deferred(c) {
                    report.deferred.push(c.begin);
                }
            }
            Err(e) => report.faults.push(ChunkFault::Riegeli {
                offset: c.begin,
                chunk_type: c.chunk_type,
                num_records: c.num_records,
                detail: strip(&e),
            }),
        }
    }
    let (metadata_position, metadata) = match reader.last_record() {
        Ok((position, bytes)) => match ChunkMetadata::decode(bytes) {
            Ok(m) => (position, m),
            Err(e) => {
                report.faults.push(ChunkFault::NotChunkMetadata {
                    position,
                    detail: e.to_string(),
                });
                return report;
            }
        },
        Err(e) => {
            report
                .faults
                .push(ChunkFault::MetadataUnreadable { detail: strip(&e) });
            return report;
        }
    };
    report.faults.extend(layout_faults(
        &metadata,
        metadata_position,
        &report.record_lengths,
    ));
    report.metadata = Some((metadata_position, metadata));
    report
}

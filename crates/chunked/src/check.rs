//! How a `.cpb`'s chunk metadata fits its records: the checks the [`crate::FileChunks`] of
//! every merge makes ([`check_layout`]), and the complete check of `verify` ([`check_chunks`]).
//!
//! TensorFlow writes a `.cpb` as one record per chunk, in chunk order, then the
//! `ChunkMetadata` as the last record; `ChunkInfo` *i* names the *i*-th record by its numeric
//! position and size. A file whose metadata says anything else lies, even when every hash
//! holds: an offset that names no record (Riegeli's seek would silently read the next one), a
//! duplicated or out-of-order offset, a record no chunk names, a size that differs from the
//! record's. Each such file would merge into a different message than the one written, so each
//! is a [`ChunkFault`], and a merge refuses it.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use prost::Message as _;
use unbound_proto::tensorflow::proto_splitter::{
    chunk_info::Type as InfoType, ChunkMetadata, ChunkedMessage,
};
use unbound_records::{ChunkSummary, ChunkType, RecordReader, RecordsError};

use crate::merger::{ChunkSource, FileChunks, MAX_NESTING};
use crate::tags::steps;

/// At most this many faults of one kind are listed (a metadata of a million lying entries
/// gives a short report).
const MAX_FAULTS_PER_KIND: usize = 20;

/// One way a `.cpb` file's records or chunk metadata are wrong. `Display` gives the text
/// `verify` prints after the file name.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChunkFault {
    /// The chunk headers cannot be followed to the end of the file: chunks after `offset`
    /// were not checked.
    BrokenSequence {
        /// Where the sequence breaks.
        offset: Option<u64>,
        /// What is wrong there.
        detail: String,
    },
    /// A Riegeli chunk that holds records cannot be read (data hash, framing, record sizes,
    /// decompression).
    Riegeli {
        /// Where the chunk begins.
        offset: u64,
        /// Its type.
        chunk_type: ChunkType,
        /// How many records its header declares.
        num_records: u64,
        /// What is wrong.
        detail: String,
    },
    /// The last record, which must be the `ChunkMetadata`, cannot be read.
    MetadataUnreadable {
        /// Why.
        detail: String,
    },
    /// The last record is not a `ChunkMetadata`.
    NotChunkMetadata {
        /// Its position.
        position: u64,
        /// The protobuf decoding fault.
        detail: String,
    },
    /// A `ChunkInfo` type that is neither MESSAGE nor BYTES.
    InvalidType {
        /// Index of the `ChunkInfo`.
        chunk: usize,
        /// The type found.
        chunk_type: i32,
    },
    /// A `ChunkInfo` position at or after the metadata record.
    NotBeforeMetadata {
        /// Index of the `ChunkInfo`.
        chunk: usize,
        /// Its record position.
        position: u64,
        /// The metadata record's position.
        metadata_position: u64,
    },
    /// No (readable) record begins at a `ChunkInfo`'s position.
    NoRecord {
        /// Index of the `ChunkInfo`.
        chunk: usize,
        /// Its record position.
        position: u64,
    },
    /// A `ChunkInfo` position that is not after the previous one's (chunks are records in
    /// chunk order, one each).
    OutOfOrder {
        /// Index of the `ChunkInfo`.
        chunk: usize,
        /// Its record position.
        position: u64,
        /// The position of the `ChunkInfo` before it.
        previous: u64,
    },
    /// A `ChunkInfo` size that differs from its record's.
    SizeMismatch {
        /// Index of the `ChunkInfo`.
        chunk: usize,
        /// Its record position.
        position: u64,
        /// The size in the metadata.
        declared: u64,
        /// The record's size.
        actual: u64,
    },
    /// Records before the metadata that no `ChunkInfo` names.
    Unreferenced {
        /// The first such record's position.
        first: u64,
        /// How many there are.
        count: u64,
    },
    /// A chunk index in the `ChunkedMessage` tree past the `ChunkInfo` list.
    IndexOutOfRange {
        /// The index.
        index: u64,
        /// How many chunks there are.
        chunks: usize,
    },
    /// A field tag of the tree that does not decode.
    BadFieldTag {
        /// The tag, as debug text.
        tag: String,
        /// What is wrong with it.
        fault: crate::tags::TagFault,
    },
    /// The tree nests deeper than [`MAX_NESTING`].
    TooDeep {
        /// The limit.
        limit: usize,
    },
}

impl fmt::Display for ChunkFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChunkFault::BrokenSequence { detail, .. } => {
                write!(f, "the chunk sequence is broken: {detail}")
            }
            ChunkFault::Riegeli {
                offset,
                chunk_type,
                num_records,
                detail,
            } => write!(
                f,
                "Riegeli chunk at offset {offset} ({chunk_type:?}, {num_records} records): {detail}"
            ),
            ChunkFault::MetadataUnreadable { detail } => write!(
                f,
                "the chunk metadata (the last record) cannot be read: {detail}"
            ),
            ChunkFault::NotChunkMetadata { position, detail } => write!(
                f,
                "the last record (position {position}) is not a ChunkMetadata: {detail}"
            ),
            ChunkFault::InvalidType { chunk, chunk_type } => {
                write!(f, "chunk {chunk}: invalid chunk type {chunk_type}")
            }
            ChunkFault::NotBeforeMetadata {
                chunk,
                position,
                metadata_position,
            } => write!(
                f,
                "chunk {chunk} is at record position {position}, not before the metadata record at {metadata_position}"
            ),
            ChunkFault::NoRecord { chunk, position } => {
                write!(f, "chunk {chunk}: no readable record at position {position}")
            }
            ChunkFault::OutOfOrder {
                chunk,
                position,
                previous,
            } => write!(
                f,
                "chunk {chunk}: record position {position} is not after the previous chunk's ({previous})"
            ),
            ChunkFault::SizeMismatch {
                chunk,
                position,
                declared,
                actual,
            } => write!(
                f,
                "chunk {chunk}: size {declared} in the metadata, but the record at position {position} holds {actual} bytes"
            ),
            ChunkFault::Unreferenced { first, count } => write!(
                f,
                "{count} record(s) before the metadata are not named by any chunk (the first at position {first})"
            ),
            ChunkFault::IndexOutOfRange { index, chunks } => {
                write!(f, "chunk index {index} is out of range for {chunks} chunks")
            }
            ChunkFault::BadFieldTag { tag, fault } => write!(f, "bad field tag {tag}: {fault}"),
            ChunkFault::TooDeep { limit } => {
                write!(f, "chunk metadata nested deeper than {limit} levels")
            }
        }
    }
}

/// The records of a file, as the chunk headers declare them.
trait Records {
    /// `Some(length)` when a record begins at `pos` (`Some(None)`: its length is not known).
    fn get(&self, pos: u64) -> Option<Option<u64>>;
    /// The positions of the records before `end`, in order.
    fn before(&self, end: u64) -> Box<dyn Iterator<Item = u64> + '_>;
}

/// Records known from chunk headers alone: `(chunk begin, record count)`, in file order.
struct Ranges(Vec<(u64, u64)>);

impl Records for Ranges {
    fn get(&self, pos: u64) -> Option<Option<u64>> {
        let i = self.0.partition_point(|&(begin, _)| begin <= pos);
        let &(begin, n) = self.0.get(i.checked_sub(1)?)?;
        (pos - begin < n).then_some(None)
    }
    fn before(&self, end: u64) -> Box<dyn Iterator<Item = u64> + '_> {
        Box::new(
            self.0
                .iter()
                .flat_map(|&(begin, n)| begin..begin.saturating_add(n))
                .take_while(move |&p| p < end),
        )
    }
}

/// Records that were read, with their lengths.
impl Records for BTreeMap<u64, u64> {
    fn get(&self, pos: u64) -> Option<Option<u64>> {
        BTreeMap::get(self, &pos).map(|&len| Some(len))
    }
    fn before(&self, end: u64) -> Box<dyn Iterator<Item = u64> + '_> {
        Box::new(self.range(..end).map(|(&p, _)| p))
    }
}

/// The records of `reader` as declared by its chunk headers (read and hash-checked; no chunk
/// data is read). Fails where the chunk sequence breaks.
fn record_ranges(reader: &RecordReader) -> Result<Ranges, RecordsError> {
    let mut ranges = Vec::new();
    for chunk in reader.chunks() {
        let chunk = chunk?;
        if chunk.num_records > 0 {
            ranges.push((chunk.begin, chunk.num_records));
        }
    }
    Ok(Ranges(ranges))
}

/// Checks how `metadata` (the last record of `reader`, at `metadata_position`) fits the
/// records, reading chunk headers only: every `ChunkInfo` names, in order, exactly the next
/// record before the metadata (no gaps, no duplicates, nothing after the metadata), with a
/// known type; the tree's chunk indices are in range, its field tags decode and its depth is
/// bounded. Record sizes are not known from headers: [`crate::FileChunks`] checks each when it
/// reads the chunk, [`check_chunks`] checks them all. Fails only when the chunk headers
/// themselves cannot be read.
pub fn check_layout(
    reader: &RecordReader,
    metadata: &ChunkMetadata,
    metadata_position: u64,
) -> Result<Vec<ChunkFault>, RecordsError> {
    let ranges = record_ranges(reader)?;
    Ok(layout_faults(metadata, metadata_position, &ranges))
}

/// The faults of the metadata against `records`, in the order a reader meets them.
fn layout_faults(
    metadata: &ChunkMetadata,
    metadata_position: u64,
    records: &dyn Records,
) -> Vec<ChunkFault> {
    let mut faults = Vec::new();
    let infos = &metadata.chunks;
    let mut past = 0;
    for (chunk, info) in infos.iter().enumerate() {
        if info.offset >= metadata_position && past < MAX_FAULTS_PER_KIND {
            past += 1;
            faults.push(ChunkFault::NotBeforeMetadata {
                chunk,
                position: info.offset,
                metadata_position,
            });
        }
    }
    let tree = metadata.message.clone().unwrap_or_default();
    check_tree(&tree, infos.len(), 0, &mut faults);
    let mut counts = [0usize; 4];
    let mut push = |kind: usize, fault: ChunkFault, faults: &mut Vec<ChunkFault>| {
        if counts[kind] < MAX_FAULTS_PER_KIND {
            counts[kind] += 1;
            faults.push(fault);
        }
    };
    let mut previous: Option<u64> = None;
    for (chunk, info) in infos.iter().enumerate() {
        if info.r#type != InfoType::Message as i32 && info.r#type != InfoType::Bytes as i32 {
            push(
                0,
                ChunkFault::InvalidType {
                    chunk,
                    chunk_type: info.r#type,
                },
                &mut faults,
            );
        }
        let position = info.offset;
        if position >= metadata_position {
            continue;
        }
        if let Some(previous) = previous.filter(|&p| position <= p) {
            push(
                1,
                ChunkFault::OutOfOrder {
                    chunk,
                    position,
                    previous,
                },
                &mut faults,
            );
        }
        previous = Some(position);
        match records.get(position) {
            None => push(2, ChunkFault::NoRecord { chunk, position }, &mut faults),
            Some(Some(actual)) if actual != info.size => push(
                3,
                ChunkFault::SizeMismatch {
                    chunk,
                    position,
                    declared: info.size,
                    actual,
                },
                &mut faults,
            ),
            Some(_) => {}
        }
    }
    // Every record before the metadata is named by some ChunkInfo.
    let mut named: Vec<u64> = infos.iter().map(|i| i.offset).collect();
    named.sort_unstable();
    named.dedup();
    let mut unreferenced: Option<(u64, u64)> = None;
    for p in records.before(metadata_position) {
        if named.binary_search(&p).is_err() {
            unreferenced.get_or_insert((p, 0)).1 += 1;
        }
    }
    if let Some((first, count)) = unreferenced {
        faults.push(ChunkFault::Unreferenced { first, count });
    }
    faults
}

/// The `ChunkedMessage` tree: chunk indices in range, field tags that decode, bounded depth.
fn check_tree(cm: &ChunkedMessage, chunks: usize, depth: usize, faults: &mut Vec<ChunkFault>) {
    if faults.len() > 4 * MAX_FAULTS_PER_KIND {
        return;
    }
    if depth > MAX_NESTING {
        faults.push(ChunkFault::TooDeep { limit: MAX_NESTING });
        return;
    }
    if let Some(index) = cm.chunk_index {
        if index >= chunks as u64 {
            faults.push(ChunkFault::IndexOutOfRange { index, chunks });
        }
    }
    for cf in &cm.chunked_fields {
        if let Err(fault) = steps(&cf.field_tag) {
            faults.push(ChunkFault::BadFieldTag {
                tag: format!("{:?}", cf.field_tag),
                fault,
            });
        }
        if let Some(child) = &cf.message {
            check_tree(child, chunks, depth + 1, faults);
        }
    }
}

/// Everything [`check_chunks`] found.
#[derive(Debug, Default)]
pub struct ChunkReport {
    /// Every fault, in file order within each kind (Riegeli chunks first, then the metadata).
    pub faults: Vec<ChunkFault>,
    /// The metadata and its record position, when the last record is one.
    pub metadata: Option<(u64, ChunkMetadata)>,
    /// The length of every readable record, by numeric position.
    pub record_lengths: BTreeMap<u64, u64>,
}

/// The complete check of a `.cpb`'s records and metadata (what `verify` reports): every
/// Riegeli chunk is verified and decoded ([`RecordReader::check_chunk`]: streamed, so a chunk
/// declaring gigabytes of zeros costs time, not memory), on up to four threads; the last
/// record is decoded as the `ChunkMetadata`; then [`check_layout`]'s checks and every
/// `ChunkInfo` size against its record. Never fails: what cannot be read is a fault.
pub fn check_chunks(reader: &RecordReader) -> ChunkReport {
    check_chunks_with(reader, None)
}

/// [`check_chunks`] of the file of `chunks`, reading the chunks it keeps decoded
/// ([`FileChunks::keep_decoded`]) through its cache: each is decoded whole once, and the merge
/// (and any other reader) that follows takes the same bytes instead of decoding it again. The
/// report is the same as [`check_chunks`]'s: a kept chunk that fails to decode is checked
/// again the streaming way, which gives the fault its usual words.
pub fn check_chunks_sharing(chunks: &FileChunks) -> ChunkReport {
    check_chunks_with(chunks.reader(), Some(chunks))
}

/// [`check_chunks`], with the kept chunks of `shared` read through its cache.
fn check_chunks_with(reader: &RecordReader, shared: Option<&FileChunks>) -> ChunkReport {
    let check = |c: &ChunkSummary| -> Result<Vec<u64>, RecordsError> {
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
    let strip = |e: &RecordsError| {
        let text = e.to_string();
        let prefix = format!("{}: ", reader.name());
        text.strip_prefix(&prefix).unwrap_or(&text).to_string()
    };
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
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
        .min(chunks.len().max(1));
    let mut results: Vec<(usize, Result<Vec<u64>, RecordsError>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(c) = chunks.get(i) else { break };
                        out.push((i, check(c)));
                    }
                    out
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    });
    results.sort_by_key(|(i, _)| *i);
    for (i, result) in results {
        let Some(c) = chunks.get(i) else { continue };
        match result {
            Ok(lens) => report.record_lengths.extend((c.begin..).zip(lens)),
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

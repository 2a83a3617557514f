//! How a `.cpb`'s chunk metadata fits its records, from the chunk headers alone: the check
//! every merge from a file makes ([`check_layout`]), which the complete check of `verify`
//! ([`crate::check_chunks`]) makes too, with the records' sizes.
//!
//! TensorFlow writes a `.cpb` as one record per chunk, in chunk order, then the
//! `ChunkMetadata` as the last record; `ChunkInfo` *i* names the *i*-th record by its numeric
//! position and size. A file whose metadata says anything else lies, even when every hash
//! holds: an offset that names no record (Riegeli's seek would silently read the next one), a
//! duplicated or out-of-order offset, a record no chunk names, a size that differs from the
//! record's. Each such file would merge into a different message than the one written, so each
//! is a [`ChunkFault`], and a merge refuses it.

use std::collections::BTreeMap;

use unbound_proto::tensorflow::proto_splitter::{
    chunk_info::Type as InfoType, ChunkInfo, ChunkMetadata, ChunkedMessage,
};
use unbound_records::{RecordReader, RecordsError};

use crate::error::ChunkedError;
use crate::fault::ChunkFault;
use crate::tags::steps;

/// Deepest message nesting the Merger builds (protobuf's own default recursion limit), and
/// so the deepest `ChunkedMessage` tree a metadata may hold.
pub const MAX_NESTING: usize = 100;

/// At most this many faults of one kind are listed (a metadata of a million lying entries
/// gives a short report).
const MAX_FAULTS_PER_KIND: usize = 20;

/// The records of a file, as the chunk headers declare them.
pub(crate) trait Records {
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
/// reads the chunk, [`crate::check_chunks`] checks them all. Fails only when the chunk headers
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
pub(crate) fn layout_faults(
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

/// Refuses a record of `reader` whose size is not chunk `index`'s declared size.
pub(crate) fn size_matches(
    reader: &RecordReader,
    index: u64,
    info: &ChunkInfo,
    actual: u64,
) -> crate::error::Result<()> {
    if actual == info.size {
        return Ok(());
    }
    Err(ChunkedError::Layout {
        source_name: reader.name().to_string(),
        faults: vec![ChunkFault::SizeMismatch {
            chunk: usize::try_from(index).unwrap_or(usize::MAX),
            position: info.offset,
            declared: info.size,
            actual,
        }],
    })
}

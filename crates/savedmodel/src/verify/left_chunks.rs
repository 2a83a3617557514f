//! `verify` of a `.cpb` whose graph it never holds (issue 29: memory follows the command).
//!
//! `verify` checked a `.cpb` on the merged model: its records, the merge, the merged
//! message's serialization and schema, the report `show` makes of it, its fingerprint. Merged,
//! a graph of millions of nodes was held whole (1.5 GB for the 3M-node `.cpb`, 4.3 GB for the
//! 9M-node one). Every one of those checks is a check of each field where it lies, so the merge
//! may leave the chunks of a graph and of its library where they are, as `show`'s does
//! (`show/unmerged.rs`): the records are checked as before, the model merged without those
//! chunks is checked as before, and each chunk left is read once more, on its own, and checked
//! against its type at the depth it lies at ([`check_left_chunks`]). The merged size the report
//! gives is summed with the chunks' own sizes in place of the fields that stand for them
//! ([`merged_len`]). `show` scans the chunks where they stand, and the fingerprint hashes the
//! graph a chunk at a time: memory holds a few chunks.
//!
//! Each chunk left is decompressed once for all four (issue 29: decompressing them was half
//! the CPU of a `verify` of a Brotli `.cpb` of millions of nodes, four times over). The file
//! is opened once ([`LeftChunks`]); the check of its records stops short of decompressing the
//! chunks left (`check_chunks_leaving`); the fingerprint, on its own thread, hands each chunk
//! it decodes to the check of the chunks left ([`Relay`]), which completes the records' check
//! (the reader remembers which chunks decompressed whole) and scans the chunk for `show` as
//! it goes ([`ScannedChunks`]). What the fingerprint did not hand over, the check reads
//! itself. Any fault found this way has the model verified again the usual way, which words
//! it as always.
//!
//! Only `verify` itself reads a model so (`Keep::ReportOnly`): a writer needs the merged model.
//! And only a model whose graph chunks are worth it ([`LeftChunks::open`]): the shared reading of a
//! `.cpb` (`SharedCpb`) decodes each chunk once for every pass, which a model of a few large
//! values gains more from.

use std::collections::{HashMap, HashSet};
use std::sync::mpsc::{Receiver, SyncSender};

use bytes::Bytes;
use unbound_chunked::FileChunks;
use unbound_proto::fields::tensorflow::graph_def;
use unbound_proto::tensorflow::proto_splitter::ChunkedMessage;
use unbound_wire::codec::{key_len, varint_len};
use unbound_wire::{Payload, WireField, WireMessage, WireValue};

use super::schema::Schema;
use crate::dir::SavedModel;
use crate::fingerprint::ChunkSeen;
use crate::show::unmerged::{leavable, UNMERGED};
use crate::show::ScannedChunks;

/// A `.cpb` whose chunks left unmerged would add up to at least this many decoded bytes is
/// verified without holding them ([`LeftChunks::open`]).
const LEAVE_FROM: u64 = 128 << 20;

/// How many decoded chunks the fingerprint may have handed over ahead of the check
/// ([`Relay`]): it waits past that, so memory holds a few chunks, not the graph.
const RELAYED_AHEAD: usize = 1;

/// The largest chunk the fingerprint hands over ([`Relay`]): it decodes a chunk it hands over
/// whole, where it would hash a larger one as a stream, and up to four are held at once
/// (decoded on its two threads, waiting in the relay, being checked). A larger chunk is
/// decoded by the check on its own, one at a time, as before the relay.
const RELAYED_MAX: u64 = 128 << 20;

/// The `.cpb` model file of a `verify` that leaves its graph's chunks unmerged: its chunks,
/// opened once for the check, the merge and the fingerprint, so that what one learns of a
/// chunk's bytes (they decompress whole, to their declared size) is learnt of those very
/// bytes by the others; which chunks are left; and what `show` finds in them, scanned as
/// they are checked.
pub(super) struct LeftChunks {
    /// The file's chunks (one reader, one mapping).
    pub(super) chunks: FileChunks,
    /// Its chunk metadata tree.
    pub(super) root: ChunkedMessage,
    /// The chunks left unmerged: each one's record position, by chunk index.
    positions: HashMap<u64, u64>,
    /// Those the fingerprint hands over ([`RELAYED_MAX`]): the same, by chunk index.
    relayed: HashMap<u64, u64>,
    /// What `show` finds in each, by record position.
    pub(super) scanned: ScannedChunks,
}

impl LeftChunks {
    /// The model file of `opened` opened to be verified leaving its graph's chunks unmerged,
    /// or `None` when it is not: its metadata does not show a merge the scans can follow
    /// (`leavable`), or those chunks declare fewer than [`LEAVE_FROM`] bytes together.
    pub(super) fn open(opened: &SavedModel) -> Option<Self> {
        Self::open_from(opened, LEAVE_FROM)
    }

    /// [`LeftChunks::open`], leaving chunks that declare at least `least` bytes together.
    fn open_from(opened: &SavedModel, least: u64) -> Option<Self> {
        let (chunks, metadata) = opened.chunks().ok()?;
        let root = metadata.message.clone().unwrap_or_default();
        let desc = crate::dir::saved_model_descriptor().ok()?;
        let mut positions = HashMap::new();
        let mut relayed = HashMap::new();
        let mut left = 0u64;
        for index in leavable(&root, &desc) {
            let info = usize::try_from(index)
                .ok()
                .and_then(|i| metadata.chunks.get(i))?;
            positions.insert(index, info.offset);
            if info.size <= RELAYED_MAX {
                relayed.insert(index, info.offset);
            }
            left += info.size;
        }
        (left >= least).then(|| Self {
            chunks,
            root,
            positions,
            relayed,
            scanned: ScannedChunks::default(),
        })
    }

    /// The record positions of the chunks left.
    pub(super) fn positions(&self) -> HashSet<u64> {
        self.positions.values().copied().collect()
    }

    /// A relay for the fingerprint to hand the chunks left to the check as it decodes them,
    /// and the check's end of it.
    pub(super) fn relay(&self) -> (Relay<'_>, Receiver<(u64, Bytes)>) {
        let (sender, received) = std::sync::mpsc::sync_channel(RELAYED_AHEAD);
        (
            Relay {
                sender,
                positions: &self.relayed,
            },
            received,
        )
    }
}

/// The fingerprint's end of [`LeftChunks::relay`]: each chunk left unmerged that it decodes
/// (of at most [`RELAYED_MAX`] bytes) is handed over with its record position. Once the
/// fingerprint has ended (this dropped), the check reads itself what it was not handed.
pub(super) struct Relay<'a> {
    sender: SyncSender<(u64, Bytes)>,
    /// The record positions of the chunks to hand over, by chunk index.
    positions: &'a HashMap<u64, u64>,
}

impl ChunkSeen for Relay<'_> {
    fn wants(&self, index: u64) -> bool {
        self.positions.contains_key(&index)
    }

    fn seen(&self, index: u64, bytes: &Bytes) {
        if let Some(&position) = self.positions.get(&index) {
            // The check has stopped (a fault found elsewhere): nothing more is wanted.
            let _ = self.sender.send((position, bytes.clone()));
        }
    }
}

/// The chunks left unmerged in `model`: each payload, the depth of the message it stands in,
/// and that message's type.
fn left_in(model: &WireMessage) -> Vec<(&Payload, usize, String)> {
    fn walk<'m>(m: &'m WireMessage, depth: usize, out: &mut Vec<(&'m Payload, usize, String)>) {
        for field in &m.fields {
            match (&field.value, field.number) {
                (WireValue::Bytes(payload), UNMERGED) => {
                    let ty = m
                        .descriptor
                        .as_ref()
                        .map(|d| d.full_name().to_string())
                        .unwrap_or_default();
                    out.push((payload, depth, ty));
                }
                (WireValue::Message(sub), _) => walk(sub, depth + 1, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(model, 0, &mut out);
    out
}

/// What the graph chunks left unmerged hold of their graph's `library`, by record position:
/// the bytes of those fields' keys and lengths, and of their contents ([`merged_len`]).
pub(super) type HiddenLibraries = HashMap<u64, (u64, u64)>;

/// What the check of one chunk left unmerged found: what it holds of its graph's `library`.
type ChunkChecked = Result<(u64, u64), String>;

/// Checks each chunk left unmerged in `model` against `schema` as a part of the model: read
/// (its record checked, its size against the declared one), parsed, and checked as a message
/// of the type it stands in, at that depth; what `show` finds in it goes to `scanned`. The
/// chunks `relayed` hands over (decoded by the fingerprint, until it ends) are checked as
/// they come; the others are read here, on up to `threads` threads. The first fault in the
/// chunks' order is the one reported. Returns what the graph chunks hold of their graph's
/// `library`.
pub(super) fn check_left_chunks(
    schema: &Schema,
    model: &WireMessage,
    relayed: Option<Receiver<(u64, Bytes)>>,
    scanned: Option<&ScannedChunks>,
    threads: usize,
) -> Result<HiddenLibraries, String> {
    let left = left_in(model);
    let position = |payload: &Payload| match payload {
        Payload::Record(record) => record.position,
        Payload::Inline(_) => u64::MAX,
    };
    let check = |(payload, depth, ty): &(&Payload, usize, String), bytes: Bytes| -> ChunkChecked {
        let part = WireMessage::parse(&bytes, None).map_err(|e| format!("{ty}: {e}"))?;
        schema.check_part(&part, ty, *depth)?;
        let mut library = (0, 0);
        if ty == "tensorflow.GraphDef" {
            for field in &part.fields {
                if let (graph_def::LIBRARY, WireValue::Bytes(p)) = (field.number, &field.value) {
                    library.0 += key_len(field.number) + varint_len(p.len());
                    library.1 += p.len();
                }
            }
        }
        if let (Some(scanned), Payload::Record(record)) = (scanned, payload) {
            scanned.scan(record.position, ty, &bytes);
        }
        Ok(library)
    };
    let mut found: Vec<Option<ChunkChecked>> = left.iter().map(|_| None).collect();
    if let Some(relayed) = relayed {
        let at: HashMap<u64, usize> = left
            .iter()
            .enumerate()
            .map(|(i, (payload, ..))| (position(payload), i))
            .collect();
        for (position, bytes) in relayed {
            if let Some(&i) = at.get(&position) {
                if found[i].is_none() {
                    found[i] = Some(check(&left[i], bytes));
                }
            }
        }
    }
    let rest: Vec<usize> = (0..left.len()).filter(|&i| found[i].is_none()).collect();
    let read = unbound_io::each_in_order(&rest, threads, |&i| {
        let bytes = left[i].0.bytes().map_err(|e| e.to_string())?;
        check(&left[i], bytes)
    });
    for (i, checked) in rest.into_iter().zip(read) {
        found[i] = Some(checked);
    }
    let mut hidden = HiddenLibraries::new();
    for ((payload, ..), checked) in left.iter().zip(found) {
        let library = checked.unwrap_or_else(|| Err("a chunk was not checked".to_string()))?;
        if library != (0, 0) {
            hidden.insert(position(payload), library);
        }
    }
    Ok(hidden)
}

/// The size of the message `model` stands for: its own encoding, with each chunk left
/// unmerged counted as the fields it holds (its declared size, which its record was checked
/// to have) rather than as a field of its own. One thing more differs: a chunk merged into a
/// graph's `library` first gathers every `library` of the graph into one, those inside the
/// graph's chunks too (`hidden`), so where the merged `library` holds chunks left unmerged,
/// those others are counted as its content, without keys and lengths of their own.
pub(super) fn merged_len(model: &WireMessage, hidden: &HiddenLibraries) -> u64 {
    let own: u64 = model.fields.iter().map(|f| field_len(f, hidden)).sum();
    let gathered = model
        .fields
        .iter()
        .find_map(|f| match (&f.value, f.number) {
            (WireValue::Message(library), graph_def::LIBRARY)
                if library.fields.iter().any(|f| f.number == UNMERGED) =>
            {
                Some(merged_len(library, hidden))
            }
            _ => None,
        });
    let Some(library) = gathered.filter(|_| is_graph(model)) else {
        return own;
    };
    let (overhead, content) = model
        .fields
        .iter()
        .filter_map(|f| match (&f.value, f.number) {
            (WireValue::Bytes(Payload::Record(record)), UNMERGED) => hidden.get(&record.position),
            _ => None,
        })
        .fold((0, 0), |(o, c), &(overhead, content)| {
            (o + overhead, c + content)
        });
    own - overhead - varint_len(library) + varint_len(library + content)
}

/// Whether `m` is a graph (a `GraphDef`).
fn is_graph(m: &WireMessage) -> bool {
    m.descriptor
        .as_ref()
        .is_some_and(|d| d.full_name() == "tensorflow.GraphDef")
}

/// [`merged_len`] of one field.
fn field_len(field: &WireField, hidden: &HiddenLibraries) -> u64 {
    match (&field.value, field.number) {
        (WireValue::Bytes(payload), UNMERGED) => payload.len(),
        (WireValue::Message(sub), number) => {
            let len = merged_len(sub, hidden);
            key_len(number) + varint_len(len) + len
        }
        _ => field.encoded_len(),
    }
}

#[cfg(test)]
mod tests {
    use super::{left_in, LeftChunks};
    use crate::dir::SavedModel;
    use crate::fingerprint::ChunkSeen;
    use crate::show::unmerged::tests::{write_model, Layout};
    use crate::verify::{verify_cpb, Leaving, SchemaCheck, VerifyReport};
    use unbound_chunked::ChunkSource;
    use unbound_records::Compression;

    /// The report and model of `verify_cpb` of `dir`'s `.cpb`, leaving its graph or not, and
    /// with it what `show` makes of the model verified, from what the check scanned.
    fn verified(dir: &std::path::Path, leave: bool) -> (VerifyReport, Option<usize>) {
        let mut report = VerifyReport::default();
        let path = dir.join("saved_model.cpb");
        if !leave {
            let model = verify_cpb(&path, None, None, SchemaCheck::Now, &mut report);
            return (report, model.map(|m| left_in(&m).len()));
        }
        let opened = SavedModel::open(dir).unwrap();
        let left = LeftChunks::open_from(&opened, 0).expect("a graph in chunks to leave");
        let (relay, relayed) = left.relay();
        let leaving = Leaving {
            chunks: &left.chunks,
            relayed,
            scanned: &left.scanned,
            positions: left.positions(),
        };
        // Another thread hands the first chunk left over, as the fingerprint would; the check
        // reads the others itself.
        let first = left.positions.keys().min().copied().unwrap();
        let chunks = &left.chunks;
        let model = std::thread::scope(|s| {
            s.spawn(move || relay.seen(first, &chunks.bytes(first).unwrap()));
            verify_cpb(&path, None, Some(leaving), SchemaCheck::Now, &mut report)
        });
        if let Some(model) = &model {
            // Every chunk left was scanned for `show`, which takes those scans and reports
            // what it reports reading the file on its own.
            assert_eq!(left.scanned.len(), left_in(model).len());
            let count = left.chunks.infos().len() as u64;
            let shown =
                crate::show::show_merged_cpb(&opened, model, count, Some(&left.scanned)).unwrap();
            assert_eq!(left.scanned.len(), 0, "every scan taken");
            let alone = crate::show::show(dir).unwrap();
            assert_eq!(
                serde_json::to_string(&shown).unwrap(),
                serde_json::to_string(&alone).unwrap()
            );
        }
        (report, model.map(|m| left_in(&m).len()))
    }

    #[test]
    fn a_cpb_verified_leaving_its_graph_reports_what_the_merged_one_reports() {
        // Layout, chunks left unmerged.
        let cases = [
            (Layout::Interleaved, 3),
            (Layout::BaseWithoutLibrary, 3),
            (Layout::VersionsChunk, 1),
        ];
        for (layout, left) in cases {
            for compression in [Compression::None, Compression::Zstd { level: 1 }] {
                let dir = tempfile::tempdir().unwrap();
                write_model(dir.path(), compression, layout, |_| {});
                let (leaving, left_now) = verified(dir.path(), true);
                let (whole, none_left) = verified(dir.path(), false);
                assert_eq!(left_now, Some(left), "{layout:?}");
                assert_eq!(none_left, Some(0), "{layout:?}");
                assert!(
                    leaving.faults.is_empty(),
                    "{layout:?}: {:?}",
                    leaving.faults
                );
                // The same lines, the merged size among them.
                assert_eq!(leaving.checked, whole.checked, "{layout:?} {compression:?}");
            }
        }
    }

    #[test]
    fn a_fault_inside_a_chunk_left_unmerged_is_the_merged_model_s_fault() {
        let dir = tempfile::tempdir().unwrap();
        write_model(
            dir.path(),
            Compression::Zstd { level: 1 },
            Layout::BadNameInChunk,
            |_| {},
        );
        let (leaving, model) = verified(dir.path(), true);
        let (whole, _) = verified(dir.path(), false);
        assert_eq!(model, None);
        assert_eq!(leaving.faults.len(), 1, "{:?}", leaving.faults);
        assert!(
            leaving.faults[0].fault.contains("UTF-8"),
            "{:?}",
            leaving.faults
        );
        assert_eq!(
            format!("{:?}", leaving.faults),
            format!("{:?}", whole.faults)
        );
    }
}

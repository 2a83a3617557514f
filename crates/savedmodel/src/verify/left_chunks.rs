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
//! Only `verify` itself reads a model so (`Keep::ReportOnly`): a writer needs the merged model.
//! And only a model whose graph chunks are worth it ([`leaves_graph`]): the shared reading of a
//! `.cpb` (`SharedCpb`) decodes each chunk once for every pass, which a model of a few large
//! values gains more from.

use std::collections::HashMap;

use unbound_proto::fields::tensorflow::graph_def;
use unbound_wire::codec::{key_len, varint_len};
use unbound_wire::{Payload, WireField, WireMessage, WireValue};

use super::schema::Schema;
use crate::dir::SavedModel;
use crate::show::unmerged::{leavable, UNMERGED};

/// A `.cpb` whose chunks left unmerged would add up to at least this many decoded bytes is
/// verified without holding them ([`leaves_graph`]).
const LEAVE_FROM: u64 = 128 << 20;

/// Whether the `.cpb` model file of `opened` is verified leaving its graph's chunks unmerged:
/// the metadata shows a merge the scans can follow (`leavable`), and those chunks declare at
/// least [`LEAVE_FROM`] bytes together.
pub(super) fn leaves_graph(opened: &SavedModel) -> bool {
    let Ok((_, metadata)) = opened.chunks() else {
        return false;
    };
    let (tree, Ok(root)) = (
        metadata.message.clone().unwrap_or_default(),
        crate::dir::saved_model_descriptor(),
    ) else {
        return false;
    };
    let left: u64 = leavable(&tree, &root)
        .into_iter()
        .filter_map(|index| usize::try_from(index).ok())
        .filter_map(|index| metadata.chunks.get(index))
        .map(|info| info.size)
        .sum();
    left >= LEAVE_FROM
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

/// What the check of one chunk left unmerged found: its record position, and what it holds of
/// its graph's `library` ([`HiddenLibraries`]).
type ChunkChecked = Result<(u64, (u64, u64)), String>;

/// Checks each chunk left unmerged in `model` against `schema` as a part of the model: read
/// (its record checked, its size against the declared one), parsed, and checked as a message
/// of the type it stands in, at that depth. On up to `threads` threads, one chunk per thread
/// at a time; the first fault in the chunks' order is the one reported. Returns what the
/// graph chunks hold of their graph's `library`.
pub(super) fn check_left_chunks(
    schema: &Schema,
    model: &WireMessage,
    threads: usize,
) -> Result<HiddenLibraries, String> {
    let left = left_in(model);
    let check = |(payload, depth, ty): &(&Payload, usize, String)| -> ChunkChecked {
        let bytes = payload.bytes().map_err(|e| e.to_string())?;
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
        let position = match payload {
            Payload::Record(record) => record.position,
            Payload::Inline(_) => u64::MAX,
        };
        Ok((position, library))
    };
    let found = unbound_io::each_in_order(&left, threads, check);
    let mut hidden = HiddenLibraries::new();
    for checked in found {
        let (position, library) = checked?;
        if library != (0, 0) {
            hidden.insert(position, library);
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
    use super::left_in;
    use crate::show::unmerged::tests::{write_model, Layout};
    use crate::verify::{verify_cpb, VerifyReport};
    use unbound_records::Compression;

    /// The report and model of `verify_cpb` of `dir`'s `.cpb`, leaving its graph or not.
    fn verified(dir: &std::path::Path, leave: bool) -> (VerifyReport, Option<usize>) {
        let mut report = VerifyReport::default();
        let model = verify_cpb(&dir.join("saved_model.cpb"), None, leave, &mut report);
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

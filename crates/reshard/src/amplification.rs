//! Read amplification of a plan: how many source bytes writing each target shard reads,
//! counted without reading anything, by the same rules the engine reads by
//! ([`unbound_bundle::StoredVariable::read_ranges`]).

use std::collections::BTreeMap;

use unbound_bundle::dtype::{storage, Storage};
use unbound_bundle::BundleReader;

use crate::plan::{Plan, TargetItem, VariablePlan, BLOCK};

/// Per source piece (by key): its size and the ranges (start, length) read from it.
type PieceReads = BTreeMap<Vec<u8>, (u64, Vec<(u64, u64)>)>;

/// Fills each shard's `read` and the plan's `checksum_read`: the data copies of a shard read
/// the ranges its slices need (whole pieces for strings, whole entries for tensors copied
/// whole); a source piece whose ranges, over the whole plan, do not cover it is read once
/// more in full to check its checksum (counted once, in the total, not per shard).
pub(crate) fn count_reads(plan: &mut Plan, reader: &BundleReader) {
    let mut pieces: PieceReads = BTreeMap::new();
    for shard in &mut plan.shards {
        let mut read = 0u64;
        for item in &shard.items {
            match item {
                TargetItem::Whole { key } => {
                    read += reader.stored_bytes(key.as_bytes()).unwrap_or(0);
                }
                TargetItem::Slice { variable, region } => {
                    read += slice_reads(&plan.variables[*variable], region, &mut pieces);
                }
            }
        }
        shard.read = read;
    }
    plan.checksum_read = pieces
        .values()
        .filter(|(size, ranges)| !covers(*size, ranges))
        .map(|(size, _)| size)
        .sum();
}

/// Bytes read to write `region` of `var`, each range recorded under its piece.
fn slice_reads(var: &VariablePlan, region: &[(u64, u64)], pieces: &mut PieceReads) -> u64 {
    let stored = &var.stored;
    match storage(stored.dtype) {
        Storage::Fixed(_) => {
            let ranges = stored.read_ranges(region, BLOCK).unwrap_or_default();
            let mut read = 0;
            for (i, start, len) in ranges {
                let p = &stored.pieces[i];
                pieces
                    .entry(p.key.clone())
                    .or_insert_with(|| (p.entry.size.max(0) as u64, Vec::new()))
                    .1
                    .push((start, len));
                read += len;
            }
            read
        }
        // Strings: every intersecting piece is decoded whole (its own checksums checked).
        _ => stored
            .pieces
            .iter()
            .filter(|p| {
                p.extents
                    .iter()
                    .zip(region)
                    .all(|(&(a, m), &(b, n))| a < b + n && b < a + m)
            })
            .map(|p| p.entry.size.max(0) as u64)
            .sum(),
    }
}

/// Whether the checksum of a piece of `size` bytes is checked from the `ranges` (start,
/// length) read from it, in that order, without reading it again: the rule of
/// `unbound_bundle::BoxReader::finish`, whose record of runs drops a range that overlaps one
/// recorded before and needs the recorded ranges to meet into exactly `0..size`. (With
/// several workers the order ranges arrive in can differ from the plan's.)
fn covers(size: u64, ranges: &[(u64, u64)]) -> bool {
    let mut recorded: BTreeMap<u64, u64> = BTreeMap::new();
    for &(start, len) in ranges {
        if len == 0 {
            continue;
        }
        let end = start + len;
        if recorded
            .range(..end)
            .next_back()
            .is_some_and(|(&s, &l)| s + l > start)
        {
            continue;
        }
        recorded.insert(start, len);
    }
    let mut at = 0;
    for (&s, &l) in &recorded {
        if s != at {
            return false;
        }
        at = s + l;
    }
    at == size
}

#[cfg(test)]
mod tests {
    use super::covers;

    #[test]
    fn coverage_follows_the_checksum_record() {
        assert!(covers(10, &[(5, 5), (0, 5)]));
        // An overlapping range is dropped, leaving a gap.
        assert!(!covers(10, &[(0, 7), (3, 7)]));
        assert!(covers(10, &[(0, 7), (3, 7), (7, 3)]));
        assert!(!covers(10, &[(0, 4), (5, 5)]));
        assert!(!covers(10, &[(0, 9)]));
        assert!(covers(0, &[]));
    }
}

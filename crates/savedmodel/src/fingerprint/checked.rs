//! [`CheckedSlices`]: serialized messages one fingerprint found canonical, by address, so that
//! a later fingerprint of the same bytes need not check them again.
//!
//! `merge` verifies its `.cpb` first, and verify's fingerprint of it checks every node of the
//! graph for canonical form (`already_canonical.rs`) before hashing it as it is. The merged
//! model then holds those very nodes, slices of the same decoded chunks, and the fingerprint
//! of the `.pb` it is written as checked them all a second time: a third of a merge of a model
//! of millions of nodes (issue 15). The first check's verdicts are carried over here.
//!
//! Why an address is enough: a verdict is recorded for the bytes at `[address, address + len)`
//! read as a message of one type, with the deepest nesting at which it holds. The buffers those bytes lie in are held here
//! (only slices of them are kept), so the memory cannot be freed and reused for other bytes
//! while the verdicts stand; bytes of a shared buffer are never written to. The same bytes,
//! the same type and no deeper a nesting give the same answer.

use bytes::Bytes;

/// One message found canonical: where it starts, its length, its type and the deepest nesting
/// at which it is canonical (a check's only limit is on nesting, so the answer holds at any
/// shallower one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    address: usize,
    len: u32,
    type_index: u16,
    deepest: u16,
}

impl Entry {
    /// The message at `address`, `len` bytes long, of the type numbered `type_index`, found
    /// canonical at nesting up to `deepest`; `None` past what an entry holds (such a message is
    /// then simply checked again).
    pub(crate) fn new(
        address: usize,
        len: usize,
        type_index: usize,
        deepest: usize,
    ) -> Option<Self> {
        Some(Entry {
            address,
            len: u32::try_from(len).ok()?,
            type_index: u16::try_from(type_index).ok()?,
            deepest: u16::try_from(deepest).unwrap_or(u16::MAX),
        })
    }

    fn end(&self) -> usize {
        self.address.saturating_add(self.len as usize)
    }
}

/// What an encoder recorded ([`super::canonical::Encoder::record_checked`]): each message it
/// found canonical, and the type name of each type number.
#[derive(Debug, Default)]
pub(crate) struct Recorded {
    pub(super) entries: Vec<Entry>,
    pub(super) types: Vec<String>,
}

/// Serialized messages found canonical, in address order, with the buffers they lie in kept
/// alive.
///
/// Looked up in the order a model's fields are met, which is mostly the order they were
/// recorded in: each lookup starts next to the last one found ([`CheckedSlices::is_canonical`]),
/// and binary-searches only when that misses. A hash map of millions of addresses cost more to
/// build (a cache miss per insertion) than the lookups it served.
#[derive(Default)]
pub(crate) struct CheckedSlices {
    /// The buffers the slices lie in (each a whole chunk as read).
    owners: Vec<Bytes>,
    /// The message type names, indexed by [`Entry::type_index`].
    types: Vec<String>,
    /// Sorted by address.
    entries: Vec<Entry>,
}

impl std::fmt::Debug for CheckedSlices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckedSlices")
            .field("owners", &self.owners.len())
            .field("types", &self.types)
            .field("slices", &self.entries.len())
            .finish()
    }
}

impl CheckedSlices {
    /// The verdicts `recorded`, kept only for slices lying wholly inside one of `owners`:
    /// anything else may lie in memory freed since.
    pub(crate) fn new(recorded: Recorded, owners: Vec<Bytes>) -> Self {
        let Recorded { mut entries, types } = recorded;
        let mut ranges: Vec<(usize, usize)> = owners
            .iter()
            .map(|b| (b.as_ptr() as usize, b.as_ptr() as usize + b.len()))
            .collect();
        ranges.sort_unstable();
        // Owners may overlap (a chunk and a slice of it): any holding the slice will do.
        let owner = |e: &Entry| {
            let i = ranges.partition_point(|&(start, _)| start <= e.address);
            ranges[..i]
                .iter()
                .rev()
                .copied()
                .find(|&(_, end)| e.end() <= end)
        };
        // Runs of slices lie in one owner: its range is tried first.
        let mut last: Option<(usize, usize)> = None;
        entries.retain(|e| {
            if last.is_some_and(|(start, end)| e.address >= start && e.end() <= end) {
                return true;
            }
            last = owner(e);
            last.is_some()
        });
        // Stable: recorded in runs of ascending addresses (a chunk's nodes), merged as such.
        entries.sort_by_key(|e| e.address);
        CheckedSlices {
            owners,
            types,
            entries,
        }
    }

    /// How many slices are vouched for.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The index [`CheckedSlices::is_canonical`] takes for the message type named `name`, if
    /// any slice of that type was recorded.
    pub(crate) fn type_index(&self, name: &str) -> Option<u16> {
        self.types
            .iter()
            .position(|t| t == name)
            .and_then(|i| u16::try_from(i).ok())
    }

    /// Whether `bytes`, a message of the type numbered `type_index` met at nesting `depth`, was
    /// found canonical at that nesting or a deeper one. `hint` is where the last lookup ended
    /// (the caller's to keep, one per thread): the search starts there.
    pub(crate) fn is_canonical(
        &self,
        bytes: &[u8],
        type_index: u16,
        depth: usize,
        hint: &mut usize,
    ) -> bool {
        let address = bytes.as_ptr() as usize;
        let entries = &self.entries;
        let at_address = |i: usize| entries.get(i).is_some_and(|e| e.address == address);
        let near = [hint.wrapping_add(1), hint.wrapping_sub(1), *hint];
        let Some(found) = near.into_iter().find(|&i| at_address(i)).or_else(|| {
            let i = entries.partition_point(|e| e.address < address);
            at_address(i).then_some(i)
        }) else {
            return false;
        };
        *hint = found;
        let fits = |e: &Entry| {
            e.len as usize == bytes.len()
                && e.type_index == type_index
                && depth <= usize::from(e.deepest)
        };
        // The same bytes may have been checked as more than one type: every entry there counts.
        let before = entries[..found].iter().rev();
        let from = entries[found..].iter();
        from.take_while(|e| e.address == address).any(fits)
            || before.take_while(|e| e.address == address).any(fits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(list: &[(usize, usize, usize, usize)]) -> Vec<Entry> {
        list.iter()
            .map(|&(a, l, t, d)| Entry::new(a, l, t, d).unwrap())
            .collect()
    }

    fn types() -> Vec<String> {
        vec!["tensorflow.NodeDef".into(), "tensorflow.FunctionDef".into()]
    }

    #[test]
    fn a_slice_is_vouched_for_only_as_recorded() {
        let chunk = Bytes::from(vec![7u8; 100]);
        let at = chunk.as_ptr() as usize;
        let recorded = Recorded {
            entries: entries(&[
                (at + 10, 20, 0, 3),
                (at + 40, 20, 1, 5),
                (at + 40, 20, 0, 2),
            ]),
            types: types(),
        };
        let checked = CheckedSlices::new(recorded, vec![chunk.clone()]);
        let node = chunk.slice(10..30);
        let hint = &mut 0;
        assert!(checked.is_canonical(&node, 0, 3, hint));
        assert!(checked.is_canonical(&node, 0, 1, hint), "shallower is fine");
        assert!(
            !checked.is_canonical(&node, 0, 4, hint),
            "deeper was not checked"
        );
        assert!(!checked.is_canonical(&node, 1, 3, hint), "another type");
        assert!(
            !checked.is_canonical(&chunk.slice(10..29), 0, 3, hint),
            "shorter"
        );
        assert!(
            !checked.is_canonical(&chunk.slice(11..30), 0, 3, hint),
            "elsewhere"
        );
        // Checked as two types at one address: each answers for its own.
        let both = chunk.slice(40..60);
        for start in [0, 1, 2, 99] {
            *hint = start;
            assert!(checked.is_canonical(&both, 1, 5, hint));
            *hint = start;
            assert!(checked.is_canonical(&both, 0, 2, hint));
            *hint = start;
            assert!(!checked.is_canonical(&both, 0, 3, hint));
        }
        assert_eq!(checked.type_index("tensorflow.FunctionDef"), Some(1));
        assert_eq!(checked.type_index("tensorflow.GraphDef"), None);
    }

    #[test]
    fn slices_outside_every_kept_buffer_are_dropped() {
        let chunk = Bytes::from(vec![1u8; 64]);
        let other = [2u8; 64];
        let at = chunk.as_ptr() as usize;
        let elsewhere = other.as_ptr() as usize;
        let recorded = Recorded {
            entries: entries(&[(at, 64, 0, 1), (at + 60, 8, 0, 1), (elsewhere, 10, 0, 1)]),
            types: types(),
        };
        let checked = CheckedSlices::new(recorded, vec![chunk.clone()]);
        assert_eq!(checked.len(), 1);
        assert!(checked.is_canonical(&chunk, 0, 1, &mut 0));
        assert!(!checked.is_canonical(&other[..10], 0, 1, &mut 0));
    }
}

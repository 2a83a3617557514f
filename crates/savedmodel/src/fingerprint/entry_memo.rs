//! Map entries the canonical check has already accepted, remembered by their bytes.
//!
//! A graph of millions of nodes repeats a few attribute entries (`T: DT_FLOAT`, the same
//! `_output_shapes`) on every node, and checking one is a descent of four or five nested
//! messages for a few dozen bytes (issue 15: the whole-model check was the largest part of a
//! split). Whether an entry is canonical and valid depends only on its bytes, the map field it
//! belongs to, the nesting it is met at and whether the check validates, so an entry equal to
//! one accepted before, under the same three, is accepted again after one comparison.
//!
//! A few slots, replaced in turn: nodes alternate between a handful of entries, and a miss
//! costs only a length comparison per slot.

/// Entries longer than this are not remembered: they are rarely repeated, and comparing them
/// would cost about as much as checking them.
const MAX_LEN: usize = 96;

/// How many entries are remembered at once.
const SLOTS: usize = 8;

/// Where and how an entry was checked: its map field (the layout of the message holding the
/// map and the field's index in it), the nesting of that message, and whether the check
/// validated (see [`super::canonical::Encoder::is_canonical_and_valid`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct EntryContext {
    pub layout: usize,
    pub field: usize,
    pub depth: usize,
    pub validate: bool,
}

/// One accepted entry.
struct Slot {
    context: EntryContext,
    /// The deepest nesting its check met (the encoder's `deepest`, replayed on a hit).
    deepest: usize,
    len: usize,
    bytes: [u8; MAX_LEN],
}

/// The entries accepted most recently (see the module documentation).
#[derive(Default)]
pub(super) struct EntryMemo {
    slots: Vec<Slot>,
    /// The slot the next new entry replaces, once all are taken.
    next: usize,
}

impl EntryMemo {
    /// The deepest nesting met by the check of an accepted entry equal to `entry` in
    /// `context`, if one is remembered.
    #[inline]
    pub fn find(&self, context: EntryContext, entry: &[u8]) -> Option<usize> {
        if entry.len() > MAX_LEN {
            return None;
        }
        self.slots
            .iter()
            .find(|s| s.len == entry.len() && s.context == context && s.bytes[..s.len] == *entry)
            .map(|s| s.deepest)
    }

    /// Remembers `entry`, accepted in `context` by a check that met nesting `deepest`.
    pub fn remember(&mut self, context: EntryContext, entry: &[u8], deepest: usize) {
        if entry.len() > MAX_LEN {
            return;
        }
        let mut bytes = [0; MAX_LEN];
        bytes[..entry.len()].copy_from_slice(entry);
        let slot = Slot {
            context,
            deepest,
            len: entry.len(),
            bytes,
        };
        if self.slots.len() < SLOTS {
            self.slots.push(slot);
        } else {
            self.slots[self.next] = slot;
            self.next = (self.next + 1) % SLOTS;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HERE: EntryContext = EntryContext {
        layout: 3,
        field: 1,
        depth: 4,
        validate: true,
    };

    #[test]
    fn an_entry_is_found_only_with_its_bytes_and_context() {
        let mut memo = EntryMemo::default();
        memo.remember(HERE, b"\x0a\x01T\x12\x02\x30\x01", 6);
        assert_eq!(memo.find(HERE, b"\x0a\x01T\x12\x02\x30\x01"), Some(6));
        // One byte different, one byte shorter.
        assert_eq!(memo.find(HERE, b"\x0a\x01T\x12\x02\x30\x02"), None);
        assert_eq!(memo.find(HERE, b"\x0a\x01T\x12\x02\x30"), None);
        for other in [
            EntryContext { layout: 4, ..HERE },
            EntryContext { field: 2, ..HERE },
            EntryContext { depth: 5, ..HERE },
            EntryContext {
                validate: false,
                ..HERE
            },
        ] {
            assert_eq!(memo.find(other, b"\x0a\x01T\x12\x02\x30\x01"), None);
        }
    }

    #[test]
    fn long_entries_are_not_remembered_and_old_ones_make_room() {
        let mut memo = EntryMemo::default();
        let long = [7u8; MAX_LEN + 1];
        memo.remember(HERE, &long, 1);
        assert_eq!(memo.find(HERE, &long), None);
        for i in 0..=SLOTS as u8 {
            memo.remember(HERE, &[i], usize::from(i));
        }
        // The first of SLOTS + 1 entries gave its slot to the last.
        assert_eq!(memo.find(HERE, &[0]), None);
        assert_eq!(memo.find(HERE, &[1]), Some(1));
        assert_eq!(memo.find(HERE, &[SLOTS as u8]), Some(SLOTS));
    }
}

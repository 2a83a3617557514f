//! Attribute entries `show` has already scanned and found to name no function, remembered by
//! their bytes.
//!
//! The nodes of a library's functions are scanned down to their attributes' values, looking
//! for the functions they name, and a model of millions of such nodes repeats a few entries
//! (`T`, the same `_output_shapes`) on every node (issue 15: this scan was half of `show`, and
//! a quarter of the checks a split makes). What an entry names depends only on its bytes, so
//! an entry equal to one that named nothing names nothing again, and is skipped after one
//! comparison.

/// Entries longer than this are not remembered.
const MAX_LEN: usize = 128;

/// How many entries are remembered at once.
const SLOTS: usize = 8;

/// The entries found naming no function most recently (a few, replaced in turn).
#[derive(Default)]
pub(super) struct PlainEntries {
    slots: Vec<([u8; MAX_LEN], usize)>,
    /// The slot the next entry replaces, once all are taken.
    next: usize,
}

impl PlainEntries {
    /// Whether `entry` equals an entry remembered.
    #[inline]
    pub fn contains(&self, entry: &[u8]) -> bool {
        entry.len() <= MAX_LEN
            && self
                .slots
                .iter()
                .any(|(bytes, len)| *len == entry.len() && bytes[..*len] == *entry)
    }

    /// Remembers `entry`, found naming no function.
    pub fn remember(&mut self, entry: &[u8]) {
        if entry.len() > MAX_LEN {
            return;
        }
        let mut bytes = [0; MAX_LEN];
        bytes[..entry.len()].copy_from_slice(entry);
        if self.slots.len() < SLOTS {
            self.slots.push((bytes, entry.len()));
        } else {
            self.slots[self.next] = (bytes, entry.len());
            self.next = (self.next + 1) % SLOTS;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_equal_entries_are_found_and_the_oldest_makes_room() {
        let mut plain = PlainEntries::default();
        plain.remember(b"\x0a\x01T\x12\x02\x30\x01");
        assert!(plain.contains(b"\x0a\x01T\x12\x02\x30\x01"));
        assert!(!plain.contains(b"\x0a\x01T\x12\x02\x30\x02"));
        assert!(!plain.contains(b"\x0a\x01T\x12\x02\x30"));
        let long = [1u8; MAX_LEN + 1];
        plain.remember(&long);
        assert!(!plain.contains(&long));
        for i in 0..SLOTS as u8 {
            plain.remember(&[i]);
        }
        assert!(!plain.contains(b"\x0a\x01T\x12\x02\x30\x01"), "replaced");
        assert!(plain.contains(&[0]) && plain.contains(&[SLOTS as u8 - 1]));
    }
}

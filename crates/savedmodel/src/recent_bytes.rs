//! A few short byte strings met lately, each under a key and with a value: what the passes
//! over a graph of millions of nodes use to skip work on bytes they have just handled.
//!
//! Such graphs repeat a few small messages (the `T` and `_output_shapes` attribute entries) on
//! every node. A pass whose answer for a string depends only on its bytes (and on the key it
//! stores with them) looks it up here first: a hit costs a length comparison per slot and one
//! comparison of bytes, where a miss only the length comparisons (issue 15).

/// How many strings are remembered at once; the oldest makes room for a new one.
const SLOTS: usize = 8;

/// Up to [`SLOTS`] byte strings of at most `MAX_LEN` bytes, each with key `K` and value `V`.
pub(crate) struct RecentBytes<K, V, const MAX_LEN: usize> {
    slots: Vec<Slot<K, V, MAX_LEN>>,
    /// The slot the next string replaces, once all are taken.
    next: usize,
}

/// One string remembered.
struct Slot<K, V, const MAX_LEN: usize> {
    key: K,
    value: V,
    len: usize,
    bytes: [u8; MAX_LEN],
}

impl<K, V, const MAX_LEN: usize> Default for RecentBytes<K, V, MAX_LEN> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            next: 0,
        }
    }
}

impl<K: Copy + Eq, V: Copy, const MAX_LEN: usize> RecentBytes<K, V, MAX_LEN> {
    /// The value remembered with `bytes` under `key`, if any.
    #[inline]
    pub fn find(&self, key: K, bytes: &[u8]) -> Option<V> {
        if bytes.len() > MAX_LEN {
            return None;
        }
        self.slots
            .iter()
            .find(|s| s.len == bytes.len() && s.key == key && s.bytes[..s.len] == *bytes)
            .map(|s| s.value)
    }

    /// Remembers `bytes` under `key` with `value`; strings longer than `MAX_LEN` are not
    /// remembered (rarely repeated, and comparing them would cost about as much as the work
    /// they save).
    pub fn remember(&mut self, key: K, bytes: &[u8], value: V) {
        if bytes.len() > MAX_LEN {
            return;
        }
        let mut copy = [0; MAX_LEN];
        copy[..bytes.len()].copy_from_slice(bytes);
        let slot = Slot {
            key,
            value,
            len: bytes.len(),
            bytes: copy,
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

    const ENTRY: &[u8] = b"\x0a\x01T\x12\x02\x30\x01";

    #[test]
    fn a_string_is_found_only_with_its_bytes_and_key() {
        let mut recent = RecentBytes::<u8, usize, 16>::default();
        recent.remember(1, ENTRY, 6);
        assert_eq!(recent.find(1, ENTRY), Some(6));
        assert_eq!(recent.find(2, ENTRY), None, "another key");
        assert_eq!(
            recent.find(1, b"\x0a\x01T\x12\x02\x30\x02"),
            None,
            "one byte differs"
        );
        assert_eq!(recent.find(1, &ENTRY[..6]), None, "one byte shorter");
    }

    #[test]
    fn long_strings_are_not_remembered_and_the_oldest_makes_room() {
        let mut recent = RecentBytes::<(), usize, 16>::default();
        let long = [7u8; 17];
        recent.remember((), &long, 1);
        assert_eq!(recent.find((), &long), None);
        for i in 0..=SLOTS as u8 {
            recent.remember((), &[i], usize::from(i));
        }
        assert_eq!(
            recent.find((), &[0]),
            None,
            "the first of SLOTS + 1 gave its slot"
        );
        assert_eq!(recent.find((), &[1]), Some(1));
        assert_eq!(recent.find((), &[SLOTS as u8]), Some(SLOTS));
    }
}

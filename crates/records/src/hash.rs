//! HighwayHash-64 with the Riegeli key, used for block headers, chunk headers
//! and chunk data.
//!
//! The key spells `'Riegeli/', 'records\n'` twice (little-endian words). The
//! `highway` crate picks AVX2 or SSE4.1 at run time, which matters because
//! every byte of chunk data is hashed once when read.

use highway::{HighwayHash, HighwayHasher, Key};

/// The fixed key of the Riegeli/records format.
const KEY: [u64; 4] = [
    0x2f69_6c65_6765_6952,
    0x0a73_6472_6f63_6572,
    0x2f69_6c65_6765_6952,
    0x0a73_6472_6f63_6572,
];

/// Hashes one contiguous byte string.
pub(crate) fn hash(data: &[u8]) -> u64 {
    HighwayHasher::new(Key(KEY)).hash64(data)
}

/// Whether a computed hash matches the stored one.
///
/// In fuzzing builds (`--cfg fuzzing`, set by cargo-fuzz) every hash
/// "matches", so that mutated inputs reach the chunk decoders instead of all
/// stopping at the first hash check. Normal builds compare.
pub(crate) fn matches(computed: u64, stored: u64) -> bool {
    cfg!(fuzzing) || computed == stored
}

/// Incremental hashing of data that arrives in pieces (chunk data split by
/// block headers); gives the same result as [`hash`] over the concatenation.
pub(crate) struct Hasher(HighwayHasher);

impl Hasher {
    /// Starts an empty hash.
    pub(crate) fn new() -> Self {
        Hasher(HighwayHasher::new(Key(KEY)))
    }

    /// Appends the next piece.
    pub(crate) fn update(&mut self, piece: &[u8]) {
        self.0.append(piece);
    }

    /// Returns the 64-bit hash of everything appended.
    pub(crate) fn finish(self) -> u64 {
        self.0.finalize64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incremental_equals_one_shot() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let mut h = Hasher::new();
        for piece in data.chunks(65_512) {
            h.update(piece);
        }
        assert_eq!(h.finish(), hash(&data));
        let mut h = Hasher::new();
        for piece in data.chunks(1) {
            h.update(piece);
        }
        assert_eq!(h.finish(), hash(&data));
    }

    #[test]
    fn empty_data_hash_matches_signature() {
        // The signature chunk has empty data; its data_hash is at bytes 40..48
        // of every Riegeli file: e1 9f 13 c0 e9 b1 c3 72.
        assert_eq!(
            hash(&[]),
            u64::from_le_bytes([0xe1, 0x9f, 0x13, 0xc0, 0xe9, 0xb1, 0xc3, 0x72])
        );
    }
}

//! Writing a table exactly as TensorFlow's `TableBuilder` does (uncompressed), so the bytes
//! equal TensorFlow's for the same entries.

use super::{encode_footer, BlockBuilder, BlockHandle, NO_COMPRESSION};
use crate::crc;

/// Builds a table in memory; keys must be added in strictly increasing order.
#[derive(Debug)]
pub struct TableBuilder {
    block_size: usize,
    out: Vec<u8>,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    last_key: Vec<u8>,
    num_entries: u64,
    pending_handle: Option<BlockHandle>,
    restart_interval: usize,
}

impl TableBuilder {
    /// A builder with TensorFlow's settings for bundle indexes (block size 262144, restart
    /// interval 16).
    pub fn new() -> Self {
        Self::with_options(super::DEFAULT_BLOCK_SIZE, super::DEFAULT_RESTART_INTERVAL)
    }

    /// A builder with the given block size and data-block restart interval (tests use small
    /// values to exercise many blocks).
    pub fn with_options(block_size: usize, restart_interval: usize) -> Self {
        Self {
            block_size: block_size.max(1),
            out: Vec::new(),
            data_block: BlockBuilder::new(restart_interval),
            index_block: BlockBuilder::new(1),
            last_key: Vec::new(),
            num_entries: 0,
            pending_handle: None,
            restart_interval,
        }
    }

    /// Adds an entry. Returns `false` (and adds nothing) when `key` is not above the last key.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> bool {
        if self.num_entries > 0 {
            if key <= self.last_key.as_slice() {
                return false;
            }
            // TensorFlow's rule: an entry of at least twice the block size starts a new block.
            if key.len() + value.len() >= 2 * self.block_size {
                self.flush();
            }
        }
        if let Some(handle) = self.pending_handle.take() {
            shortest_separator(&mut self.last_key, key);
            let mut enc = Vec::new();
            handle.encode_to(&mut enc);
            self.index_block.add(&self.last_key, &enc);
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.num_entries += 1;
        self.data_block.add(key, value);
        if self.data_block.size_estimate() >= self.block_size {
            self.flush();
        }
        true
    }

    fn flush(&mut self) {
        if self.data_block.is_empty() {
            return;
        }
        let contents = self.data_block.finish();
        self.pending_handle = Some(self.write_block(&contents));
    }

    fn write_block(&mut self, contents: &[u8]) -> BlockHandle {
        let handle = BlockHandle {
            offset: self.out.len() as u64,
            size: contents.len() as u64,
        };
        self.out.extend_from_slice(contents);
        let crc = crc::extend(crc::crc32c(contents), &[NO_COMPRESSION]);
        self.out.push(NO_COMPRESSION);
        self.out.extend_from_slice(&crc::mask(crc).to_le_bytes());
        handle
    }

    /// Writes the remaining data block, the metaindex and index blocks and the footer, and
    /// returns the table bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.flush();
        let metaindex = BlockBuilder::new(self.restart_interval).finish();
        let metaindex_handle = self.write_block(&metaindex);
        if let Some(handle) = self.pending_handle.take() {
            short_successor(&mut self.last_key);
            let mut enc = Vec::new();
            handle.encode_to(&mut enc);
            self.index_block.add(&self.last_key, &enc);
        }
        let index = self.index_block.finish();
        let index_handle = self.write_block(&index);
        self.out
            .extend_from_slice(&encode_footer(metaindex_handle, index_handle));
        self.out
    }
}

impl Default for TableBuilder {
    fn default() -> Self {
        Self::new()
    }
}

/// LevelDB's `FindShortestSeparator`: shortens `start` to a key in `[start, limit)`.
fn shortest_separator(start: &mut Vec<u8>, limit: &[u8]) {
    let diff = start.iter().zip(limit).take_while(|(a, b)| a == b).count();
    if diff >= start.len().min(limit.len()) {
        return;
    }
    let byte = start[diff];
    if byte < 0xff && byte + 1 < limit[diff] {
        start[diff] += 1;
        start.truncate(diff + 1);
    }
}

/// LevelDB's `FindShortSuccessor`: the shortest key at least `key`.
fn short_successor(key: &mut Vec<u8>) {
    if let Some(i) = key.iter().position(|&b| b != 0xff) {
        key[i] += 1;
        key.truncate(i + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_match_leveldb() {
        let mut s = b"the quick brown fox".to_vec();
        shortest_separator(&mut s, b"the who");
        assert_eq!(s, b"the r");
        let mut s = b"abc".to_vec();
        shortest_separator(&mut s, b"abcd");
        assert_eq!(s, b"abc");
        let mut s = b"abc".to_vec();
        shortest_separator(&mut s, b"abd");
        assert_eq!(s, b"abc");
        let mut s = b"dense/kernel".to_vec();
        short_successor(&mut s);
        assert_eq!(s, b"e");
        let mut s = vec![0xff, 0xff];
        short_successor(&mut s);
        assert_eq!(s, vec![0xff, 0xff]);
    }
}

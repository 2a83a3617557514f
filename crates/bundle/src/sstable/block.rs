//! One table block: building (prefix-compressed entries with restart points) and parsing.

use super::TableError;
use crate::coding::{get_fixed32, get_varint32, put_fixed32, put_varint32};

/// Builds a block as TensorFlow's `BlockBuilder` does.
#[derive(Debug)]
pub struct BlockBuilder {
    restart_interval: usize,
    buffer: Vec<u8>,
    restarts: Vec<u32>,
    counter: usize,
    last_key: Vec<u8>,
}

impl BlockBuilder {
    /// An empty block with a restart point every `restart_interval` entries (at least 1).
    pub fn new(restart_interval: usize) -> Self {
        Self {
            restart_interval: restart_interval.max(1),
            buffer: Vec::new(),
            restarts: vec![0],
            counter: 0,
            last_key: Vec::new(),
        }
    }

    /// Whether no entry was added since the last reset.
    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    /// The size of the block if finished now.
    pub fn size_estimate(&self) -> usize {
        self.buffer.len() + self.restarts.len() * 4 + 4
    }

    /// Adds an entry; keys must be added in increasing order.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        let mut shared = 0;
        if self.counter < self.restart_interval {
            shared = self
                .last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count();
        } else {
            self.restarts.push(self.buffer.len() as u32);
            self.counter = 0;
        }
        let non_shared = key.len() - shared;
        put_varint32(&mut self.buffer, shared as u32);
        put_varint32(&mut self.buffer, non_shared as u32);
        put_varint32(&mut self.buffer, value.len() as u32);
        self.buffer.extend_from_slice(&key[shared..]);
        self.buffer.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&key[shared..]);
        self.counter += 1;
    }

    /// Appends the restart array and returns the block contents; the builder is reset.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buffer);
        for r in &self.restarts {
            put_fixed32(&mut out, *r);
        }
        put_fixed32(&mut out, self.restarts.len() as u32);
        self.restarts = vec![0];
        self.counter = 0;
        self.last_key.clear();
        out
    }
}

/// One entry of a parsed block: the full key and the value's range within the block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockEntry {
    /// The key (prefix compression undone).
    pub key: Vec<u8>,
    /// Start of the value within the block contents.
    pub value_start: usize,
    /// End of the value within the block contents.
    pub value_end: usize,
}

/// Parses block contents (trailer already removed). `base` is the block's offset in the file,
/// for error positions. Checks every length against the block, that restart points lie on
/// entries that share no prefix, and that keys increase.
pub fn parse_block(block: &[u8], base: u64) -> Result<Vec<BlockEntry>, TableError> {
    let err = |at: usize, fault: String| TableError::new(base + at as u64, fault);
    if block.len() < 4 {
        return Err(err(
            0,
            format!("block of {} bytes has no restart count", block.len()),
        ));
    }
    let num_restarts = get_fixed32(block, block.len() - 4).unwrap_or(0) as usize;
    let max_restarts = (block.len() - 4) / 4;
    if num_restarts == 0 || num_restarts > max_restarts {
        return Err(err(
            block.len() - 4,
            format!(
                "bad restart count {num_restarts} for a block of {} bytes",
                block.len()
            ),
        ));
    }
    let restarts_start = block.len() - 4 - 4 * num_restarts;
    let data = &block[..restarts_start];
    let mut entries = Vec::new();
    let mut restart_points = Vec::new();
    let mut key: Vec<u8> = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let entry_start = pos;
        let header = (|| {
            let shared = get_varint32(data, &mut pos)? as usize;
            let non_shared = get_varint32(data, &mut pos)? as usize;
            let value_len = get_varint32(data, &mut pos)? as usize;
            Some((shared, non_shared, value_len))
        })();
        let Some((shared, non_shared, value_len)) = header else {
            return Err(err(entry_start, "malformed entry header".into()));
        };
        if shared > key.len() {
            return Err(err(
                entry_start,
                format!(
                    "entry shares {shared} key bytes but the previous key has {}",
                    key.len()
                ),
            ));
        }
        let key_end = pos.checked_add(non_shared).filter(|&e| e <= data.len());
        let value_end = key_end
            .and_then(|k| k.checked_add(value_len))
            .filter(|&e| e <= data.len());
        let (Some(key_end), Some(value_end)) = (key_end, value_end) else {
            return Err(err(
                entry_start,
                format!(
                    "entry of {non_shared} key and {value_len} value bytes runs past the block's {} entry bytes",
                    data.len()
                ),
            ));
        };
        let previous = (!entries.is_empty()).then(|| key.clone());
        key.truncate(shared);
        key.extend_from_slice(&data[pos..key_end]);
        if let Some(prev) = previous {
            if key <= prev {
                return Err(err(entry_start, "keys out of order within a block".into()));
            }
        }
        if shared == 0 {
            restart_points.push(entry_start as u32);
        }
        entries.push(BlockEntry {
            key: key.clone(),
            value_start: key_end,
            value_end,
        });
        pos = value_end;
    }
    for i in 0..num_restarts {
        let at = restarts_start + 4 * i;
        let r = get_fixed32(block, at).unwrap_or(u32::MAX);
        let on_entry = if data.is_empty() {
            r == 0
        } else {
            restart_points.binary_search(&r).is_ok()
        };
        if !on_entry {
            return Err(err(
                at,
                format!("restart point {r} is not the start of an unshared entry"),
            ));
        }
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(interval: usize, keys: &[&str]) -> Vec<u8> {
        let mut b = BlockBuilder::new(interval);
        for k in keys {
            b.add(k.as_bytes(), format!("v-{k}").as_bytes());
        }
        b.finish()
    }

    #[test]
    fn round_trip_with_restart_points() {
        let keys: Vec<String> = (0..40).map(|i| format!("layer/{i:03}/kernel")).collect();
        let refs: Vec<&str> = keys.iter().map(|s| s.as_str()).collect();
        for interval in [1, 2, 16] {
            let block = build(interval, &refs);
            let n = get_fixed32(&block, block.len() - 4).unwrap() as usize;
            assert_eq!(n, keys.len().div_ceil(interval), "interval {interval}");
            let entries = parse_block(&block, 0).unwrap();
            assert_eq!(entries.len(), keys.len());
            for (e, k) in entries.iter().zip(&keys) {
                assert_eq!(e.key, k.as_bytes());
                assert_eq!(
                    &block[e.value_start..e.value_end],
                    format!("v-{k}").as_bytes()
                );
            }
        }
        // Prefix compression really happens between restarts.
        assert!(build(16, &refs).len() < build(1, &refs).len());
    }

    #[test]
    fn empty_block() {
        let block = BlockBuilder::new(16).finish();
        assert_eq!(block, vec![0, 0, 0, 0, 1, 0, 0, 0]);
        assert!(parse_block(&block, 0).unwrap().is_empty());
    }

    #[test]
    fn corruption_is_reported_not_panicked() {
        let block = build(4, &["a", "ab", "abc", "b", "bcd", "c"]);
        // Every truncation and every single-byte change either parses or errors cleanly.
        for cut in 0..block.len() {
            let _ = parse_block(&block[..cut], 0);
        }
        for i in 0..block.len() {
            for v in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut b = block.clone();
                b[i] = v;
                let _ = parse_block(&b, 0);
            }
        }
        // A restart point off an entry boundary is caught.
        let mut b = block.clone();
        let at = b.len() - 8;
        b[at] = 1;
        let e = parse_block(&b, 100).unwrap_err();
        assert!(e.fault.contains("restart point"), "{e}");
        assert_eq!(e.offset, 100 + at as u64);
        // A restart count larger than the block.
        let mut b = block.clone();
        let at = b.len() - 4;
        b[at] = 200;
        assert!(parse_block(&b, 0)
            .unwrap_err()
            .fault
            .contains("restart count"));
    }
}

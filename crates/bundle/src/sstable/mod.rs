//! The LevelDB-style sorted string table TensorFlow uses for a bundle's `.index` file
//! (`tensorflow/core/lib/io/table_builder.cc`, `block_builder.cc`, `format.cc`), without
//! compression, as TensorFlow writes it.
//!
//! Layout: data blocks, an (empty) metaindex block, the index block, a 48-byte footer. Every
//! block is followed by a 5-byte trailer: a compression type byte (0: none) and the masked
//! CRC32C of the block contents plus that type byte. A block holds prefix-compressed entries
//! (`shared`, `non_shared`, `value_len` varints, the key suffix, the value), then the restart
//! offsets (fixed32 each) and their count. The index block maps a separator key (at least the
//! block's last key, below the next block's first) to the block's handle (offset and size
//! varints). The footer holds the metaindex and index handles, zero padding to 40 bytes and the
//! magic number as two little-endian words.

mod block;
mod reader;
mod writer;

pub use block::{parse_block, BlockBuilder, BlockEntry};
pub use reader::{read_table, TableEntry};
pub use writer::TableBuilder;

use super::coding::{get_varint64, put_varint64};

/// Size of a block's trailer: type byte plus masked CRC32C.
pub const BLOCK_TRAILER_SIZE: usize = 5;
/// Size of the footer.
pub const FOOTER_SIZE: usize = 48;
/// The footer's magic number.
pub const TABLE_MAGIC: u64 = 0xdb47_7524_8b80_fb57;
/// TensorFlow's block size for bundle indexes.
pub const DEFAULT_BLOCK_SIZE: usize = 262_144;
/// TensorFlow's restart interval for data blocks (the index block uses 1).
pub const DEFAULT_RESTART_INTERVAL: usize = 16;
/// Compression type byte of an uncompressed block.
pub const NO_COMPRESSION: u8 = 0;

/// A fault in table bytes, at an offset in the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at byte {offset}: {fault}")]
pub struct TableError {
    /// Byte offset in the file where the fault was found.
    pub offset: u64,
    /// What was wrong.
    pub fault: String,
}

impl TableError {
    pub(crate) fn new(offset: u64, fault: impl Into<String>) -> Self {
        Self {
            offset,
            fault: fault.into(),
        }
    }
}

/// Where a block lies in the file: offset and size of its contents (trailer excluded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockHandle {
    /// Offset of the block contents.
    pub offset: u64,
    /// Size of the block contents.
    pub size: u64,
}

impl BlockHandle {
    /// Appends the handle as two varints.
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        put_varint64(out, self.offset);
        put_varint64(out, self.size);
    }

    /// Decodes a handle at `data[*pos..]`.
    pub fn decode(data: &[u8], pos: &mut usize) -> Option<Self> {
        let offset = get_varint64(data, pos)?;
        let size = get_varint64(data, pos)?;
        Some(Self { offset, size })
    }
}

/// Encodes the footer.
pub fn encode_footer(metaindex: BlockHandle, index: BlockHandle) -> Vec<u8> {
    let mut out = Vec::with_capacity(FOOTER_SIZE);
    metaindex.encode_to(&mut out);
    index.encode_to(&mut out);
    out.resize(FOOTER_SIZE - 8, 0);
    out.extend_from_slice(&(TABLE_MAGIC as u32).to_le_bytes());
    out.extend_from_slice(&((TABLE_MAGIC >> 32) as u32).to_le_bytes());
    out
}

/// Decodes the footer (the last 48 bytes of `file`): the metaindex and index handles.
pub fn decode_footer(file: &[u8]) -> Result<(BlockHandle, BlockHandle), TableError> {
    if file.len() < FOOTER_SIZE {
        return Err(TableError::new(
            0,
            format!(
                "file is {} bytes, shorter than the {FOOTER_SIZE}-byte table footer (truncated?)",
                file.len()
            ),
        ));
    }
    let start = file.len() - FOOTER_SIZE;
    let footer = &file[start..];
    let magic = u64::from(u32::from_le_bytes([
        footer[40], footer[41], footer[42], footer[43],
    ])) | u64::from(u32::from_le_bytes([
        footer[44], footer[45], footer[46], footer[47],
    ])) << 32;
    if magic != TABLE_MAGIC {
        return Err(TableError::new(
            start as u64 + 40,
            format!("bad table magic number {magic:#018x} (expected {TABLE_MAGIC:#018x}; truncated or not a tensor bundle index?)"),
        ));
    }
    let mut pos = 0;
    let handles = &footer[..40];
    let meta = BlockHandle::decode(handles, &mut pos);
    let index = BlockHandle::decode(handles, &mut pos);
    match (meta, index) {
        (Some(m), Some(i)) => Ok((m, i)),
        _ => Err(TableError::new(
            start as u64,
            "malformed block handles in the footer",
        )),
    }
}

/// The offset of the first non-zero byte in the footer's padding (between the two block
/// handles and the magic number), which the reader ignores and the writer zeroes; `None` when
/// it is all zeros or the footer does not decode.
pub fn footer_padding_fault(file: &[u8]) -> Option<u64> {
    let start = file.len().checked_sub(FOOTER_SIZE)?;
    let handles = &file[start..start + 40];
    let mut pos = 0;
    BlockHandle::decode(handles, &mut pos)?;
    BlockHandle::decode(handles, &mut pos)?;
    let at = handles[pos..].iter().position(|&b| b != 0)?;
    Some((start + pos + at) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn entries(n: usize, value_len: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..n)
            .map(|i| {
                let key = format!("model/layer_{:04}/kernel/.ATTRIBUTES/VARIABLE_VALUE", i * 7);
                (key.into_bytes(), vec![(i % 251) as u8; value_len + i % 5])
            })
            .collect()
    }

    fn build(rows: &[(Vec<u8>, Vec<u8>)], block_size: usize, interval: usize) -> Bytes {
        let mut t = TableBuilder::with_options(block_size, interval);
        for (k, v) in rows {
            assert!(t.add(k, v));
        }
        Bytes::from(t.finish())
    }

    fn check_round_trip(rows: &[(Vec<u8>, Vec<u8>)], table: &Bytes) {
        let back = read_table(table).unwrap();
        assert_eq!(back.len(), rows.len());
        for (e, (k, v)) in back.iter().zip(rows) {
            assert_eq!(&e.key, k);
            assert_eq!(&e.value[..], &v[..]);
        }
    }

    #[test]
    fn round_trip_one_and_many_blocks() {
        let rows = entries(500, 20);
        for (block_size, interval) in [(DEFAULT_BLOCK_SIZE, 16), (256, 16), (64, 1), (1, 3)] {
            let table = build(&rows, block_size, interval);
            check_round_trip(&rows, &table);
        }
        // Small blocks mean more index entries, hence a bigger file.
        assert!(build(&rows, 256, 16).len() > build(&rows, DEFAULT_BLOCK_SIZE, 16).len());
        check_round_trip(&[], &build(&[], 4096, 16));
    }

    #[test]
    fn random_binary_keys_round_trip() {
        // Keys with shared prefixes, zero and 0xff bytes, empty values; random block sizes
        // and restart intervals.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..40 {
            let alphabet = [0x00u8, 0x01, b'a', b'b', 0xfe, 0xff];
            let mut keys = std::collections::BTreeSet::new();
            for _ in 0..(next() % 300) {
                let len = (next() % 12) as usize;
                keys.insert(
                    (0..len)
                        .map(|_| alphabet[(next() % 6) as usize])
                        .collect::<Vec<u8>>(),
                );
            }
            let rows: Vec<(Vec<u8>, Vec<u8>)> = keys
                .into_iter()
                .map(|k| {
                    let v = vec![k.len() as u8; (next() % 40) as usize];
                    (k, v)
                })
                .collect();
            let block_size = 1 + (next() % 700) as usize;
            let interval = 1 + (next() % 20) as usize;
            let table = build(&rows, block_size, interval);
            check_round_trip(&rows, &table);
            assert!(round < 40);
        }
    }

    #[test]
    fn oversized_entry_starts_its_own_block() {
        // An entry of at least 2 * block_size flushes the block before it.
        let block_size = 1000;
        let rows = vec![
            (b"a".to_vec(), vec![1; 10]),
            (b"b".to_vec(), vec![2; 2 * block_size]),
            (b"c".to_vec(), vec![3; 10]),
        ];
        let table = build(&rows, block_size, 16);
        check_round_trip(&rows, &table);
        let (_, index) = decode_footer(&table).unwrap();
        let block = &table[index.offset as usize..(index.offset + index.size) as usize];
        // Three data blocks: [a], [b] (flushed since it reached the block size), [c].
        assert_eq!(parse_block(block, 0).unwrap().len(), 3);
    }

    #[test]
    fn rejects_out_of_order_keys() {
        let mut t = TableBuilder::new();
        assert!(t.add(b"b", b""));
        assert!(!t.add(b"a", b""));
        assert!(!t.add(b"b", b""));
    }

    #[test]
    fn corruption_and_truncation_are_errors() {
        let rows = entries(60, 30);
        let table = build(&rows, 512, 4);
        for cut in 0..table.len() {
            assert!(read_table(&table.slice(..cut)).is_err(), "cut at {cut}");
        }
        // Every flipped byte is caught, except in the footer's zero padding (which LevelDB
        // and TensorFlow ignore too).
        let (meta, index) = decode_footer(&table).unwrap();
        let mut enc = Vec::new();
        meta.encode_to(&mut enc);
        index.encode_to(&mut enc);
        let handles_end = table.len() - FOOTER_SIZE + enc.len();
        let mut detected = 0;
        for i in 0..table.len() {
            let in_padding = i >= handles_end && i < table.len() - 8;
            let mut t = table.to_vec();
            t[i] ^= 0x40;
            match read_table(&Bytes::from(t)) {
                Err(_) => detected += 1,
                Ok(_) => assert!(in_padding, "flip at {i} of {} went unnoticed", table.len()),
            }
        }
        assert!(detected > 0);
        // A flipped byte inside a block is a checksum error naming its position.
        let mut t = table.to_vec();
        t[10] ^= 1;
        let e = read_table(&Bytes::from(t)).unwrap_err();
        assert!(e.fault.contains("checksum"), "{e}");
        // Bad magic.
        let mut t = table.to_vec();
        let n = t.len();
        t[n - 1] ^= 1;
        assert!(read_table(&Bytes::from(t))
            .unwrap_err()
            .fault
            .contains("magic"));
    }
}

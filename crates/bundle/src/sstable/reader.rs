//! Reading a whole table: footer, index block, every data block, each checksum verified.

use bytes::Bytes;

use super::{decode_footer, parse_block, BlockHandle, TableError, BLOCK_TRAILER_SIZE};
use super::{FOOTER_SIZE, NO_COMPRESSION};
use crate::coding::get_fixed32;
use crate::crc;

/// One key/value pair of a table; the value is a slice of the file's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableEntry {
    /// The key.
    pub key: Vec<u8>,
    /// The value (zero-copy slice of the file).
    pub value: Bytes,
}

/// Reads every entry of the table in `file`, in key order. Checks the footer magic, every
/// block's bounds, compression type and masked CRC32C, every entry's lengths, that keys
/// increase across blocks, and that each index key is at least its block's last key (so
/// that seeking readers such as TensorFlow's find every entry).
pub fn read_table(file: &Bytes) -> Result<Vec<TableEntry>, TableError> {
    let (metaindex, index) = decode_footer(file)?;
    let blocks_end = (file.len() - FOOTER_SIZE) as u64;
    read_block(file, metaindex, blocks_end, "metaindex")?;
    let index_block = read_block(file, index, blocks_end, "index")?;
    let index_entries = parse_block(index_block, index.offset)?;
    let mut out: Vec<TableEntry> = Vec::new();
    for ie in &index_entries {
        let value = &index_block[ie.value_start..ie.value_end];
        let mut pos = 0;
        let handle = BlockHandle::decode(value, &mut pos).ok_or_else(|| {
            TableError::new(
                index.offset + ie.value_start as u64,
                "malformed block handle in the index block",
            )
        })?;
        let block = read_block(file, handle, blocks_end, "data")?;
        let entries = parse_block(block, handle.offset)?;
        if let (Some(prev), Some(first)) = (out.last(), entries.first()) {
            if first.key <= prev.key {
                return Err(TableError::new(
                    handle.offset,
                    "data block's first key does not follow the previous block's last key",
                ));
            }
        }
        if let Some(last) = entries.last() {
            if last.key > ie.key {
                return Err(TableError::new(
                    index.offset + ie.value_start as u64,
                    "index key is below its block's last key",
                ));
            }
        }
        let base = handle.offset as usize;
        out.extend(entries.into_iter().map(|e| TableEntry {
            key: e.key,
            value: file.slice(base + e.value_start..base + e.value_end),
        }));
    }
    Ok(out)
}

/// The contents of the block at `handle`, after checking that it and its trailer end before
/// `limit`, that it is uncompressed and that its checksum matches.
fn read_block<'a>(
    file: &'a [u8],
    handle: BlockHandle,
    limit: u64,
    what: &str,
) -> Result<&'a [u8], TableError> {
    let end = handle
        .offset
        .checked_add(handle.size)
        .and_then(|e| e.checked_add(BLOCK_TRAILER_SIZE as u64));
    let Some(end) = end.filter(|&e| e <= limit) else {
        return Err(TableError::new(
            handle.offset,
            format!(
                "{what} block of {} bytes at {} runs past the end of the blocks ({limit} bytes; truncated?)",
                handle.size, handle.offset
            ),
        ));
    };
    let (start, size) = (handle.offset as usize, handle.size as usize);
    let contents = &file[start..start + size];
    let kind = file[start + size];
    if kind != NO_COMPRESSION {
        return Err(TableError::new(
            start as u64 + handle.size,
            format!("{what} block has compression type {kind}; only uncompressed (0) tables are supported"),
        ));
    }
    let stored = get_fixed32(file, start + size + 1).unwrap_or(0);
    let actual = crc::extend(crc::crc32c(contents), &[kind]);
    if crc::unmask(stored) != actual {
        return Err(TableError::new(
            start as u64,
            format!(
                "{what} block checksum mismatch (stored {:#010x}, computed {actual:#010x}; block bytes {start}..{end})",
                crc::unmask(stored)
            ),
        ));
    }
    Ok(contents)
}

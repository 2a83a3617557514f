//! Simple chunks (`'r'`): record sizes and concatenated record values.
//!
//! Data layout: `compression_type` byte, `varint64 compressed_sizes_size`,
//! the sizes buffer (`num_records` varint64s, compressed), then the values
//! buffer (the concatenated records, compressed) up to the end of the data.
//! Both buffers carry a varint64 decompressed-size prefix unless the
//! compression type is none.

use crate::chunk_bytes::ChunkBytes;
use crate::compression::{self, Compression, CompressionType, Compressor};
use crate::error::{corrupt, DecodeFault};
use crate::varint;

/// The parsed framing of a simple chunk's data.
pub(crate) struct SimpleLayout {
    /// Compression of both buffers.
    pub compression: CompressionType,
    /// The sizes buffer as stored (with its prefix when compressed).
    pub sizes: ChunkBytes,
    /// The values buffer as stored (with its prefix when compressed).
    pub values: ChunkBytes,
}

impl SimpleLayout {
    /// Splits chunk data into its two buffers.
    pub(crate) fn parse(data: &ChunkBytes) -> Result<SimpleLayout, DecodeFault> {
        let head = data.prefix(11);
        let ct_byte = *head
            .first()
            .ok_or_else(|| corrupt("simple chunk data is empty"))?;
        let compression = compression::parse_type(ct_byte)?;
        let (sizes_size, n) = varint::read_u64(&head[1..])
            .ok_or_else(|| corrupt("bad varint for the size of record sizes"))?;
        let after = data
            .skip(1 + n as u64)
            .ok_or_else(|| corrupt("simple chunk data too short"))?;
        let sizes = after.slice(0, sizes_size).ok_or_else(|| {
            corrupt(format!(
                "record sizes claim {sizes_size} bytes but the chunk data has {}",
                after.len()
            ))
        })?;
        let values = after
            .skip(sizes_size)
            .ok_or_else(|| corrupt("simple chunk data too short"))?;
        Ok(SimpleLayout {
            compression,
            sizes,
            values,
        })
    }

    /// Decodes the record sizes into cumulative end offsets, checking that
    /// there are exactly `num_records` of them and that they add up to
    /// `decoded_data_size`.
    pub(crate) fn limits(
        &self,
        num_records: u64,
        decoded_data_size: u64,
    ) -> Result<Vec<u64>, DecodeFault> {
        let (sizes_len, stream) = compression::split_prefix(self.compression, &self.sizes)?;
        // Each size takes at least one byte: reject impossible counts before
        // allocating or decompressing anything.
        if num_records > sizes_len {
            return Err(corrupt(format!(
                "chunk claims {num_records} records but the sizes buffer holds {sizes_len} bytes"
            )));
        }
        // And each takes at most ten bytes, with nothing after the last: a sizes buffer
        // declaring more is refused before it is decompressed (a bomb hidden in the sizes).
        if sizes_len > num_records.saturating_mul(10) {
            return Err(corrupt(format!(
                "the sizes buffer declares {sizes_len} bytes, more than {num_records} record sizes can take"
            )));
        }
        let raw = if self.compression == CompressionType::None {
            stream.to_bytes()
        } else {
            bytes::Bytes::from(compression::decompress_to_vec(
                self.compression,
                &stream,
                sizes_len,
            )?)
        };
        let mut cursor = varint::Cursor::new(&raw);
        let mut limits = Vec::with_capacity(num_records.min(raw.len() as u64) as usize);
        let mut total = 0u64;
        for _ in 0..num_records {
            let size = cursor
                .u64()
                .ok_or_else(|| corrupt("bad record size varint"))?;
            if size > decoded_data_size - total {
                return Err(corrupt(format!(
                    "record sizes add up to more than the decoded data size {decoded_data_size}"
                )));
            }
            total += size;
            limits.push(total);
        }
        if cursor.remaining() != 0 {
            return Err(corrupt("extra bytes after the record sizes"));
        }
        if total != decoded_data_size {
            return Err(corrupt(format!(
                "record sizes add up to {total} but the decoded data size is {decoded_data_size}"
            )));
        }
        Ok(limits)
    }

    /// The values buffer's declared decompressed size and its stream.
    pub(crate) fn values_stream(&self) -> Result<(u64, ChunkBytes), DecodeFault> {
        compression::split_prefix(self.compression, &self.values)
    }
}

/// Accumulates records into a simple chunk (writer side).
pub(crate) struct SimpleEncoder {
    compression: Compression,
    sizes: Vec<u8>,
    values: Compressor,
    num_records: u64,
}

impl SimpleEncoder {
    /// Starts an empty chunk; `size_hint` is the expected values size.
    pub(crate) fn new(compression: Compression, size_hint: u64) -> std::io::Result<SimpleEncoder> {
        Ok(SimpleEncoder {
            compression,
            sizes: Vec::new(),
            values: Compressor::new(compression, size_hint)?,
            num_records: 0,
        })
    }

    /// Number of records added.
    pub(crate) fn num_records(&self) -> u64 {
        self.num_records
    }

    /// Adds one record.
    pub(crate) fn add(&mut self, record: &[u8]) -> std::io::Result<()> {
        self.add_parts(&[record])
    }

    /// Adds one record given as consecutive parts.
    pub(crate) fn add_parts(&mut self, parts: &[&[u8]]) -> std::io::Result<()> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        varint::write_u64(&mut self.sizes, len as u64);
        for part in parts {
            self.values.write(part)?;
        }
        self.num_records += 1;
        Ok(())
    }

    /// Encodes the chunk data; returns its parts (to be concatenated),
    /// `num_records` and `decoded_data_size`.
    pub(crate) fn finish(self) -> std::io::Result<(Vec<Vec<u8>>, u64, u64)> {
        let decoded_data_size = self.values.uncompressed_len();
        let values = self.values.finish()?;
        let parts = assemble(self.compression, &self.sizes, values)?;
        Ok((parts, self.num_records, decoded_data_size))
    }

    /// [`SimpleEncoder::finish`] of a Zstd chunk at `level` of the one record `record`, its
    /// values compressed in one call ([`compression::zstd_whole`]).
    pub(crate) fn encode_one_zstd(
        level: i32,
        record: &[u8],
    ) -> std::io::Result<(Vec<Vec<u8>>, u64, u64)> {
        let compression = Compression::Zstd { level };
        let mut sizes = Vec::new();
        varint::write_u64(&mut sizes, record.len() as u64);
        let values = compression::zstd_whole(level, record)?;
        let parts = assemble(compression, &sizes, values)?;
        Ok((parts, 1, record.len() as u64))
    }
}

/// A simple chunk's data from its record sizes (uncompressed) and its values buffer (as
/// stored): the compression type, the sizes buffer's stored length, the sizes buffer, the
/// values buffer.
fn assemble(
    compression: Compression,
    sizes: &[u8],
    values: Vec<Vec<u8>>,
) -> std::io::Result<Vec<Vec<u8>>> {
    let mut compressed = Compressor::new(compression, 0)?;
    compressed.write(sizes)?;
    let sizes_parts = compressed.finish()?;
    let sizes_len: usize = sizes_parts.iter().map(Vec::len).sum();
    let mut head = vec![compression.compression_type().to_byte()];
    varint::write_u64(&mut head, sizes_len as u64);
    let mut parts = vec![head];
    parts.extend(sizes_parts);
    parts.extend(values);
    Ok(parts)
}

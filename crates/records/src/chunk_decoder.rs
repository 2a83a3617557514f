//! Turning a verified chunk into addressable records.
//!
//! A [`DecodedChunk`] knows where each record ends and where the values
//! live: in the mapped file itself for uncompressed simple chunks (records
//! are zero-copy slices unless they straddle a block header), or in one
//! decompressed buffer otherwise.

use bytes::Bytes;

use crate::chunk_bytes::ChunkBytes;
use crate::chunk_header::{ChunkHeader, ChunkType};
use crate::compression::{self, CompressionType};
use crate::error::{corrupt, DecodeFault};
use crate::simple_chunk::SimpleLayout;
use crate::transposed;

/// Where the concatenated record values of a decoded chunk are.
pub(crate) enum Values {
    /// Uncompressed values read in place from the file.
    InFile(ChunkBytes),
    /// Decompressed (or transposed-decoded) values.
    Buffer(Bytes),
}

/// The records of one chunk.
pub(crate) struct DecodedChunk {
    /// End offset of each record within the values.
    pub limits: Vec<u64>,
    /// The values.
    pub values: Values,
}

impl DecodedChunk {
    /// Number of records.
    pub(crate) fn len(&self) -> u64 {
        self.limits.len() as u64
    }

    /// Start and length of record `i` (must be `< len`).
    fn range(&self, i: usize) -> (u64, u64) {
        let start = if i == 0 { 0 } else { self.limits[i - 1] };
        (start, self.limits[i] - start)
    }

    /// Size of record `i`.
    pub(crate) fn record_len(&self, i: usize) -> u64 {
        self.range(i).1
    }

    /// Record `i` as bytes: a slice of the file or of the decompressed
    /// buffer, copied only when it straddles a block header.
    pub(crate) fn record(&self, i: usize) -> Bytes {
        let (start, len) = self.range(i);
        match &self.values {
            Values::Buffer(b) => b.slice(start as usize..(start + len) as usize),
            Values::InFile(v) => v
                .slice(start, len)
                .map(|s| s.to_bytes())
                .unwrap_or_default(),
        }
    }

    /// Writes `len` bytes of record `i` from `offset` to `out`; the caller has checked that
    /// the range lies inside the record.
    pub(crate) fn write_record_range(
        &self,
        i: usize,
        offset: u64,
        len: u64,
        out: &mut dyn std::io::Write,
    ) -> std::io::Result<()> {
        let (record_start, record_len) = self.range(i);
        debug_assert!(offset + len <= record_len);
        let start = record_start + offset;
        match &self.values {
            Values::Buffer(b) => out.write_all(&b[start as usize..(start + len) as usize]),
            Values::InFile(v) => match v.slice(start, len) {
                Some(s) => s.write_to(out),
                None => Ok(()),
            },
        }
    }
}

/// Decodes the records of a chunk whose data hash has been verified.
pub(crate) fn decode(header: &ChunkHeader, data: &ChunkBytes) -> Result<DecodedChunk, DecodeFault> {
    match header.chunk_type {
        ChunkType::Simple => {
            let layout = SimpleLayout::parse(data)?;
            let limits = layout.limits(header.num_records, header.decoded_data_size)?;
            let (size, stream) = layout.values_stream()?;
            if size != header.decoded_data_size {
                return Err(corrupt(format!(
                    "values buffer declares {size} bytes but the chunk header declares {}",
                    header.decoded_data_size
                )));
            }
            let values = if layout.compression == CompressionType::None {
                Values::InFile(stream)
            } else {
                Values::Buffer(Bytes::from(compression::decompress_to_vec(
                    layout.compression,
                    &stream,
                    size,
                )?))
            };
            Ok(DecodedChunk { limits, values })
        }
        ChunkType::Transposed => {
            let decoded = transposed::decode(
                data.to_bytes(),
                header.num_records,
                header.decoded_data_size,
            )?;
            Ok(DecodedChunk {
                limits: decoded.limits,
                values: Values::Buffer(decoded.values),
            })
        }
        ChunkType::FileSignature | ChunkType::FileMetadata | ChunkType::Padding => {
            if header.num_records != 0 {
                return Err(corrupt(format!(
                    "{:?} chunk claims {} records",
                    header.chunk_type, header.num_records
                )));
            }
            Ok(DecodedChunk {
                limits: Vec::new(),
                values: Values::Buffer(Bytes::new()),
            })
        }
        ChunkType::Unknown(b) => {
            if header.num_records == 0 {
                Ok(DecodedChunk {
                    limits: Vec::new(),
                    values: Values::Buffer(Bytes::new()),
                })
            } else {
                Err(DecodeFault::Unsupported(format!(
                    "unknown chunk type 0x{b:02x} holding records"
                )))
            }
        }
    }
}

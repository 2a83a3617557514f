//! The 40-byte chunk header and the chunk types.
//!
//! Layout (little-endian): `header_hash` (hash of the next 32 bytes),
//! `data_size`, `data_hash`, `chunk_type` (1 byte) + `num_records` (7 bytes),
//! `decoded_data_size`.

use crate::block::le64;
use crate::hash;

/// Size of a chunk header.
pub(crate) const CHUNK_HEADER_SIZE: u64 = 40;

/// The type of a chunk (the byte stored in its header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChunkType {
    /// `'s'`: the file signature; first chunk of every file, no records.
    FileSignature,
    /// `'m'`: file metadata (a transposed `RecordsMetadata`), no records.
    FileMetadata,
    /// `'p'`: padding, no records.
    Padding,
    /// `'r'`: simple chunk: record sizes and concatenated values.
    Simple,
    /// `'t'`: transposed chunk: protocol buffer records split by field.
    Transposed,
    /// Any other byte; readable only when it holds no records.
    Unknown(u8),
}

impl ChunkType {
    /// Decodes the type byte.
    pub fn from_byte(b: u8) -> ChunkType {
        match b {
            b's' => ChunkType::FileSignature,
            b'm' => ChunkType::FileMetadata,
            b'p' => ChunkType::Padding,
            b'r' => ChunkType::Simple,
            b't' => ChunkType::Transposed,
            other => ChunkType::Unknown(other),
        }
    }

    /// The type byte.
    pub fn to_byte(self) -> u8 {
        match self {
            ChunkType::FileSignature => b's',
            ChunkType::FileMetadata => b'm',
            ChunkType::Padding => b'p',
            ChunkType::Simple => b'r',
            ChunkType::Transposed => b't',
            ChunkType::Unknown(b) => b,
        }
    }
}

/// A decoded chunk header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChunkHeader {
    pub data_size: u64,
    pub data_hash: u64,
    pub chunk_type: ChunkType,
    pub num_records: u64,
    pub decoded_data_size: u64,
}

impl ChunkHeader {
    /// Parses a chunk header, returning `None` when its hash does not match.
    pub(crate) fn parse(bytes: &[u8; 40]) -> Option<ChunkHeader> {
        if !hash::matches(hash::hash(&bytes[8..40]), le64(&bytes[0..8])) {
            return None;
        }
        let type_and_count = le64(&bytes[24..32]);
        Some(ChunkHeader {
            data_size: le64(&bytes[8..16]),
            data_hash: le64(&bytes[16..24]),
            chunk_type: ChunkType::from_byte(type_and_count as u8),
            num_records: type_and_count >> 8,
            decoded_data_size: le64(&bytes[32..40]),
        })
    }

    /// Builds the header for `data`.
    pub(crate) fn for_data(
        data: &[u8],
        chunk_type: ChunkType,
        num_records: u64,
        decoded_data_size: u64,
    ) -> ChunkHeader {
        ChunkHeader {
            data_size: data.len() as u64,
            data_hash: hash::hash(data),
            chunk_type,
            num_records,
            decoded_data_size,
        }
    }

    /// Serializes with its hash.
    pub(crate) fn encode(&self) -> [u8; 40] {
        let mut out = [0u8; 40];
        out[8..16].copy_from_slice(&self.data_size.to_le_bytes());
        out[16..24].copy_from_slice(&self.data_hash.to_le_bytes());
        let type_and_count = (self.num_records << 8) | u64::from(self.chunk_type.to_byte());
        out[24..32].copy_from_slice(&type_and_count.to_le_bytes());
        out[32..40].copy_from_slice(&self.decoded_data_size.to_le_bytes());
        let h = hash::hash(&out[8..40]);
        out[0..8].copy_from_slice(&h.to_le_bytes());
        out
    }

    /// Logical length of header plus data.
    pub(crate) fn content_len(&self) -> Option<u64> {
        self.data_size.checked_add(CHUNK_HEADER_SIZE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_header_bytes() {
        let h = ChunkHeader::for_data(&[], ChunkType::FileSignature, 0, 0).encode();
        let expected: [u8; 40] = [
            0x91, 0xba, 0xc2, 0x3c, 0x92, 0x87, 0xe1, 0xa9, 0, 0, 0, 0, 0, 0, 0, 0, 0xe1, 0x9f,
            0x13, 0xc0, 0xe9, 0xb1, 0xc3, 0x72, 0x73, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(h, expected);
        let parsed = ChunkHeader::parse(&h).expect("valid");
        assert_eq!(parsed.chunk_type, ChunkType::FileSignature);
    }
}

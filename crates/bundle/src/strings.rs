//! The data-file layouts of `DT_STRING` and `DT_VARIANT` tensors and their checksums
//! (`WriteStringTensor` / `ReadStringTensor`, `WriteVariantTensor` / `ReadVariantTensor` in
//! `tensor_bundle.cc`).
//!
//! - Strings: every length as a varint64, then a 4-byte masked CRC32C of the lengths (each
//!   as a little-endian uint32, or uint64 when above `u32::MAX`), then the string bytes. The
//!   entry's CRC covers the lengths (as above), the 4 checksum bytes and the string bytes.
//! - Variants: per element a varint64 length, the serialized `VariantTensorDataProto`, and a
//!   4-byte masked running CRC32C of everything so far (lengths as little-endian uint64).

use std::io::{self, Write};

use bytes::Bytes;

use crate::coding::{get_varint64, put_varint64};
use crate::crc;
use crate::Fault;

fn length_crc(crc: u32, len: u64) -> u32 {
    match u32::try_from(len) {
        Ok(l) => crc::extend(crc, &l.to_le_bytes()),
        Err(_) => crc::extend(crc, &len.to_le_bytes()),
    }
}

/// Decodes `n` strings from `data` (exactly the entry's bytes), returning them (slices of
/// `data`) and the entry CRC (unmasked) to compare with the index.
pub fn decode_strings(data: &Bytes, n: u64) -> Result<(Vec<Bytes>, u32), Fault> {
    decode_strings_impl(data, n).map_err(Fault)
}

fn decode_strings_impl(data: &Bytes, n: u64) -> Result<(Vec<Bytes>, u32), String> {
    if data.is_empty() && n == 0 {
        return Ok((Vec::new(), 0));
    }
    if n > data.len() as u64 {
        return Err(format!(
            "{n} strings cannot fit in {} bytes (at least one length byte each)",
            data.len()
        ));
    }
    let mut lengths = Vec::with_capacity(n as usize);
    let mut pos = 0;
    let mut crc = 0;
    let mut total: u64 = 0;
    for i in 0..n {
        let len = get_varint64(data, &mut pos)
            .ok_or_else(|| format!("string length {i} is malformed or cut off"))?;
        crc = length_crc(crc, len);
        total = total
            .checked_add(len)
            .ok_or_else(|| "string lengths overflow".to_string())?;
        lengths.push(len);
    }
    let stored = super::coding::get_fixed32(data, pos)
        .ok_or_else(|| "string data ends before the length checksum".to_string())?;
    if crc::unmask(stored) != crc {
        return Err(format!(
            "string length checksum mismatch (stored {:#010x}, computed {crc:#010x})",
            crc::unmask(stored)
        ));
    }
    crc = crc::extend(crc, &stored.to_le_bytes());
    pos += 4;
    let rest = (data.len() - pos) as u64;
    if total != rest {
        return Err(format!(
            "string lengths add up to {total} bytes but {rest} bytes follow the lengths"
        ));
    }
    crc = crc::extend(crc, &data[pos..]);
    let mut values = Vec::with_capacity(lengths.len());
    for len in lengths {
        let end = pos + len as usize;
        values.push(data.slice(pos..end));
        pos = end;
    }
    Ok((values, crc))
}

/// Writes `values` in the string layout; returns the bytes written and the entry CRC
/// (unmasked).
pub fn encode_strings(values: &[Bytes], out: &mut dyn Write) -> io::Result<(u64, u32)> {
    let mut lengths = Vec::with_capacity(values.len() + 4);
    let mut crc = 0;
    for v in values {
        put_varint64(&mut lengths, v.len() as u64);
        crc = length_crc(crc, v.len() as u64);
    }
    let masked = crc::mask(crc);
    lengths.extend_from_slice(&masked.to_le_bytes());
    crc = crc::extend(crc, &masked.to_le_bytes());
    out.write_all(&lengths)?;
    let mut size = lengths.len() as u64;
    for v in values {
        out.write_all(v)?;
        crc = crc::extend(crc, v);
        size += v.len() as u64;
    }
    Ok((size, crc))
}

/// Decodes `n` variant elements from `data`, checking each running checksum; returns the
/// serialized `VariantTensorDataProto`s and the entry CRC (unmasked).
pub fn decode_variants(data: &Bytes, n: u64) -> Result<(Vec<Bytes>, u32), Fault> {
    decode_variants_impl(data, n).map_err(Fault)
}

fn decode_variants_impl(data: &Bytes, n: u64) -> Result<(Vec<Bytes>, u32), String> {
    if data.is_empty() && n == 0 {
        return Ok((Vec::new(), 0));
    }
    if n > (data.len() / 5) as u64 {
        return Err(format!(
            "{n} variant elements cannot fit in {} bytes (at least 5 bytes each)",
            data.len()
        ));
    }
    let mut values = Vec::with_capacity(n as usize);
    let mut pos = 0;
    let mut crc = 0;
    for i in 0..n {
        let len = get_varint64(data, &mut pos)
            .ok_or_else(|| format!("variant {i}: length malformed or cut off"))?;
        crc = crc::extend(crc, &len.to_le_bytes());
        let end = (pos as u64)
            .checked_add(len)
            .filter(|&e| e <= data.len() as u64)
            .ok_or_else(|| format!("variant {i}: {len} bytes run past the entry"))?
            as usize;
        crc = crc::extend(crc, &data[pos..end]);
        values.push(data.slice(pos..end));
        let stored = super::coding::get_fixed32(data, end)
            .ok_or_else(|| format!("variant {i}: data ends before its checksum"))?;
        if crc::unmask(stored) != crc {
            return Err(format!("variant {i}: checksum mismatch"));
        }
        crc = crc::extend(crc, &stored.to_le_bytes());
        pos = end + 4;
    }
    if pos != data.len() {
        return Err(format!(
            "{} bytes left after the last variant element",
            data.len() - pos
        ));
    }
    Ok((values, crc))
}

/// Writes serialized variant elements in the variant layout; returns the bytes written and
/// the entry CRC (unmasked).
pub fn encode_variants(values: &[Bytes], out: &mut dyn Write) -> io::Result<(u64, u32)> {
    let mut crc = 0;
    let mut size = 0;
    for v in values {
        let mut len = Vec::new();
        put_varint64(&mut len, v.len() as u64);
        out.write_all(&len)?;
        crc = crc::extend(crc, &(v.len() as u64).to_le_bytes());
        out.write_all(v)?;
        crc = crc::extend(crc, v);
        let masked = crc::mask(crc);
        out.write_all(&masked.to_le_bytes())?;
        crc = crc::extend(crc, &masked.to_le_bytes());
        size += (len.len() + v.len() + 4) as u64;
    }
    Ok((size, crc))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(values: &[&[u8]]) -> (Bytes, u32) {
        let values: Vec<Bytes> = values.iter().map(|v| Bytes::copy_from_slice(v)).collect();
        let mut out = Vec::new();
        let (size, crc) = encode_strings(&values, &mut out).unwrap();
        assert_eq!(size, out.len() as u64);
        (Bytes::from(out), crc)
    }

    #[test]
    fn string_layout() {
        let (data, crc) = encode(&[b"ab", b"", b"xyz"]);
        // Lengths 2, 0, 3; then the masked CRC of the lengths as uint32s; then the bytes.
        assert_eq!(&data[..3], &[2, 0, 3]);
        let mut lens = Vec::new();
        for l in [2u32, 0, 3] {
            lens.extend_from_slice(&l.to_le_bytes());
        }
        let masked = crc::mask(crc::crc32c(&lens));
        assert_eq!(&data[3..7], &masked.to_le_bytes());
        assert_eq!(&data[7..], b"abxyz");
        assert_eq!(crc, crc::crc32c(&[&lens[..], &data[3..]].concat()));
        let (values, back) = decode_strings(&data, 3).unwrap();
        assert_eq!(values, vec![&b"ab"[..], b"", b"xyz"]);
        assert_eq!(back, crc);
    }

    #[test]
    fn long_strings_and_empty_tensors() {
        let big = vec![7u8; 300];
        let (data, crc) = encode(&[&big]);
        assert_eq!(&data[..2], &[0xac, 0x02]);
        assert_eq!(
            decode_strings(&data, 1).unwrap(),
            (vec![Bytes::from(big)], crc)
        );
        let (data, crc) = encode(&[]);
        assert_eq!(data.len(), 4);
        assert_eq!(decode_strings(&data, 0).unwrap(), (vec![], crc));
    }

    #[test]
    fn string_corruption_is_caught() {
        let (data, _) = encode(&[b"hello", b"world"]);
        // A changed length: the length checksum no longer matches.
        let mut d = data.to_vec();
        d[0] = 4;
        assert!(decode_strings(&Bytes::from(d), 2)
            .unwrap_err()
            .contains("length checksum"));
        // Truncated: lengths no longer add up.
        let cut = data.slice(..data.len() - 1);
        assert!(decode_strings(&cut, 2).unwrap_err().contains("add up"));
        // More elements than bytes.
        assert!(decode_strings(&data, 1 << 40).is_err());
        // Every truncation and byte flip: an error or a different CRC, never a panic.
        let (_, good) = decode_strings(&data, 2).unwrap();
        for i in 0..data.len() {
            let mut d = data.to_vec();
            d[i] ^= 0x20;
            if let Ok((_, c)) = decode_strings(&Bytes::from(d), 2) {
                assert_ne!(c, good);
            }
            let _ = decode_strings(&data.slice(..i), 2);
        }
    }

    #[test]
    fn variant_layout_round_trips() {
        let values = vec![Bytes::from_static(b"\x0a\x03abc"), Bytes::new()];
        let mut out = Vec::new();
        let (size, crc) = encode_variants(&values, &mut out).unwrap();
        assert_eq!(size as usize, out.len());
        let data = Bytes::from(out);
        assert_eq!(decode_variants(&data, 2).unwrap(), (values, crc));
        let mut d = data.to_vec();
        d[2] ^= 1;
        assert!(decode_variants(&Bytes::from(d), 2).is_err());
        assert!(decode_variants(&data, 3).is_err());
    }
}

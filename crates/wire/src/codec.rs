//! Protobuf wire-format primitives: varints, keys and the shallow scan of one message level.
//!
//! Everything here works on untrusted bytes: every length is checked against what remains
//! before it is used, and errors carry the byte offset where the fault was found.

use crate::error::DecodeError;

/// Protobuf wire types (the low three bits of a field key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireType {
    /// 0: base-128 varint.
    Varint,
    /// 1: eight little-endian bytes.
    Fixed64,
    /// 2: a varint length followed by that many bytes.
    Len,
    /// 3: start of a (deprecated) group.
    StartGroup,
    /// 4: end of a group.
    EndGroup,
    /// 5: four little-endian bytes.
    Fixed32,
}

impl WireType {
    /// Decodes the wire type from the low bits of a key.
    pub fn from_bits(bits: u64) -> Option<Self> {
        Some(match bits {
            0 => Self::Varint,
            1 => Self::Fixed64,
            2 => Self::Len,
            3 => Self::StartGroup,
            4 => Self::EndGroup,
            5 => Self::Fixed32,
            _ => return None,
        })
    }

    /// The numeric value written in a key.
    pub fn bits(self) -> u64 {
        match self {
            Self::Varint => 0,
            Self::Fixed64 => 1,
            Self::Len => 2,
            Self::StartGroup => 3,
            Self::EndGroup => 4,
            Self::Fixed32 => 5,
        }
    }
}

/// Largest field number protobuf allows.
pub const MAX_FIELD_NUMBER: u32 = (1 << 29) - 1;

/// Nesting limit for groups inside one scanned level (protobuf's own default recursion limit).
pub const MAX_GROUP_DEPTH: usize = 100;

/// Reads a varint at `*pos`, advancing `pos`.
///
/// Inlined with a one-byte fast path: field keys and most lengths of a graph's small nodes
/// fit in one byte, and scans of millions of nodes spend half their time here otherwise.
#[inline]
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Result<u64, DecodeError> {
    if let Some(&byte) = buf.get(*pos) {
        if byte < 0x80 {
            *pos += 1;
            return Ok(u64::from(byte));
        }
    }
    read_varint_slow(buf, pos)
}

/// [`read_varint`] past its one-byte fast path.
#[cold]
#[inline(never)]
fn read_varint_slow(buf: &[u8], pos: &mut usize) -> Result<u64, DecodeError> {
    let start = *pos;
    // Up to eight bytes at once, from a word: the first byte without its continuation bit
    // ends the varint, and the 7-bit groups are gathered by shifts. Padded varints (writers
    // that reserve a length's width) and large values are common enough in models written
    // by other tools that a byte at a time cost a fifth of canonicalizing them.
    if let Some(word) = buf.get(start..start.wrapping_add(8)) {
        let word = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        let stops = !word & 0x8080_8080_8080_8080;
        if stops != 0 {
            let len = (stops.trailing_zeros() / 8 + 1) as usize;
            let word = if len == 8 {
                word
            } else {
                word & ((1u64 << (8 * len)) - 1)
            };
            let mut value = 0;
            for i in 0..8 {
                value |= (word >> i) & (0x7f << (7 * i));
            }
            *pos = start + len;
            return Ok(value);
        }
    }
    let mut value: u64 = 0;
    for shift in (0..70).step_by(7) {
        let Some(&byte) = buf.get(*pos) else {
            return Err(DecodeError::new(start, "truncated varint"));
        };
        *pos += 1;
        if shift == 63 && byte > 1 {
            return Err(DecodeError::new(start, "varint overflows 64 bits"));
        }
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(DecodeError::new(start, "varint longer than 10 bytes"))
}

/// Appends `value` as a varint.
pub fn put_varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Number of bytes `value` takes as a varint.
pub fn varint_len(value: u64) -> u64 {
    // ceil(bits / 7) with a minimum of one byte.
    let bits = 64 - (value | 1).leading_zeros() as u64;
    bits.div_ceil(7)
}

/// Whether `bytes` is a valid protobuf `string` value (UTF-8, as protobuf C++ requires of
/// proto3 strings). The ASCII test first: model strings (node names, devices, inputs) are
/// short and almost always ASCII, which `is_ascii` answers a word at a time, faster than
/// `from_utf8`'s general path (a tenth of a schema check of millions of nodes, issue 15).
pub fn is_utf8(bytes: &[u8]) -> bool {
    bytes.is_ascii() || std::str::from_utf8(bytes).is_ok()
}

/// Encodes a field key.
pub fn put_key(number: u32, wire_type: WireType, out: &mut Vec<u8>) {
    put_varint((u64::from(number) << 3) | wire_type.bits(), out);
}

/// The key of length-delimited field `number` and the length `len`, as minimal varints (what
/// precedes the value of such a field as written), in a buffer of their own: the bytes are
/// `.0[..n]` for the returned `n`. For comparing with the bytes before a value without allocating.
#[inline]
pub fn len_field_head(number: u32, len: u64) -> ([u8; 15], usize) {
    let mut head = [0u8; 15];
    let mut n = 0;
    for mut v in [(u64::from(number) << 3) | WireType::Len.bits(), len] {
        while v >= 0x80 {
            head[n] = (v as u8) | 0x80;
            v >>= 7;
            n += 1;
        }
        head[n] = v as u8;
        n += 1;
    }
    (head, n)
}

/// Size of an encoded key.
pub fn key_len(number: u32) -> u64 {
    varint_len(u64::from(number) << 3)
}

/// One field as found by [`scan`]: its number, wire type, and where its value lies in the buffer.
#[derive(Clone, Copy, Debug)]
pub struct RawField {
    /// Field number.
    pub number: u32,
    /// Wire type of the key.
    pub wire_type: WireType,
    /// For varints, the decoded value; otherwise 0.
    pub varint: u64,
    /// Byte range of the value: the fixed bytes, the length-delimited payload (without its
    /// length prefix), or a group's contents (without start and end keys).
    pub start: usize,
    /// End of the value range (exclusive).
    pub end: usize,
}

/// Reads the key and value of the field starting at `*pos`, advancing `pos` past it.
///
/// Inlined with a fast path for a one-byte key (field numbers 1 to 15) followed by a one-byte
/// varint or a length of one or two bytes: the fields of a graph's small nodes, read by the
/// millions by every scan of a model (issue 15: this call was a fifth of the work of a split
/// of a model of millions of nodes). Anything else, errors included, takes the general path.
#[inline]
pub fn read_field(buf: &[u8], pos: &mut usize) -> Result<RawField, DecodeError> {
    let at = *pos;
    if let Some(&[key, first]) = buf.get(at..at.wrapping_add(2)) {
        if (8..0x80).contains(&key) {
            let number = u32::from(key >> 3);
            // Wire type 0: a varint; 2: length-delimited.
            if key & 7 == 0 && first < 0x80 {
                *pos = at + 2;
                return Ok(RawField {
                    number,
                    wire_type: WireType::Varint,
                    varint: u64::from(first),
                    start: at + 1,
                    end: at + 2,
                });
            }
            let len = match buf.get(at + 2) {
                _ if first < 0x80 => Some((usize::from(first), 1)),
                Some(&high) if (1..0x80).contains(&high) => {
                    Some((usize::from(first & 0x7f) | usize::from(high) << 7, 2))
                }
                _ => None,
            };
            if let (2, Some((len, width))) = (key & 7, len) {
                let start = at + 1 + width;
                let end = start + len;
                if end <= buf.len() {
                    *pos = end;
                    return Ok(RawField {
                        number,
                        wire_type: WireType::Len,
                        varint: 0,
                        start,
                        end,
                    });
                }
            }
        }
    }
    read_field_slow(buf, pos)
}

/// [`read_field`] past its fast path (also where every error is found).
#[inline(never)]
fn read_field_slow(buf: &[u8], pos: &mut usize) -> Result<RawField, DecodeError> {
    let key_at = *pos;
    let key = read_varint(buf, pos)?;
    let wire_type = WireType::from_bits(key & 7)
        .ok_or_else(|| DecodeError::new(key_at, format!("invalid wire type {}", key & 7)))?;
    let number = key >> 3;
    if number == 0 || number > u64::from(MAX_FIELD_NUMBER) {
        return Err(DecodeError::new(
            key_at,
            format!("invalid field number {number}"),
        ));
    }
    let number = number as u32;
    let remaining = buf.len() - *pos;
    let mut varint = 0;
    let (start, end) = match wire_type {
        WireType::Varint => {
            let start = *pos;
            varint = read_varint(buf, pos)?;
            (start, *pos)
        }
        WireType::Fixed64 | WireType::Fixed32 => {
            let width = if wire_type == WireType::Fixed64 { 8 } else { 4 };
            if remaining < width {
                return Err(DecodeError::new(
                    *pos,
                    format!("truncated {width}-byte value of field {number}"),
                ));
            }
            let start = *pos;
            *pos += width;
            (start, *pos)
        }
        WireType::Len => {
            let len_at = *pos;
            let len = read_varint(buf, pos)?;
            let available = (buf.len() - *pos) as u64;
            if len > available {
                return Err(DecodeError::new(
                    len_at,
                    format!("field {number} claims {len} bytes but only {available} remain"),
                ));
            }
            let start = *pos;
            *pos += len as usize;
            (start, *pos)
        }
        WireType::StartGroup => {
            let start = *pos;
            let end = skip_group(buf, pos, number, 1)?;
            (start, end)
        }
        WireType::EndGroup => {
            return Err(DecodeError::new(
                key_at,
                format!("unexpected end-group key for field {number}"),
            ))
        }
    };
    Ok(RawField {
        number,
        wire_type,
        varint,
        start,
        end,
    })
}

/// Skips a group's contents; returns the offset where its end key starts and leaves `pos`
/// after the end key.
fn skip_group(
    buf: &[u8],
    pos: &mut usize,
    number: u32,
    depth: usize,
) -> Result<usize, DecodeError> {
    if depth > MAX_GROUP_DEPTH {
        return Err(DecodeError::new(*pos, "groups nested too deeply"));
    }
    loop {
        if *pos >= buf.len() {
            return Err(DecodeError::new(
                *pos,
                format!("unterminated group {number}"),
            ));
        }
        let key_at = *pos;
        let key = read_varint(buf, pos)?;
        if key & 7 == 4 {
            if (key >> 3) as u32 != number || key >> 3 > u64::from(MAX_FIELD_NUMBER) {
                return Err(DecodeError::new(key_at, "mismatched end-group key"));
            }
            return Ok(key_at);
        }
        *pos = key_at;
        read_field_nested(buf, pos, depth)?;
    }
}

/// Like [`read_field`], but tracks group depth.
fn read_field_nested(buf: &[u8], pos: &mut usize, depth: usize) -> Result<(), DecodeError> {
    let key_at = *pos;
    let key = read_varint(buf, pos)?;
    if key & 7 == 3 {
        let number = (key >> 3) as u32;
        skip_group(buf, pos, number, depth + 1)?;
        return Ok(());
    }
    *pos = key_at;
    read_field(buf, pos).map(|_| ())
}

/// Scans one level of a message, calling `visit` for each field in wire order.
pub fn scan(
    buf: &[u8],
    mut visit: impl FnMut(RawField) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    let mut pos = 0;
    while pos < buf.len() {
        let field = read_field(buf, &mut pos)?;
        visit(field)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path of `read_field` reads every two-byte start of a field as the general
    /// path does: the same field, position and errors, for every key and second byte, with
    /// the value fitting, just fitting and cut short.
    #[test]
    fn read_field_fast_path_agrees_with_the_general_path() {
        let show = |r: Result<RawField, DecodeError>, pos: usize| match r {
            Ok(f) => format!(
                "{} {:?} {} {}..{} at {pos}",
                f.number, f.wire_type, f.varint, f.start, f.end
            ),
            Err(e) => format!("error {e}"),
        };
        for key in 0..=255u8 {
            for second in 0..=255u8 {
                for tail in [0usize, 1, 126, 127, 200] {
                    let mut buf = vec![0xAA, key, second];
                    buf.resize(3 + tail, 0x01);
                    let (mut fast, mut slow) = (1, 1);
                    let a = show(read_field(&buf, &mut fast), fast);
                    let b = show(read_field_slow(&buf, &mut slow), slow);
                    assert_eq!(a, b, "key {key:#x}, second {second:#x}, {tail} bytes after");
                }
            }
        }
        // A one-byte key and a two-byte length (or what only looks like one).
        for key in [0x0A, 0x0B, 0x08, 0x7A, 0x02, 0x80] {
            for low in [0x80u8, 0x81, 0xFF, 0x7F] {
                for high in [0u8, 1, 2, 0x7F, 0x80] {
                    for size in [0usize, 127, 128, 300, 20000] {
                        let mut buf = vec![key, low, high];
                        buf.resize(3 + size, 0x01);
                        let (mut fast, mut slow) = (0, 0);
                        let a = show(read_field(&buf, &mut fast), fast);
                        let b = show(read_field_slow(&buf, &mut slow), slow);
                        assert_eq!(a, b, "{key:#x} {low:#x} {high:#x}, {size} bytes after");
                    }
                }
            }
        }
        // One byte left: only the general path applies.
        let mut pos = 0;
        assert!(read_field(&[0x0A], &mut pos).is_err());
    }

    #[test]
    fn varint_round_trip_and_length() {
        for v in [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX] {
            let mut out = Vec::new();
            put_varint(v, &mut out);
            assert_eq!(out.len() as u64, varint_len(v), "len of {v}");
            let mut pos = 0;
            assert_eq!(read_varint(&out, &mut pos).unwrap(), v);
            assert_eq!(pos, out.len());
        }
    }

    /// The byte-at-a-time reading the word-at-a-time path must agree with.
    fn reference_varint(buf: &[u8]) -> Option<(u64, usize)> {
        let mut value = 0u64;
        for (i, &byte) in buf.iter().enumerate().take(10) {
            if i == 9 && byte > 1 {
                return None;
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Some((value, i + 1));
            }
        }
        None
    }

    #[test]
    fn varints_of_every_width_padded_or_not_read_as_byte_by_byte() {
        // Every width from 1 to 10 bytes, padded (continuation bytes of zero bits) and not,
        // with bytes after them and without (the word path needs eight bytes to look at).
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for width in 1..=10usize {
            for trial in 0..2000 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let mut bytes: Vec<u8> = (0..width)
                    .map(|i| {
                        let b = (seed >> ((i * 7) % 57)) as u8 & 0x7f;
                        if trial % 3 == 0 {
                            0
                        } else {
                            b
                        }
                    })
                    .collect();
                for b in &mut bytes[..width - 1] {
                    *b |= 0x80;
                }
                if width == 10 {
                    bytes[9] &= 1;
                }
                for tail in [0usize, 3, 9] {
                    let mut buf = bytes.clone();
                    buf.extend(std::iter::repeat_n(0xAB, tail));
                    let mut pos = 0;
                    let got = read_varint(&buf, &mut pos).ok().map(|v| (v, pos));
                    assert_eq!(got, reference_varint(&buf), "{buf:02x?}");
                }
            }
        }
    }

    #[test]
    fn overlong_and_truncated_varints_are_errors() {
        let mut pos = 0;
        assert!(read_varint(&[0x80, 0x80], &mut pos).is_err());
        let mut pos = 0;
        assert!(read_varint(&[0xff; 11], &mut pos).is_err());
        let mut pos = 0;
        // 10th byte may only carry one bit.
        let mut bytes = vec![0xff; 9];
        bytes.push(0x02);
        assert!(read_varint(&bytes, &mut pos).is_err());
    }

    #[test]
    fn length_beyond_buffer_is_an_error() {
        // field 1, wire type 2, length 5, but only 2 bytes follow.
        let err = scan(&[0x0a, 0x05, 1, 2], |_| Ok(())).unwrap_err();
        assert_eq!(err.offset, 1);
        assert!(err.fault.contains("claims 5 bytes"));
    }

    #[test]
    fn groups_are_skipped_whole() {
        // field 2 start group, field 1 varint 7, field 2 end group, field 3 varint 1
        let buf = [0x13, 0x08, 0x07, 0x14, 0x18, 0x01];
        let mut seen = Vec::new();
        scan(&buf, |f| {
            seen.push((f.number, f.wire_type, f.start, f.end));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            seen,
            vec![(2, WireType::StartGroup, 1, 3), (3, WireType::Varint, 5, 6)]
        );
    }

    #[test]
    fn field_number_zero_is_rejected() {
        assert!(scan(&[0x00, 0x01], |_| Ok(())).is_err());
    }
}

//! TensorFlow's OrderedCode (`tensorflow/core/lib/strings/ordered_code.cc`), the encoding of
//! the keys under which a partitioned tensor's slices are stored
//! (`checkpoint::EncodeTensorNameSlice` in `core/util/saved_tensor_slice_util.cc`): the number
//! 0, the full tensor's name, the rank, then each dimension's start and length (length -1 for
//! a full dimension).

use crate::slices::SliceSpec;

/// Appends `s` in increasing order: `\0` becomes `\0\xff`, `\xff` becomes `\xff\0`, and the
/// string ends with `\0\x01`.
pub fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    for &b in s {
        match b {
            0x00 => out.extend_from_slice(&[0x00, 0xff]),
            0xff => out.extend_from_slice(&[0xff, 0x00]),
            _ => out.push(b),
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// Appends `v` as a length byte followed by its big-endian bytes without leading zeros.
pub fn write_num_increasing(out: &mut Vec<u8>, v: u64) {
    let bytes = v.to_be_bytes();
    let skip = bytes.iter().take_while(|&&b| b == 0).count();
    out.push((8 - skip) as u8);
    out.extend_from_slice(&bytes[skip..]);
}

/// Appends `v` in OrderedCode's signed format: a sign bit, a unary length, then the value's
/// two's-complement bits, 1 to 10 bytes.
pub fn write_signed_num_increasing(out: &mut Vec<u8>, v: i64) {
    const HEADER: [[u8; 2]; 11] = [
        [0, 0],
        [0x80, 0],
        [0xc0, 0],
        [0xe0, 0],
        [0xf0, 0],
        [0xf8, 0],
        [0xfc, 0],
        [0xfe, 0],
        [0xff, 0],
        [0xff, 0x80],
        [0xff, 0xc0],
    ];
    let x = if v < 0 { !v as u64 } else { v as u64 };
    if x < 64 {
        out.push(HEADER[1][0] ^ (v as u8));
        return;
    }
    // Significant bits of x, plus the sign bit, packed 7 per byte.
    let bits = 64 - x.leading_zeros() as usize + 1;
    let len = bits.div_ceil(7).min(10);
    let sign: u8 = if v < 0 { 0xff } else { 0 };
    let mut buf = [sign; 10];
    buf[2..].copy_from_slice(&v.to_be_bytes());
    let begin = 10 - len;
    buf[begin] ^= HEADER[len][0];
    buf[begin + 1] ^= HEADER[len][1];
    out.extend_from_slice(&buf[begin..]);
}

/// Reads a string written by [`write_string`] at `src[*pos..]`.
pub fn read_string(src: &[u8], pos: &mut usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = *pos;
    loop {
        let b = *src.get(i)?;
        match b {
            0x00 => match *src.get(i + 1)? {
                0x01 => {
                    *pos = i + 2;
                    return Some(out);
                }
                0xff => out.push(0),
                _ => return None,
            },
            0xff => match *src.get(i + 1)? {
                0x00 => out.push(0xff),
                _ => return None,
            },
            _ => {
                out.push(b);
                i += 1;
                continue;
            }
        }
        i += 2;
    }
}

/// Reads a number written by [`write_num_increasing`].
pub fn read_num_increasing(src: &[u8], pos: &mut usize) -> Option<u64> {
    let len = *src.get(*pos)? as usize;
    if len > 8 {
        return None;
    }
    let bytes = src.get(*pos + 1..*pos + 1 + len)?;
    let v = bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    *pos += 1 + len;
    Some(v)
}

/// Reads a number written by [`write_signed_num_increasing`].
pub fn read_signed_num_increasing(src: &[u8], pos: &mut usize) -> Option<i64> {
    let first = *src.get(*pos)?;
    let negative = first & 0x80 == 0;
    let flip = |b: u8| if negative { !b } else { b };
    // Length: the count of leading one bits (after undoing the sign) across the first two
    // bytes, plus one.
    let header = (u16::from(flip(first)) << 8) | u16::from(flip(*src.get(*pos + 1).unwrap_or(&0)));
    let len = header.leading_ones() as usize;
    if len == 0 || len > 10 {
        return None;
    }
    let bytes = src.get(*pos..*pos + len)?;
    // Collect the payload: drop the header bits (len ones and one zero).
    let mut value: u128 = 0;
    for &b in bytes {
        value = (value << 8) | u128::from(flip(b));
    }
    let payload_bits = 8 * len - (len + 1);
    let payload = value & ((1u128 << payload_bits) - 1);
    if payload_bits > 63 && payload >> 63 != 0 {
        return None;
    }
    let magnitude = payload as i64;
    let v = if negative { !magnitude } else { magnitude };
    *pos += len;
    Some(v)
}

/// The key under which one slice of the partitioned tensor `name` is stored.
pub fn encode_tensor_name_slice(name: &[u8], slice: &SliceSpec) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len() + 4 + 4 * slice.rank());
    write_num_increasing(&mut out, 0);
    write_string(&mut out, name);
    write_num_increasing(&mut out, slice.rank() as u64);
    for e in slice.extents() {
        write_signed_num_increasing(&mut out, e.start);
        write_signed_num_increasing(&mut out, e.length.unwrap_or(-1));
    }
    out
}

/// Decodes a slice key into the full tensor's name and the slice; `None` if `key` is not one.
pub fn decode_tensor_name_slice(key: &[u8]) -> Option<(Vec<u8>, SliceSpec)> {
    let mut pos = 0;
    if read_num_increasing(key, &mut pos)? != 0 {
        return None;
    }
    let name = read_string(key, &mut pos)?;
    let rank = read_num_increasing(key, &mut pos)?;
    if rank == 0 || rank > (key.len() as u64) {
        return None;
    }
    let mut extents = Vec::with_capacity(rank as usize);
    for _ in 0..rank {
        let start = read_signed_num_increasing(key, &mut pos)?;
        let length = read_signed_num_increasing(key, &mut pos)?;
        extents.push((start, (length != -1).then_some(length)));
    }
    if pos != key.len() {
        return None;
    }
    Some((name, SliceSpec::new(extents)))
}

/// Whether `key` is a slice key (starts with the OrderedCode number 0, a zero byte). Tensor
/// names never start with a zero byte.
pub fn is_slice_key(key: &[u8]) -> bool {
    key.first() == Some(&0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc_u(v: u64) -> Vec<u8> {
        let mut o = Vec::new();
        write_num_increasing(&mut o, v);
        o
    }

    fn enc_s(v: i64) -> Vec<u8> {
        let mut o = Vec::new();
        write_signed_num_increasing(&mut o, v);
        o
    }

    #[test]
    fn tensorflow_vectors() {
        // From tensorflow/core/lib/strings/ordered_code_test.cc (EncodingIsExpected).
        assert_eq!(enc_u(0), b"\x00");
        assert_eq!(enc_u(1), b"\x01\x01");
        assert_eq!(enc_u(0xff), b"\x01\xff");
        assert_eq!(enc_u(0x100), b"\x02\x01\x00");
        assert_eq!(enc_u(0xffff_ffff), b"\x04\xff\xff\xff\xff");
        assert_eq!(
            enc_u(0x8000_0000_0000_0000),
            b"\x08\x80\x00\x00\x00\x00\x00\x00\x00"
        );
        assert_eq!(enc_s(0), b"\x80");
        assert_eq!(enc_s(63), b"\xbf");
        assert_eq!(enc_s(64), b"\xc0@");
        assert_eq!(enc_s(8191), b"\xdf\xff");
        assert_eq!(enc_s(8192), b"\xe0 \x00");
        assert_eq!(enc_s(1048576), b"\xf0\x10\x00\x00");
        assert_eq!(enc_s(134217728), b"\xf8\x08\x00\x00\x00");
        assert_eq!(enc_s(-1), b"\x7f");
        assert_eq!(enc_s(-64), b"\x40");
        // -0x800 is 0x3800 (the format description's second example).
        assert_eq!(enc_s(-0x800), b"\x38\x00");
        let mut s = Vec::new();
        write_string(&mut s, b"\x00\x01\xff");
        assert_eq!(s, b"\x00\xff\x01\xff\x00\x00\x01");
        let mut s = Vec::new();
        write_string(&mut s, b"foo");
        assert_eq!(s, b"foo\x00\x01");
    }

    #[test]
    fn numbers_round_trip_and_keep_order() {
        let mut values: Vec<i64> = vec![i64::MIN, i64::MAX, 0, -1, 1];
        for shift in 0..63 {
            for base in [1i64 << shift, -(1i64 << shift)] {
                values.extend([base - 1, base, base.wrapping_add(1)]);
            }
        }
        values.sort();
        values.dedup();
        let mut prev: Option<Vec<u8>> = None;
        for v in values {
            let e = enc_s(v);
            let mut pos = 0;
            assert_eq!(read_signed_num_increasing(&e, &mut pos), Some(v), "{v}");
            assert_eq!(pos, e.len());
            for cut in 0..e.len() {
                assert_eq!(
                    read_signed_num_increasing(&e[..cut], &mut 0),
                    None,
                    "{v} cut {cut}"
                );
            }
            if let Some(p) = prev {
                assert!(p < e, "order at {v}");
            }
            prev = Some(e);
        }
        for v in [0u64, 1, 255, 256, u64::MAX] {
            let e = enc_u(v);
            let mut pos = 0;
            assert_eq!(read_num_increasing(&e, &mut pos), Some(v));
        }
        // 1 << 63 does not fit (TensorFlow's Overflow test).
        let mut over = b"\xff\xc0\x80".to_vec();
        over.extend([0; 7]);
        assert_eq!(read_signed_num_increasing(&over, &mut 0), None);
    }

    #[test]
    fn slice_keys_round_trip() {
        let spec = SliceSpec::new(vec![(0, None), (2, Some(3)), (300, Some(70000))]);
        let key = encode_tensor_name_slice(b"w/.ATTRIBUTES/VARIABLE_VALUE", &spec);
        // 0, the name, rank 3, then (0, -1), (2, 3), (300, 70000).
        let mut expected = vec![0x00];
        expected.extend_from_slice(b"w/.ATTRIBUTES/VARIABLE_VALUE\x00\x01");
        expected.extend_from_slice(&[0x01, 0x03, 0x80, 0x7f, 0x82, 0x83]);
        expected.extend_from_slice(&enc_s(300));
        expected.extend_from_slice(&enc_s(70000));
        assert_eq!(key, expected);
        assert!(is_slice_key(&key));
        let (name, back) = decode_tensor_name_slice(&key).unwrap();
        assert_eq!(name, b"w/.ATTRIBUTES/VARIABLE_VALUE");
        assert_eq!(back, spec);
        assert_eq!(decode_tensor_name_slice(b"plain/key"), None);
        for cut in 0..key.len() {
            assert_eq!(decode_tensor_name_slice(&key[..cut]), None);
        }
    }
}

//! Little-endian fixed-width integers and LEB128 varints, with bounds-checked decoding.

/// Appends `v` as a varint.
pub fn put_varint64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` as a varint.
pub fn put_varint32(out: &mut Vec<u8>, v: u32) {
    put_varint64(out, u64::from(v));
}

/// Appends `v` as 4 little-endian bytes.
pub fn put_fixed32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Decodes a varint of at most 64 bits at `data[*pos..]`, advancing `pos`. `None` when the
/// data ends inside the varint or it is longer than 10 bytes or overflows 64 bits.
pub fn get_varint64(data: &[u8], pos: &mut usize) -> Option<u64> {
    let mut result = 0u64;
    for i in 0..10 {
        let b = *data.get(*pos + i)?;
        let bits = u64::from(b & 0x7f);
        if i == 9 && bits > 1 {
            return None;
        }
        result |= bits << (7 * i);
        if b & 0x80 == 0 {
            *pos += i + 1;
            return Some(result);
        }
    }
    None
}

/// Decodes a varint of at most 32 bits (at most 5 bytes).
pub fn get_varint32(data: &[u8], pos: &mut usize) -> Option<u32> {
    let mut p = *pos;
    let v = get_varint64(data, &mut p)?;
    if p - *pos > 5 {
        return None;
    }
    let v = u32::try_from(v).ok()?;
    *pos = p;
    Some(v)
}

/// Reads 4 little-endian bytes at `data[pos..]`.
pub fn get_fixed32(data: &[u8], pos: usize) -> Option<u32> {
    let b = data.get(pos..pos.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_bad_input() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut buf = Vec::new();
            put_varint64(&mut buf, v);
            let mut pos = 0;
            assert_eq!(get_varint64(&buf, &mut pos), Some(v));
            assert_eq!(pos, buf.len());
            // Every proper prefix is incomplete.
            for cut in 0..buf.len() {
                assert_eq!(get_varint64(&buf[..cut], &mut 0), None);
            }
        }
        // 11 bytes, or a 10th byte above 1: overflow.
        assert_eq!(get_varint64(&[0xff; 11], &mut 0), None);
        let mut over = vec![0xff; 9];
        over.push(0x02);
        assert_eq!(get_varint64(&over, &mut 0), None);
        let mut buf = Vec::new();
        put_varint64(&mut buf, 1 << 32);
        assert_eq!(get_varint32(&buf, &mut 0), None);
        assert_eq!(get_fixed32(&[1, 0, 0], 0), None);
        assert_eq!(get_fixed32(&[1, 0, 0, 0], 0), Some(1));
        assert_eq!(get_fixed32(&[1, 0, 0, 0], usize::MAX), None);
    }
}

//! Little-endian base-128 varints as Riegeli uses them (at most 10 bytes for
//! 64-bit values, 5 bytes for 32-bit values).

/// Reads a varint64 from the front of `buf`; returns the value and the number
/// of bytes it took, or `None` if `buf` ends early or the varint is longer
/// than 10 bytes or overflows 64 bits.
pub(crate) fn read_u64(buf: &[u8]) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    for (i, &byte) in buf.iter().enumerate().take(10) {
        let bits = u64::from(byte & 0x7f);
        if i == 9 && byte > 1 {
            return None; // would overflow 64 bits
        }
        value |= bits << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// Reads a varint32 from the front of `buf` (at most 5 bytes, value must fit
/// 32 bits).
pub(crate) fn read_u32(buf: &[u8]) -> Option<(u32, usize)> {
    let mut value: u32 = 0;
    for (i, &byte) in buf.iter().enumerate().take(5) {
        let bits = u32::from(byte & 0x7f);
        if i == 4 && byte > 0x0f {
            return None;
        }
        value |= bits << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// Appends `value` as a varint64.
pub(crate) fn write_u64(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A cursor over a byte slice for sequential parsing of varints and bytes.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// Starts at the beginning of `buf`.
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes not yet consumed.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Reads one varint64.
    pub(crate) fn u64(&mut self) -> Option<u64> {
        let (v, n) = read_u64(&self.buf[self.pos..])?;
        self.pos += n;
        Some(v)
    }

    /// Reads one varint32.
    pub(crate) fn u32(&mut self) -> Option<u32> {
        let (v, n) = read_u32(&self.buf[self.pos..])?;
        self.pos += n;
        Some(v)
    }

    /// Reads one byte.
    pub(crate) fn byte(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// Reads `n` bytes.
    pub(crate) fn bytes(&mut self, n: u64) -> Option<&'a [u8]> {
        let n = usize::try_from(n).ok()?;
        if n > self.remaining() {
            return None;
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for v in [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX - 1, u64::MAX] {
            let mut b = Vec::new();
            write_u64(&mut b, v);
            assert_eq!(read_u64(&b), Some((v, b.len())));
        }
    }

    #[test]
    fn rejects_overlong_and_truncated() {
        assert_eq!(read_u64(&[0x80]), None);
        assert_eq!(read_u64(&[0xff; 11]), None);
        assert_eq!(
            read_u64(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]),
            None
        );
        assert_eq!(read_u32(&[0xff, 0xff, 0xff, 0xff, 0x10]), None);
        assert_eq!(
            read_u32(&[0xff, 0xff, 0xff, 0xff, 0x0f]),
            Some((u32::MAX, 5))
        );
    }
}

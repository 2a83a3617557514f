//! [`Rope`]: a serialization held as pieces, so that large values stay shared slices of their
//! source (a mapped file, a decoded chunk) or lazy Riegeli records, and hashing streams.

use crate::Result;
use bytes::Bytes;
use unbound_wire::{Payload, RecordRef};

use super::farmhash::Fingerprint64;

/// Values at least this large are shared, not copied.
const SHARE_AT: usize = 4 << 10;

/// One piece of a [`Rope`].
enum Part {
    /// Bytes in memory (copied small pieces, or a shared slice of a large value).
    Bytes(Bytes),
    /// A record of a `.cpb`, read when hashed or written.
    Record(RecordRef),
}

/// A byte string built from pieces: small writes are gathered into owned buffers, large values
/// are kept by reference. Appending a finished rope moves its pieces without copying large
/// ones, so nested messages can be serialized bottom-up (their lengths are known before their
/// length prefixes are written).
#[derive(Default)]
pub struct Rope {
    parts: Vec<Part>,
    pending: Vec<u8>,
    len: u64,
}

impl Rope {
    /// An empty rope.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty rope with room for `capacity` bytes of small writes.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            parts: Vec::new(),
            pending: Vec::with_capacity(capacity),
            len: 0,
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the rope is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends a copy of `bytes`.
    pub fn put(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        self.len += bytes.len() as u64;
    }

    /// Appends a varint.
    pub fn put_varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.pending.push((value as u8) | 0x80);
            value >>= 7;
            self.len += 1;
        }
        self.pending.push(value as u8);
        self.len += 1;
    }

    /// Appends a field key.
    pub fn put_key(&mut self, number: u32, wire_type: u8) {
        self.put_varint((u64::from(number) << 3) | u64::from(wire_type));
    }

    /// Appends a value: copied when small, shared or referenced when large.
    pub fn put_payload(&mut self, payload: &Payload) {
        match payload {
            Payload::Inline(b) if b.len() < SHARE_AT => self.put(b),
            Payload::Inline(b) => self.push_part(Part::Bytes(b.clone()), b.len() as u64),
            Payload::Record(r) => self.push_part(Part::Record(r.clone()), r.len),
        }
    }

    /// Appends `buf[start..end]`: copied when small, shared when large.
    pub fn put_shared(&mut self, buf: &Bytes, start: usize, end: usize) {
        if end - start < SHARE_AT {
            self.put(&buf[start..end]);
        } else {
            self.push_part(Part::Bytes(buf.slice(start..end)), (end - start) as u64);
        }
    }

    fn push_part(&mut self, part: Part, len: u64) {
        self.flush();
        self.parts.push(part);
        self.len += len;
    }

    fn flush(&mut self) {
        if !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            self.parts.push(Part::Bytes(Bytes::from(pending)));
        }
    }

    /// Appends `other`, moving its pieces.
    pub fn append(&mut self, mut other: Rope) {
        self.len += other.len;
        if other.parts.is_empty() {
            self.pending.extend_from_slice(&other.pending);
            return;
        }
        self.flush();
        self.parts.append(&mut other.parts);
        self.pending = other.pending;
    }

    /// Calls `f` with each piece in order (reading lazy records one at a time).
    pub fn for_each(&self, mut f: impl FnMut(&[u8])) -> Result<()> {
        for part in &self.parts {
            match part {
                Part::Bytes(b) => f(b),
                Part::Record(r) => f(&Payload::Record(r.clone()).bytes()?),
            }
        }
        f(&self.pending);
        Ok(())
    }

    /// FarmHash `Fingerprint64` of the bytes.
    pub fn fingerprint64(&self) -> Result<u64> {
        let mut h = Fingerprint64::new();
        self.for_each(|b| h.update(b))?;
        Ok(h.finish())
    }

    /// The bytes, in one buffer.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len.min(1 << 30) as usize);
        self.for_each(|b| out.extend_from_slice(b))?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appending_keeps_order_and_length() {
        let big = Bytes::from(vec![7u8; SHARE_AT + 1]);
        let mut child = Rope::new();
        child.put(b"ab");
        child.put_payload(&Payload::Inline(big.clone()));
        child.put(b"cd");
        let mut parent = Rope::new();
        parent.put_varint(300);
        parent.append(child);
        parent.put(b"e");
        let mut want = vec![0xac, 0x02, b'a', b'b'];
        want.extend_from_slice(&big);
        want.extend_from_slice(b"cde");
        assert_eq!(parent.len(), want.len() as u64);
        assert_eq!(parent.to_vec().unwrap(), want);
        assert_eq!(
            parent.fingerprint64().unwrap(),
            super::super::farmhash::fingerprint64(&want)
        );
    }
}

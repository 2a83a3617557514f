//! [`Rope`]: a serialization held as pieces, so that large values stay shared slices of their
//! source (a mapped file, a decoded chunk) or lazy Riegeli records, and hashing streams.
//!
//! A rope made with [`Rope::hashing`] keeps nothing: each piece goes into the hash as it is
//! appended. The outermost serialization a fingerprint hashes needs no length prefix, so it
//! never has to be held; held, a graph of millions of small nodes was copied whole into a
//! buffer as large as the model (issue 15: a fifth of a `.pb` fingerprint was that copy and
//! the page faults of its growth).

use crate::Result;
use bytes::Bytes;
use unbound_wire::{Payload, RecordRef};

use super::farmhash::Fingerprint64;

/// Values at least this large are shared, not copied.
const SHARE_AT: usize = 4 << 10;

/// A hashing rope feeds its small writes to the hash once this many have gathered.
const HASH_BATCH: usize = 64 << 10;

/// Any other rope moves its small writes behind its parts, as one piece, once this many have
/// gathered.
const HELD_BATCH: usize = 1 << 20;

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
    /// Set for a [`Rope::hashing`] rope: the hash of every byte appended before `pending`
    /// (`parts` then stays empty).
    hash: Option<Box<Fingerprint64>>,
    /// A hashing rope's first failure to read a record, reported by [`Rope::fingerprint64`].
    failed: Option<crate::SavedModelError>,
    /// A hashing rope's run of fields appended as they lie in one buffer
    /// ([`Rope::put_field_in_place`]), hashed once it ends: `buf[start..end]`. While it is
    /// open, nothing is pending.
    run: Option<(Bytes, usize, usize)>,
}

impl Rope {
    /// An empty rope.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty rope with room for `capacity` bytes of small writes.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            pending: Vec::with_capacity(capacity),
            ..Self::default()
        }
    }

    /// A rope that hashes its bytes as they are appended instead of holding them: only
    /// [`Rope::fingerprint64`] and [`Rope::len`] can be asked of it.
    pub fn hashing() -> Self {
        Self {
            pending: Vec::with_capacity(HASH_BATCH),
            hash: Some(Box::default()),
            ..Self::default()
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
        self.end_run();
        self.pending.extend_from_slice(bytes);
        self.len += bytes.len() as u64;
        self.hash_pending_batch();
    }

    /// Appends a varint.
    pub fn put_varint(&mut self, mut value: u64) {
        self.end_run();
        while value >= 0x80 {
            self.pending.push((value as u8) | 0x80);
            value >>= 7;
            self.len += 1;
        }
        self.pending.push(value as u8);
        self.len += 1;
        self.hash_pending_batch();
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

    /// Appends a length-delimited field: the key of field `number`, the length, and the value
    /// `buf[start..end]`. In a hashing rope, when the key and length lie in `buf` just before
    /// the value (a field as it was parsed from there), the field is not copied: it joins a run
    /// of such fields, hashed from `buf` in one piece when the run ends (issue 15: the nodes of
    /// a graph of millions of them, taken as they are, were copied a few bytes at a time).
    pub fn put_field_in_place(&mut self, number: u32, buf: &Bytes, start: usize, end: usize) {
        let len = (end - start) as u64;
        if self.hash.is_some() {
            if let Some(head_start) = head_before(buf, start, number, len) {
                match &mut self.run {
                    Some((run_buf, _, run_end))
                        if *run_end == head_start && run_buf.as_ptr() == buf.as_ptr() =>
                    {
                        *run_end = end;
                    }
                    _ => {
                        self.end_run();
                        self.flush();
                        self.run = Some((buf.clone(), head_start, end));
                    }
                }
                self.len += (end - head_start) as u64;
                return;
            }
        }
        self.put_key(number, 2);
        self.put_varint(len);
        self.put_shared(buf, start, end);
    }

    /// Hashes the open run of fields in place, if any.
    fn end_run(&mut self) {
        if let Some((buf, start, end)) = self.run.take() {
            if let Some(hash) = &mut self.hash {
                hash.update(&buf[start..end]);
            }
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
        self.end_run();
        self.flush();
        self.len += len;
        let Some(hash) = &mut self.hash else {
            self.parts.push(part);
            return;
        };
        match part {
            Part::Bytes(b) => hash.update(&b),
            Part::Record(r) => match Payload::Record(r).bytes() {
                Ok(b) => hash.update(&b),
                Err(e) => {
                    self.failed.get_or_insert(e.into());
                }
            },
        }
    }

    /// Moves the small writes gathered so far behind the parts (into the hash, for a hashing
    /// rope).
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        match &mut self.hash {
            Some(hash) => {
                hash.update(&self.pending);
                self.pending.clear();
            }
            None => {
                let pending = std::mem::take(&mut self.pending);
                self.parts.push(Part::Bytes(Bytes::from(pending)));
            }
        }
    }

    /// Once a batch of small writes has gathered, hashes them (a hashing rope) or moves them
    /// behind the parts as one piece: a rope holding a nested graph of millions of small nodes
    /// grew one buffer by doubling, copying it again at each step (issue 15).
    fn hash_pending_batch(&mut self) {
        let batch = if self.hash.is_some() {
            HASH_BATCH
        } else {
            HELD_BATCH
        };
        if self.pending.len() >= batch {
            self.flush();
            if self.hash.is_none() {
                self.pending = Vec::with_capacity(HELD_BATCH + HELD_BATCH / 8);
            }
        }
    }

    /// Appends `other`, moving its pieces.
    pub fn append(&mut self, mut other: Rope) {
        self.end_run();
        debug_assert!(
            other.hash.is_none(),
            "a hashing rope holds no pieces to move"
        );
        if other.parts.is_empty() {
            self.len += other.len;
            self.pending.extend_from_slice(&other.pending);
            self.hash_pending_batch();
            return;
        }
        if self.hash.is_some() {
            for part in other.parts.drain(..) {
                let len = part.len();
                self.push_part(part, len);
            }
            self.len += other.pending.len() as u64;
            self.pending.extend_from_slice(&other.pending);
            self.hash_pending_batch();
            return;
        }
        self.len += other.len;
        self.flush();
        self.parts.append(&mut other.parts);
        self.pending = other.pending;
    }

    /// Calls `f` with each piece in order (reading lazy records one at a time). A hashing
    /// rope holds no pieces: asking it for them is an error.
    pub fn for_each(&self, mut f: impl FnMut(&[u8])) -> Result<()> {
        if self.hash.is_some() {
            return Err(super::model_fault(
                "internal: the bytes of a hashing rope were asked for",
            ));
        }
        self.for_each_held(&mut f)
    }

    fn for_each_held(&self, f: &mut impl FnMut(&[u8])) -> Result<()> {
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
        if let Some(e) = &self.failed {
            return Err(super::model_fault(e.to_string()));
        }
        let mut h = match &self.hash {
            Some(hash) => (**hash).clone(),
            None => Fingerprint64::new(),
        };
        if let Some((buf, start, end)) = &self.run {
            h.update(&buf[*start..*end]);
        }
        self.for_each_held(&mut |b| h.update(b))?;
        Ok(h.finish())
    }

    /// [`Rope::fingerprint64`], consuming the rope: a hashing rope's failure to read a record
    /// comes back as it was.
    pub fn finish(mut self) -> Result<u64> {
        match self.failed.take() {
            Some(e) => Err(e),
            None => self.fingerprint64(),
        }
    }

    /// The bytes, in one buffer.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len.min(1 << 30) as usize);
        self.for_each(|b| out.extend_from_slice(b))?;
        Ok(out)
    }
}

/// Where the key and the length of length-delimited field `number` with a value of `len`
/// bytes start in `buf`, when they lie there just before `value_start` (as minimal varints, as
/// written).
#[inline]
fn head_before(buf: &[u8], value_start: usize, number: u32, len: u64) -> Option<usize> {
    let (head, n) = unbound_wire::codec::len_field_head(number, len);
    let start = value_start.checked_sub(n)?;
    let found = buf.get(start..value_start)?;
    found
        .iter()
        .zip(&head[..n])
        .all(|(a, b)| a == b)
        .then_some(start)
}

impl Part {
    /// Length in bytes.
    fn len(&self) -> u64 {
        match self {
            Part::Bytes(b) => b.len() as u64,
            Part::Record(r) => r.len,
        }
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

    /// A hashing rope hashes what a held rope holds, however the pieces came: small writes
    /// across batch boundaries, shared slices, appended ropes.
    #[test]
    fn a_hashing_rope_hashes_what_a_held_rope_holds() {
        let big = Bytes::from((0..3 * HASH_BATCH).map(|i| i as u8).collect::<Vec<_>>());
        let build = |rope: &mut Rope| {
            for i in 0..HASH_BATCH / 3 {
                rope.put_varint(i as u64 * 131);
            }
            rope.put_shared(&big, 5, big.len() - 5);
            let mut child = Rope::new();
            child.put(b"child");
            child.put_shared(&big, 0, SHARE_AT + 9);
            child.put_key(7, 2);
            rope.append(child);
            rope.put(&big[..HASH_BATCH + 3]);
        };
        let (mut held, mut hashing) = (Rope::new(), Rope::hashing());
        build(&mut held);
        build(&mut hashing);
        assert_eq!(held.len(), hashing.len());
        let want = super::super::farmhash::fingerprint64(&held.to_vec().unwrap());
        assert_eq!(hashing.fingerprint64().unwrap(), want);
        assert_eq!(hashing.finish().unwrap(), want);
        assert!(Rope::hashing().for_each(|_| {}).is_err());
    }

    /// Fields put in place hash as the same fields copied: runs of consecutive fields of one
    /// buffer, a field whose key or length does not lie before it, a field of another buffer,
    /// and other writes between them.
    #[test]
    fn fields_in_place_hash_as_copied_fields() {
        // Three fields as a parser finds them: 1: "abc", 1: 300 bytes, 2: "xy".
        let mut serialized = vec![0x0a, 3, b'a', b'b', b'c', 0x0a, 0xac, 0x02];
        serialized.extend((0..300).map(|i| i as u8));
        serialized.extend([0x12, 2, b'x', b'y']);
        let buf = Bytes::from(serialized);
        let other = Bytes::from_static(b"\x0a\x01q");
        let build = |rope: &mut Rope| {
            rope.put_field_in_place(1, &buf, 2, 5);
            rope.put_field_in_place(1, &buf, 8, 308);
            rope.put_field_in_place(2, &buf, 310, 312);
            // In place, but not where the run ends.
            rope.put_field_in_place(1, &buf, 2, 5);
            // Its key does not lie before it: field 3, not 1.
            rope.put_field_in_place(3, &buf, 2, 5);
            rope.put_field_in_place(1, &other, 2, 3);
            rope.put_varint(9);
            rope.put_field_in_place(1, &buf, 2, 5);
        };
        let (mut held, mut hashing) = (Rope::new(), Rope::hashing());
        build(&mut held);
        build(&mut hashing);
        let mut want = buf.to_vec();
        want.extend([
            0x0a, 3, b'a', b'b', b'c', 0x1a, 3, b'a', b'b', b'c', 0x0a, 1, b'q', 9, 0x0a, 3, b'a',
            b'b', b'c',
        ]);
        assert_eq!(held.to_vec().unwrap(), want);
        assert_eq!(hashing.len(), want.len() as u64);
        let print = super::super::farmhash::fingerprint64(&want);
        assert_eq!(hashing.fingerprint64().unwrap(), print);
        assert_eq!(hashing.finish().unwrap(), print);
    }
}

//! [`FieldsApart`]: the top-level fields of a message streamed in pieces, all but one
//! length-delimited field number set apart as they come.
//!
//! A graph's chunk is mostly its nodes; what else it holds (a library, versions, unknown
//! fields) is small and must be encoded apart from them. A merge that streams the chunk (a
//! chunk of 64 MiB or more is never held whole) hands its bytes here as they go by, so the
//! few other fields are known without decoding the chunk again (issue 29: that second decode
//! was a fifth of a `merge` of a non-canonical model of 3M nodes).
//!
//! The fields are read exactly as [`crate::codec::read_field`] reads them (padded varints
//! included), and kept byte for byte. Anything it does not read as a run of whole fields (a
//! group, an invalid key, a value cut by the end, more kept bytes than the limit) gives up:
//! [`FieldsApart::finish`] returns `None`, and the caller reads the message whole, where the
//! fault is reported in its usual words.

use crate::codec::{read_field, WireType, MAX_FIELD_NUMBER};

/// What [`FieldsApart`] sets apart of `message` (with no limit), read whole with
/// [`read_field`]: every field but the length-delimited ones numbered `skip`, byte for byte;
/// `None` where `read_field` fails or meets a group. For a caller holding the message whole,
/// and the reference the streaming reader is tested against.
pub fn fields_apart_of(message: &[u8], skip: u32) -> Option<Vec<u8>> {
    let mut kept = Vec::new();
    let mut pos = 0;
    while pos < message.len() {
        let at = pos;
        let field = read_field(message, &mut pos).ok()?;
        if matches!(field.wire_type, WireType::StartGroup | WireType::EndGroup) {
            return None;
        }
        if !(field.number == skip && field.wire_type == WireType::Len) {
            kept.extend_from_slice(&message[at..pos]);
        }
    }
    Some(kept)
}

/// Where the reader is in the current field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Reading a key varint (the bytes so far are in `head`).
    Key,
    /// Reading the varint value of a wire type 0 field.
    Varint,
    /// Reading the length of a length-delimited field.
    Length,
    /// Inside a value of this many more bytes: kept, or skipped.
    Value { left: u64, keep: bool },
    /// Given up.
    Failed,
}

/// The top-level fields of a message streamed in pieces ([`std::io::Write`]), every field
/// kept as read (key, length and value bytes) but the length-delimited fields numbered
/// `skip`. See the module's documentation.
#[derive(Debug)]
pub struct FieldsApart {
    skip: u32,
    limit: usize,
    state: State,
    /// The bytes of the current field's key and length (or varint value) so far.
    head: Vec<u8>,
    /// Where the current varint starts in `head`.
    varint_at: usize,
    kept: Vec<u8>,
    /// More than `limit` bytes were to be kept: given up.
    over_limit: bool,
}

impl FieldsApart {
    /// A reader that sets apart every field but the length-delimited ones numbered `skip`,
    /// and gives up past `limit` bytes kept.
    pub fn new(skip: u32, limit: usize) -> Self {
        Self {
            skip,
            limit,
            state: State::Key,
            head: Vec::new(),
            varint_at: 0,
            kept: Vec::new(),
            over_limit: false,
        }
    }

    /// Reads the next piece of the message.
    pub fn update(&mut self, mut data: &[u8]) {
        while !data.is_empty() && !self.over_limit {
            match self.state {
                State::Failed => return,
                State::Value { left, keep } => {
                    let n = data.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    if keep {
                        self.keep(&data[..n]);
                    }
                    data = &data[n..];
                    self.state = match left - n as u64 {
                        0 => State::Key,
                        left => State::Value { left, keep },
                    };
                    if self.state == State::Key {
                        self.head.clear();
                        self.varint_at = 0;
                    }
                }
                State::Key | State::Varint | State::Length => {
                    let byte = data[0];
                    data = &data[1..];
                    self.head.push(byte);
                    if self.head.len() - self.varint_at > 10 {
                        self.state = State::Failed;
                        return;
                    }
                    if byte & 0x80 == 0 {
                        self.varint_done();
                    }
                }
            }
        }
    }

    /// The fields set apart, or `None` when the reader gave up or the message ended inside a
    /// field.
    pub fn finish(self) -> Option<Vec<u8>> {
        (self.state == State::Key && self.head.is_empty() && !self.over_limit).then_some(self.kept)
    }

    /// A varint of `head` (from `varint_at`) has ended: the key, a varint value or a length.
    fn varint_done(&mut self) {
        let Some(value) = varint_value(&self.head[self.varint_at..]) else {
            self.state = State::Failed;
            return;
        };
        match self.state {
            State::Key => {
                let (number, wire) = (value >> 3, value & 7);
                if number == 0 || number > u64::from(MAX_FIELD_NUMBER) {
                    self.state = State::Failed;
                    return;
                }
                self.varint_at = self.head.len();
                self.state = match wire {
                    0 => State::Varint,
                    1 => self.value_kept(8),
                    2 => State::Length,
                    5 => self.value_kept(4),
                    // Groups (3, 4) and invalid wire types: read whole by the caller.
                    _ => State::Failed,
                };
            }
            State::Varint => {
                let head = std::mem::take(&mut self.head);
                self.keep(&head);
                self.head = head;
                self.head.clear();
                self.varint_at = 0;
                self.state = State::Key;
            }
            State::Length => {
                let key = varint_value(&self.head[..self.varint_at]).unwrap_or(0);
                let keep = !(key >> 3 == u64::from(self.skip) && key & 7 == 2);
                if keep {
                    let head = std::mem::take(&mut self.head);
                    self.keep(&head);
                    self.head = head;
                }
                self.state = if value == 0 {
                    self.head.clear();
                    self.varint_at = 0;
                    State::Key
                } else {
                    State::Value { left: value, keep }
                };
            }
            State::Value { .. } | State::Failed => {}
        }
    }

    /// The state after a key of a fixed-width value of `width` bytes: kept with its key.
    fn value_kept(&mut self, width: u64) -> State {
        let head = std::mem::take(&mut self.head);
        self.keep(&head);
        self.head = head;
        State::Value {
            left: width,
            keep: true,
        }
    }

    fn keep(&mut self, bytes: &[u8]) {
        if self.kept.len() + bytes.len() > self.limit {
            self.over_limit = true;
            return;
        }
        self.kept.extend_from_slice(bytes);
    }
}

impl std::io::Write for FieldsApart {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.update(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The value of the varint `bytes` (its last byte without the continuation bit), as
/// [`crate::codec::read_varint`] reads it; `None` past 64 bits.
fn varint_value(bytes: &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for (i, &byte) in bytes.iter().enumerate() {
        let shift = 7 * i as u32;
        if shift == 63 && byte > 1 {
            return None;
        }
        if shift > 63 {
            return None;
        }
        value |= u64::from(byte & 0x7f) << shift;
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Node fields (1), padded keys and lengths, varints, fixed values, an empty field, an
    /// unknown field of a large number, and field 1 as a varint (kept: another wire type).
    fn message() -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&[0x0a, 0x03, b'a', b'b', b'c']); // node
        m.extend_from_slice(&[0x8a, 0x80, 0x00, 0x82, 0x80, 0x00, b'x', b'y']); // padded node
        m.extend_from_slice(&[0x12, 0x02, 0x08, 0x01]); // library
        m.extend_from_slice(&[0x08, 0x96, 0x01]); // field 1, a varint
        m.extend_from_slice(&[
            0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ]);
        m.extend_from_slice(&[0x21, 1, 2, 3, 4, 5, 6, 7, 8]); // fixed64
        m.extend_from_slice(&[0x2d, 1, 2, 3, 4]); // fixed32
        m.extend_from_slice(&[0x22, 0x00]); // empty
        m.extend_from_slice(&[0xfa, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x09]); // field 2^29-1
        m.extend_from_slice(&[0x0a, 0x00]); // empty node
        m
    }

    #[test]
    fn every_cut_of_the_stream_sets_apart_what_a_whole_read_does() {
        let m = message();
        let expected = fields_apart_of(&m, 1).unwrap();
        assert!(expected.len() < m.len() - 10 && !expected.is_empty());
        for cut in 0..=m.len() {
            for second in cut..=m.len() {
                let mut apart = FieldsApart::new(1, usize::MAX);
                apart.update(&m[..cut]);
                apart.update(&m[cut..second]);
                apart.update(&m[second..]);
                assert_eq!(
                    apart.finish(),
                    Some(expected.clone()),
                    "cuts {cut} {second}"
                );
            }
        }
        // One byte at a time.
        let mut apart = FieldsApart::new(1, usize::MAX);
        for byte in &m {
            apart.update(std::slice::from_ref(byte));
        }
        assert_eq!(apart.finish(), Some(expected));
    }

    #[test]
    fn what_a_whole_read_refuses_or_a_group_gives_up() {
        let cases: [&[u8]; 7] = [
            &[0x0a, 0x05, 1, 2], // a value cut by the end
            &[0x0a],             // a key alone
            &[0x08],             // a varint missing
            &[0x00, 0x01],       // field number 0
            &[0x0e, 0x01],       // wire type 6
            &[0x0b, 0x0c],       // a group
            &[
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ], // 11 bytes
        ];
        for case in cases {
            let mut apart = FieldsApart::new(1, usize::MAX);
            apart.update(case);
            assert_eq!(apart.finish(), None, "{case:?}");
        }
        // A varint past 64 bits.
        let mut apart = FieldsApart::new(1, usize::MAX);
        apart.update(&[
            0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02,
        ]);
        assert_eq!(apart.finish(), None);
    }

    #[test]
    fn more_kept_than_the_limit_gives_up() {
        let m = message();
        let kept = fields_apart_of(&m, 1).unwrap().len();
        let mut apart = FieldsApart::new(1, kept - 1);
        apart.update(&m);
        assert_eq!(apart.finish(), None);
        let mut apart = FieldsApart::new(1, kept);
        apart.update(&m);
        assert_eq!(apart.finish().map(|k| k.len()), Some(kept));
    }

    /// Random bytes (mostly not a message) and random runs of fields, cut at random places:
    /// set apart exactly when a whole read reads them, and the same bytes.
    #[test]
    fn random_streams_agree_with_a_whole_read() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..3000 {
            let mut m = Vec::new();
            if round % 3 == 0 {
                for _ in 0..next() % 40 {
                    m.push(next() as u8);
                }
            } else {
                for _ in 0..next() % 12 {
                    let number = 1 + next() % 4;
                    match next() % 4 {
                        0 => {
                            m.extend_from_slice(&[(number << 3) as u8, (next() % 200) as u8 & 0x7f])
                        }
                        1 => m.extend_from_slice(&[(number << 3 | 5) as u8, 1, 2, 3, 4]),
                        _ => {
                            let len = next() % 6;
                            m.extend_from_slice(&[(number << 3 | 2) as u8, len as u8]);
                            m.extend((0..len).map(|_| next() as u8));
                        }
                    }
                }
                if next() % 5 == 0 && !m.is_empty() {
                    let at = (next() as usize) % m.len();
                    m[at] = next() as u8;
                }
            }
            let mut apart = FieldsApart::new(1, usize::MAX);
            let mut rest = &m[..];
            while !rest.is_empty() {
                let n = 1 + (next() as usize) % rest.len();
                apart.update(&rest[..n]);
                rest = &rest[n..];
            }
            assert_eq!(apart.finish(), fields_apart_of(&m, 1), "{m:?}");
        }
    }
}

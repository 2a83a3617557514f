//! [`WireMessage`]: a protobuf message held at the wire level.
//!
//! A message is its fields in wire order. Length-delimited values stay as byte slices
//! ([`Payload`]) until something needs to look inside them; only then are they expanded into a
//! nested [`WireMessage`]. This keeps every field the schema does not know (losslessness), lets
//! multi-gigabyte `bytes` values stay slices of a mapped file or lazy references to Riegeli
//! records (zero copy), and makes merging a chunk into a message an append of its fields, which
//! is exactly protobuf's `MergeFromString` semantics.

use std::io::Write;
use std::sync::Arc;

use bytes::Bytes;
use prost_reflect::MessageDescriptor;

use unbound_io::IoError;

use crate::codec::{self, key_len, put_key, put_varint, varint_len, WireType};
use crate::error::{DecodeError, Result, WireError};
use crate::source::RecordSource;

/// A length-delimited value that has not been expanded.
///
/// Kept as small as [`Bytes`] (32 bytes): graphs hold millions of these.
#[derive(Clone, Debug)]
pub enum Payload {
    /// Bytes in memory (often a slice of a mapped file or of a decompressed chunk).
    Inline(Bytes),
    /// A record of a Riegeli file, read only when the value is written or inspected.
    Record(RecordRef),
}

/// A lazy reference to one record of a Riegeli file.
#[derive(Clone, Debug)]
pub struct RecordRef {
    /// The file. A thin pointer on purpose: a fat `Arc<dyn RecordSource>` would make
    /// `RecordRef` 32 bytes, too large to share [`Payload`]'s space with `Bytes`, and every
    /// [`WireField`] of every message 8 bytes larger (48 MB more on a million-node graph).
    pub reader: Arc<Box<dyn RecordSource>>,
    /// Numeric record position.
    pub position: u64,
    /// Record length, known without decompressing it.
    pub len: u64,
}

impl Payload {
    /// Length of the value in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Payload::Inline(b) => b.len() as u64,
            Payload::Record(r) => r.len,
        }
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value's bytes, reading the record if it is lazy.
    pub fn bytes(&self) -> Result<Bytes> {
        match self {
            Payload::Inline(b) => Ok(b.clone()),
            Payload::Record(r) => {
                let bytes = r
                    .reader
                    .read_record(r.position)
                    .map_err(WireError::Source)?;
                check_record_len(r, bytes.len() as u64)?;
                Ok(bytes)
            }
        }
    }

    /// Writes the value's bytes to `out`, streaming lazy records.
    pub fn write_to(&self, out: &mut dyn Write) -> Result<()> {
        match self {
            Payload::Inline(b) => out
                .write_all(b)
                .map_err(|e| IoError::os("<output>", e).into()),
            Payload::Record(r) => {
                let written = r
                    .reader
                    .copy_record_to(r.position, out)
                    .map_err(WireError::Source)?;
                check_record_len(r, written)
            }
        }
    }
}

/// Fails unless a record turned out as long as its chunk said.
pub fn check_record_len(r: &RecordRef, actual: u64) -> Result<()> {
    if actual == r.len {
        return Ok(());
    }
    Err(WireError::RecordLength {
        source_name: r.reader.name().to_string(),
        position: r.position,
        actual,
        expected: r.len,
    })
}

/// One field occurrence.
#[derive(Clone, Debug)]
pub struct WireField {
    /// Field number.
    pub number: u32,
    /// The value.
    pub value: WireValue,
}

/// A field value at the wire level.
#[derive(Clone, Debug)]
pub enum WireValue {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 5.
    Fixed32(u32),
    /// Wire type 2, not expanded.
    Bytes(Payload),
    /// Wire type 2, expanded into a message.
    Message(WireMessage),
    /// Wire types 3/4: a group's raw contents, passed through untouched.
    Group(Bytes),
}

/// A protobuf message as an ordered list of field occurrences. See the module docs.
#[derive(Clone, Debug, Default)]
pub struct WireMessage {
    /// Field occurrences in wire order.
    pub fields: Vec<WireField>,
    /// The message type, when known. Used to write known fields in field-number order like
    /// protobuf's own serializers do.
    pub descriptor: Option<MessageDescriptor>,
}

impl WireMessage {
    /// An empty message of the given type.
    pub fn new(descriptor: Option<MessageDescriptor>) -> Self {
        Self {
            fields: Vec::new(),
            descriptor,
        }
    }

    /// Parses one level of `bytes`; nested messages stay unexpanded slices of `bytes`.
    pub fn parse(
        bytes: &Bytes,
        descriptor: Option<MessageDescriptor>,
    ) -> Result<Self, DecodeError> {
        let mut message = Self::new(descriptor);
        message.append_bytes(bytes)?;
        Ok(message)
    }

    /// Protobuf `MergeFromString`: appends the fields encoded in `bytes`.
    pub fn append_bytes(&mut self, bytes: &Bytes) -> Result<(), DecodeError> {
        codec::scan(bytes, |f| {
            let value = match f.wire_type {
                WireType::Varint => WireValue::Varint(f.varint),
                WireType::Fixed64 => {
                    let mut le = [0u8; 8];
                    le.copy_from_slice(&bytes[f.start..f.end]);
                    WireValue::Fixed64(u64::from_le_bytes(le))
                }
                WireType::Fixed32 => {
                    let mut le = [0u8; 4];
                    le.copy_from_slice(&bytes[f.start..f.end]);
                    WireValue::Fixed32(u32::from_le_bytes(le))
                }
                WireType::Len => WireValue::Bytes(Payload::Inline(bytes.slice(f.start..f.end))),
                WireType::StartGroup => WireValue::Group(bytes.slice(f.start..f.end)),
                WireType::EndGroup => unreachable!("scan rejects stray end-group keys"),
            };
            self.fields.push(WireField {
                number: f.number,
                value,
            });
            Ok(())
        })
    }

    /// Protobuf `MergeFrom`: appends the fields of `other`.
    pub fn append(&mut self, other: WireMessage) {
        self.fields.extend(other.fields);
    }

    /// Size of the serialized message.
    pub fn encoded_len(&self) -> u64 {
        self.fields.iter().map(WireField::encoded_len).sum()
    }

    /// Serializes into `out`. Lazy record payloads are streamed from their files.
    pub fn write_to(&self, out: &mut dyn Write) -> Result<()> {
        self.write_with(out, &mut |record, out| {
            Payload::Record(record.clone()).write_to(out)
        })
    }

    /// Lazy record payloads in the order [`WireMessage::write_to`] writes them.
    pub fn lazy_records(&self) -> Vec<&RecordRef> {
        let mut out = Vec::new();
        self.collect_records(&mut out);
        out
    }

    fn collect_records<'a>(&'a self, out: &mut Vec<&'a RecordRef>) {
        for field in self.write_order() {
            match &field.value {
                WireValue::Bytes(Payload::Record(r)) => out.push(r),
                WireValue::Message(m) => m.collect_records(out),
                _ => {}
            }
        }
    }

    /// Serializes into `out`, handing each lazy record payload to `write_record`, which must
    /// write exactly its bytes (used to decode records in parallel ahead of the writer).
    pub fn write_with(
        &self,
        out: &mut dyn Write,
        write_record: &mut dyn FnMut(&RecordRef, &mut dyn Write) -> Result<()>,
    ) -> Result<()> {
        let mut head = Vec::with_capacity(16);
        for field in self.write_order() {
            head.clear();
            field.write_head(&mut head);
            out.write_all(&head)
                .map_err(|e| IoError::os("<output>", e))?;
            match &field.value {
                WireValue::Bytes(Payload::Record(r)) => write_record(r, out)?,
                WireValue::Bytes(p) => p.write_to(out)?,
                WireValue::Message(m) => m.write_with(out, write_record)?,
                WireValue::Group(g) => {
                    out.write_all(g).map_err(|e| IoError::os("<output>", e))?;
                    head.clear();
                    put_key(field.number, WireType::EndGroup, &mut head);
                    out.write_all(&head)
                        .map_err(|e| IoError::os("<output>", e))?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The serialization as a list of byte segments: small pieces (keys, lengths, scalars) are
    /// gathered into owned buffers, large values are shared slices of their source (a mapped
    /// file, a decoded chunk), so writing a multi-gigabyte message copies nothing up front.
    pub fn to_segments(&self) -> Result<Vec<Bytes>> {
        self.to_segments_within(&[])
    }

    /// [`WireMessage::to_segments`], where every run of fields that lies, exactly as it is
    /// written, in one of `sources` (the buffers the message was parsed from) is one shared
    /// slice of that buffer, keys and lengths included: a chunk of consecutive graph nodes is
    /// then the slice of the model file that holds them, never copied (issue 15: copying
    /// millions of small nodes into buffers was a sixth of a split). The bytes before a value
    /// are compared with the key and length it is written with before they are shared, so the
    /// segments always join into exactly the serialization.
    pub fn to_segments_within(&self, sources: &[Bytes]) -> Result<Vec<Bytes>> {
        let mut seg = Segments {
            sources,
            ..Segments::default()
        };
        self.write_segments(&mut seg)?;
        seg.flush();
        Ok(seg.parts)
    }

    fn write_segments(&self, seg: &mut Segments) -> Result<()> {
        for field in self.write_order() {
            match &field.value {
                // Borrowed, not cloned: a clone is an atomic count on the source buffer's
                // shared counter, per field, contended by every thread reading the source.
                WireValue::Bytes(Payload::Inline(value)) => seg.push_field(field, value),
                WireValue::Bytes(p) => {
                    let value = p.bytes()?;
                    seg.push_field(field, &value);
                }
                WireValue::Message(m) => {
                    seg.end_run();
                    field.write_head(&mut seg.pending);
                    m.write_segments(seg)?;
                }
                WireValue::Group(g) => {
                    seg.end_run();
                    field.write_head(&mut seg.pending);
                    seg.pending.extend_from_slice(g);
                    put_key(field.number, WireType::EndGroup, &mut seg.pending);
                }
                _ => {
                    seg.end_run();
                    field.write_head(&mut seg.pending);
                }
            }
        }
        Ok(())
    }

    /// Serializes into a new buffer (reading any lazy records).
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.encoded_len().min(1 << 30) as usize);
        self.write_to(&mut out)?;
        Ok(out)
    }

    /// Whether [`WireMessage::to_vec`] writes the fields in the order they are held (known
    /// fields by ascending number, then unknown ones): parsing what it writes then gives them
    /// back in that order. Checked without allocating, a field number at a time.
    pub fn written_in_place(&self) -> bool {
        let Some(desc) = &self.descriptor else {
            return true;
        };
        let mut last: Option<((u32, u8), (u8, u32))> = None;
        for f in &self.fields {
            match last {
                Some((run, _)) if run == f.run_key() => {}
                _ => {
                    let key = write_place(desc, f);
                    if last.is_some_and(|(_, prev)| prev > key) {
                        return false;
                    }
                    last = Some((f.run_key(), key));
                }
            }
        }
        true
    }

    /// The order in which fields are written: known fields by ascending number, then unknown
    /// fields in wire order, as protobuf's serializers do. Wire order is kept as it is when the
    /// type is unknown, or when two members of one oneof occur (reordering would change which
    /// wins).
    fn write_order(&self) -> Vec<&WireField> {
        let Some(desc) = &self.descriptor else {
            return self.fields.iter().collect();
        };
        if self.written_in_place() || has_oneof_conflict(desc, &self.fields) {
            return self.fields.iter().collect();
        }
        // Each field's place (known fields by number, then unknown ones), looked up once per
        // run of one number: a message of a million nodes is one run.
        let mut keys: Vec<(u8, u32)> = Vec::with_capacity(self.fields.len());
        let mut run: Option<((u32, u8), (u8, u32))> = None;
        for f in &self.fields {
            let key = match run {
                Some((number, key)) if number == f.run_key() => key,
                _ => {
                    let key = write_place(desc, f);
                    run = Some((f.run_key(), key));
                    key
                }
            };
            keys.push(key);
        }
        // A stable sort: occurrences of one number keep their order.
        let mut order: Vec<usize> = (0..self.fields.len()).collect();
        order.sort_by_key(|&i| keys[i]);
        order.into_iter().map(|i| &self.fields[i]).collect()
    }
}

/// Where protobuf's serializers put field occurrence `f` of a message of type `desc`: known
/// fields first, by number (`(0, number)`), then unknown ones in wire order (`(1, 0)`). An
/// occurrence of a known number whose wire type the field cannot take is unknown: protobuf
/// C++ keeps it with the unknown fields, so it must stay in order among them (issue 29: `0a 00`
/// after an unknown field 3 of a `SavedModel` was moved before it, and the model written
/// parsed to another message than the one fingerprinted).
fn write_place(desc: &MessageDescriptor, f: &WireField) -> (u8, u32) {
    match desc.get_field(f.number) {
        Some(field) if wire_type_fits(&field, &f.value) => (0, f.number),
        _ => (1, 0),
    }
}

/// Whether protobuf parses `value` as an occurrence of `field` (rather than keeping it as an
/// unknown field): [`crate::lenient::wire_type_takes`] of its wire type.
pub fn wire_type_fits(field: &prost_reflect::FieldDescriptor, value: &WireValue) -> bool {
    let wire = match value {
        WireValue::Varint(_) => WireType::Varint,
        WireValue::Fixed64(_) => WireType::Fixed64,
        WireValue::Fixed32(_) => WireType::Fixed32,
        WireValue::Bytes(_) | WireValue::Message(_) => WireType::Len,
        WireValue::Group(_) => WireType::StartGroup,
    };
    crate::lenient::wire_type_takes(field, wire)
}

/// Segments under construction: see [`WireMessage::to_segments`].
/// Segments being gathered: at most one of `pending` (copied bytes) and `run` (a shared
/// slice of a source, still growing) is open at a time, so that parts stay in stream order.
#[derive(Default)]
struct Segments<'s> {
    parts: Vec<Bytes>,
    pending: Vec<u8>,
    /// Buffers whose slices may be shared whole ([`WireMessage::to_segments_within`]).
    sources: &'s [Bytes],
    /// `sources[.0][.1..]` up to `.2`: the run of fields found in place so far.
    run: Option<(usize, usize, usize)>,
    /// Scratch space for a field's key and length.
    head: Vec<u8>,
}

impl Segments<'_> {
    /// Values at least this large are shared, not copied.
    const SHARE_AT: usize = 64 << 10;

    /// Appends a length-delimited field whose value is `value`: to the run when its key,
    /// length and value follow the run in its source, else as a new run when they lie in a
    /// source, else copied (or shared, if large).
    fn push_field(&mut self, field: &WireField, value: &Bytes) {
        if let Some((source, start, end)) = self.run {
            if let Some(end) = self.continues_run(source, end, field.number, value) {
                self.run = Some((source, start, end));
                return;
            }
        }
        self.head.clear();
        field.write_head(&mut self.head);
        if let Some((source, start, end)) = self.in_source(value) {
            match self.run {
                Some((s, run_start, run_end)) if s == source && run_end == start => {
                    self.run = Some((s, run_start, end));
                }
                _ => {
                    self.flush();
                    self.run = Some((source, start, end));
                }
            }
            return;
        }
        self.end_run();
        self.pending.extend_from_slice(&self.head);
        self.push(value);
    }

    /// Where the field of `number` whose value is `value` ends in `sources[source]`, when its
    /// key and length lie there right at `run_end`, followed by `value` itself (compared by
    /// address): the next field of a run of fields in place. The common case of a split's
    /// chunk of nodes (millions of them), checked without gathering the key and length
    /// elsewhere or trying the other sources first.
    #[inline]
    fn continues_run(
        &self,
        source: usize,
        run_end: usize,
        number: u32,
        value: &[u8],
    ) -> Option<usize> {
        let buf = &self.sources[source];
        let offset = (value.as_ptr() as usize).checked_sub(buf.as_ptr() as usize)?;
        let end = offset.checked_add(value.len())?;
        if end > buf.len() || offset < run_end {
            return None;
        }
        let (head, n) = crate::codec::len_field_head(number, value.len() as u64);
        // Compared in line: a call to `memcmp` for a few bytes cost more than the rest.
        let found = &buf[run_end..offset];
        (found.len() == n && found.iter().zip(&head).all(|(a, b)| a == b)).then_some(end)
    }

    /// Whether `bytes` equals `self.head` (a few bytes: compared in line, not by `memcmp`).
    fn is_head(&self, bytes: &[u8]) -> bool {
        bytes.len() == self.head.len() && bytes.iter().zip(&self.head).all(|(a, b)| a == b)
    }

    /// Where the field made of `self.head` and `value` lies in a source, as `(source, start,
    /// end)`: `value` must be a slice of it (compared by address, never read outside it) and
    /// the bytes just before it must be `self.head`.
    fn in_source(&self, value: &Bytes) -> Option<(usize, usize, usize)> {
        let at = value.as_ptr() as usize;
        let head = self.head.len();
        self.sources.iter().enumerate().find_map(|(i, source)| {
            let base = source.as_ptr() as usize;
            let offset = at.checked_sub(base)?;
            let end = offset.checked_add(value.len())?;
            let start = offset.checked_sub(head)?;
            (end <= source.len() && self.is_head(&source[start..offset])).then_some((i, start, end))
        })
    }

    fn push(&mut self, value: &Bytes) {
        if value.len() < Self::SHARE_AT {
            self.pending.extend_from_slice(value);
        } else {
            self.flush();
            self.parts.push(value.clone());
        }
    }

    /// Closes the shared run, if one is open (before bytes are copied).
    fn end_run(&mut self) {
        if let Some((source, start, end)) = self.run.take() {
            self.parts.push(self.sources[source].slice(start..end));
        }
    }

    fn flush(&mut self) {
        self.end_run();
        if !self.pending.is_empty() {
            self.parts
                .push(Bytes::from(std::mem::take(&mut self.pending)));
        }
    }
}

/// Whether two different members of one (non-synthetic) oneof both occur.
fn has_oneof_conflict(desc: &MessageDescriptor, fields: &[WireField]) -> bool {
    let mut seen: Vec<(String, u32)> = Vec::new();
    for f in fields {
        let Some(fd) = desc.get_field(f.number) else {
            continue;
        };
        let Some(oneof) = fd.containing_oneof() else {
            continue;
        };
        if oneof.is_synthetic() {
            continue;
        }
        let idx = oneof.full_name().to_string();
        match seen.iter().find(|(o, _)| *o == idx) {
            Some((_, n)) if *n != f.number => return true,
            Some(_) => {}
            None => seen.push((idx, f.number)),
        }
    }
    false
}

impl WireField {
    /// The field number and wire type: occurrences with equal keys are placed alike when
    /// written ([`write_place`]), so runs of them are looked up once.
    fn run_key(&self) -> (u32, u8) {
        let wire = match &self.value {
            WireValue::Varint(_) => 0,
            WireValue::Fixed64(_) => 1,
            WireValue::Bytes(_) | WireValue::Message(_) => 2,
            WireValue::Group(_) => 3,
            WireValue::Fixed32(_) => 5,
        };
        (self.number, wire)
    }

    /// Size of this occurrence, key included.
    pub fn encoded_len(&self) -> u64 {
        let key = key_len(self.number);
        match &self.value {
            WireValue::Varint(v) => key + varint_len(*v),
            WireValue::Fixed64(_) => key + 8,
            WireValue::Fixed32(_) => key + 4,
            WireValue::Bytes(p) => {
                let len = p.len();
                key + varint_len(len) + len
            }
            WireValue::Message(m) => {
                let len = m.encoded_len();
                key + varint_len(len) + len
            }
            WireValue::Group(g) => 2 * key + g.len() as u64,
        }
    }

    /// Writes the key and everything before the (possibly large) body.
    fn write_head(&self, out: &mut Vec<u8>) {
        match &self.value {
            WireValue::Varint(v) => {
                put_key(self.number, WireType::Varint, out);
                put_varint(*v, out);
            }
            WireValue::Fixed64(v) => {
                put_key(self.number, WireType::Fixed64, out);
                out.extend_from_slice(&v.to_le_bytes());
            }
            WireValue::Fixed32(v) => {
                put_key(self.number, WireType::Fixed32, out);
                out.extend_from_slice(&v.to_le_bytes());
            }
            WireValue::Bytes(p) => {
                put_key(self.number, WireType::Len, out);
                put_varint(p.len(), out);
            }
            WireValue::Message(m) => {
                put_key(self.number, WireType::Len, out);
                put_varint(m.encoded_len(), out);
            }
            WireValue::Group(_) => put_key(self.number, WireType::StartGroup, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_is_no_larger_than_bytes() {
        assert_eq!(std::mem::size_of::<Payload>(), std::mem::size_of::<Bytes>());
    }

    #[test]
    fn parse_and_write_round_trip_bytes_exactly() {
        // field 1 varint 150, field 2 "hi", field 3 fixed32, field 4 fixed64, group 5 {1: 1}
        let bytes = Bytes::from_static(&[
            0x08, 0x96, 0x01, 0x12, 0x02, b'h', b'i', 0x1d, 1, 2, 3, 4, 0x21, 1, 2, 3, 4, 5, 6, 7,
            8, 0x2b, 0x08, 0x01, 0x2c,
        ]);
        let m = WireMessage::parse(&bytes, None).unwrap();
        assert_eq!(m.fields.len(), 5);
        assert_eq!(m.encoded_len(), bytes.len() as u64);
        assert_eq!(m.to_vec().unwrap(), bytes.to_vec());
    }

    #[test]
    fn expanded_child_keeps_size_and_bytes() {
        let inner = Bytes::from_static(&[0x08, 0x01, 0x12, 0x01, b'x']);
        let mut outer_bytes = vec![0x0a, inner.len() as u8];
        outer_bytes.extend_from_slice(&inner);
        let outer = Bytes::from(outer_bytes.clone());
        let mut m = WireMessage::parse(&outer, None).unwrap();
        let WireValue::Bytes(Payload::Inline(b)) = &m.fields[0].value else {
            panic!("expected bytes")
        };
        let child = WireMessage::parse(b, None).unwrap();
        m.fields[0].value = WireValue::Message(child);
        assert_eq!(m.to_vec().unwrap(), outer_bytes);
    }

    /// Known fields are written first, by number, unknown ones after them in the order read;
    /// a known number whose wire type the field cannot take is unknown, as protobuf C++ keeps
    /// it: `SavedModel` with `1a 00 0a 00` after its fields (an empty unknown field 3, then
    /// field 1, an int64, as length-delimited) is written with both where they were, and a
    /// packed run of a repeated varint field counts as known.
    #[test]
    fn a_known_number_with_another_wire_type_stays_among_the_unknown_fields() {
        let desc = unbound_proto::descriptor_pool()
            .get_message_by_name("tensorflow.SavedModel")
            .unwrap();
        let bytes = Bytes::from_static(&[0x12, 0x00, 0x08, 0x01, 0x1a, 0x00, 0x0a, 0x00]);
        let m = WireMessage::parse(&bytes, Some(desc.clone())).unwrap();
        assert!(!m.written_in_place());
        assert_eq!(
            m.to_vec().unwrap(),
            [0x08, 0x01, 0x12, 0x00, 0x1a, 0x00, 0x0a, 0x00]
        );
        let canonical = Bytes::from_static(&[0x08, 0x01, 0x12, 0x00, 0x1a, 0x00, 0x0a, 0x00]);
        assert!(WireMessage::parse(&canonical, Some(desc))
            .unwrap()
            .written_in_place());
        // `MetaInfoDef.tags` is repeated string; `TensorShapeProto.Dim.size` an int64: a
        // packed run of `TensorProto.int_val` (field 7) is known, a varint of `string_val`
        // (field 8) is not.
        let tensor = unbound_proto::descriptor_pool()
            .get_message_by_name("tensorflow.TensorProto")
            .unwrap();
        let bytes = Bytes::from_static(&[0x40, 0x05, 0x3a, 0x01, 0x07, 0x08, 0x01]);
        let m = WireMessage::parse(&bytes, Some(tensor)).unwrap();
        assert_eq!(
            m.to_vec().unwrap(),
            [0x08, 0x01, 0x3a, 0x01, 0x07, 0x40, 0x05]
        );
    }

    /// A message of `n` length-delimited fields numbered 1, each `size` bytes of its index.
    fn many_fields(n: usize, size: usize) -> Bytes {
        let mut out = Vec::new();
        for i in 0..n {
            out.push(0x0a);
            put_varint(size as u64, &mut out);
            out.extend(std::iter::repeat_n(i as u8, size));
        }
        Bytes::from(out)
    }

    fn joined(parts: &[Bytes]) -> Vec<u8> {
        parts.concat()
    }

    #[test]
    fn fields_in_place_in_a_source_are_one_shared_slice_of_it() {
        let source = many_fields(1000, 100);
        let m = WireMessage::parse(&source, None).unwrap();
        let parts = m.to_segments_within(std::slice::from_ref(&source)).unwrap();
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].as_ptr(), source.as_ptr(), "shared, not copied");
        assert_eq!(parts[0], source);
        // Without the source, the same bytes, copied.
        let copied = m.to_segments().unwrap();
        assert_ne!(copied[0].as_ptr(), source.as_ptr());
        assert_eq!(joined(&copied), source.to_vec());
    }

    #[test]
    fn a_run_breaks_where_the_message_departs_from_its_source() {
        let source = many_fields(100, 30);
        let mut m = WireMessage::parse(&source, None).unwrap();
        // A field dropped, one rewritten with another length, a scalar added, a field moved
        // to the end, and one value a slice of the source whose head there differs.
        m.fields.remove(10);
        m.fields[20].value = WireValue::Bytes(Payload::Inline(Bytes::from_static(b"changed")));
        m.fields.insert(
            40,
            WireField {
                number: 1,
                value: WireValue::Varint(7),
            },
        );
        let moved = m.fields.remove(50);
        m.fields.push(moved);
        let WireValue::Bytes(Payload::Inline(b)) = &m.fields[60].value else {
            panic!("expected bytes")
        };
        m.fields[60].value = WireValue::Bytes(Payload::Inline(b.slice(1..)));
        let want = m.to_vec().unwrap();
        let parts = m.to_segments_within(std::slice::from_ref(&source)).unwrap();
        assert_eq!(joined(&parts), want);
        let shared = parts
            .iter()
            .filter(|p| {
                let at = p.as_ptr() as usize;
                let base = source.as_ptr() as usize;
                at >= base && at < base + source.len()
            })
            .count();
        assert!(shared >= 5, "runs between the edits are shared: {shared}");
    }
}

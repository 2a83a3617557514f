//! Message chunks too large to hold decoded, parsed as their bytes stream by.
//!
//! A chunk of a `.cpb` is decoded whole to be merged: its fields become slices of the decoded
//! buffer. A chunk declaring hundreds of megabytes is nearly always one large value (a
//! constant's `tensor_content`) inside a few small fields, and a command that only reads the
//! small fields (`show`, `verify`, a fingerprint) must not hold the value (issue 29: a valid
//! model of 800 MB constants of one repeated value, a 235 KB `.cpb`, was refused). Such a
//! chunk is streamed from the file once ([`unbound_records::RecordReader::copy_record_to`],
//! one decoder buffer) through [`StreamParser`], which keeps the small fields' bytes and
//! leaves every value of at least [`LAZY_AT`] bytes in the file: a `bytes` or `string` value
//! (or one of an unknown field) becomes a lazy reference to its place in the record
//! ([`RecordSlice`]), a message value is parsed the same way, field by field. What is kept
//! counts against the reader's memory budget as it grows.

use std::io::Write;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use prost_reflect::{Kind, MessageDescriptor};
use unbound_wire::{
    Payload, RecordRef, RecordSource, SourceError, WireField, WireMessage, WireValue,
};

use crate::error::{ChunkedError, Result};
use crate::layout::MAX_NESTING;

/// Message chunks declaring at least this many decoded bytes are streamed, not decoded whole.
pub const STREAM_AT: u64 = 64 << 20;

/// In a streamed chunk, length-delimited values of at least this many bytes are not kept.
pub const LAZY_AT: u64 = 1 << 20;

/// Sees the decoded bytes of each chunk a merge streams ([`crate::FileChunks::streams_chunk_at`]) as
/// they go by, so that another reader of the same chunk learns what it needs of them (a
/// fingerprint's hash of the chunk) without decompressing it again. What a tap learns is
/// about those very bytes: the record of that chunk in that file.
pub trait StreamTap: Send + Sync {
    /// A sink for the bytes of `chunk`, about to be streamed; `None` to let it pass.
    fn begin(&self, chunk: StreamedChunk) -> Option<Box<dyn TapSink>>;
}

/// The chunk a [`StreamTap`] is offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamedChunk {
    /// Its index in the `.cpb`.
    pub index: u64,
    /// The position of its record in the file: that of the lazy references
    /// ([`Payload::Record`]) the merge leaves to the values in it.
    pub position: u64,
    /// Its decoded length.
    pub len: u64,
    /// The decoded lengths of the chunks of the file before it that stream too, added up:
    /// a place for its bytes among those of every streamed chunk that depends on the file
    /// alone, not on which stream begins first (streams of different chunks run at once).
    pub start: u64,
}

/// Where a [`StreamTap`] takes the bytes of one chunk.
pub trait TapSink: std::io::Write + Send {
    /// Called before the bytes of a value the parse leaves in the file (a lazy reference:
    /// `len` bytes from byte `offset` of the record) are written here, in the order of the
    /// values; the bytes of such a value always come after its announcement. Nothing by
    /// default.
    fn lazy_value(&mut self, offset: u64, len: u64) {
        let _ = (offset, len);
    }

    /// Called once the chunk has streamed whole (every byte was written here) and parsed
    /// without fault; a sink never finished saw a stream that failed.
    fn finish(self: Box<Self>);
}

/// Two taps seeing the same streams: each chunk goes to the sinks both begin.
pub struct BothTaps(pub Arc<dyn StreamTap>, pub Arc<dyn StreamTap>);

impl StreamTap for BothTaps {
    fn begin(&self, chunk: StreamedChunk) -> Option<Box<dyn TapSink>> {
        match (self.0.begin(chunk), self.1.begin(chunk)) {
            (Some(a), Some(b)) => Some(Box::new(BothSinks(a, b))),
            (Some(one), None) | (None, Some(one)) => Some(one),
            (None, None) => None,
        }
    }
}

/// The sinks of [`BothTaps`], given the same bytes.
struct BothSinks(Box<dyn TapSink>, Box<dyn TapSink>);

impl Write for BothSinks {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.write_all(data)?;
        self.1.write_all(data)?;
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl TapSink for BothSinks {
    fn lazy_value(&mut self, offset: u64, len: u64) {
        self.0.lazy_value(offset, len);
        self.1.lazy_value(offset, len);
    }

    fn finish(self: Box<Self>) {
        let BothSinks(a, b) = *self;
        a.finish();
        b.finish();
    }
}

/// Parses the record at `position` of `file` (`len` bytes) as a message of type `desc`,
/// streaming it, keeping at most `budget` bytes of small fields. `name` names the chunk in
/// errors.
pub(crate) fn parse_streamed(
    file: &Arc<Box<dyn RecordSource>>,
    position: u64,
    len: u64,
    desc: &MessageDescriptor,
    budget: u64,
    name: &str,
    mut tap: Option<Box<dyn TapSink>>,
) -> Result<WireMessage> {
    let mut parser = StreamParser::new(file, position, len, desc, budget, LAZY_AT);
    parser.announce = tap.is_some();
    let copied = match tap.as_mut() {
        Some(tap) => file.copy_record_to(
            position,
            &mut Tee {
                parser: &mut parser,
                tap: tap.as_mut(),
            },
        ),
        None => file.copy_record_to(position, &mut parser),
    };
    let fault = |fault: String| ChunkedError::Streamed {
        source_name: name.to_string(),
        fault,
    };
    if let Some(fault) = parser.fault.take() {
        return Err(self::fault_error(name, fault));
    }
    let copied = copied.map_err(|e| fault(format!("reading the chunk: {e}")))?;
    if copied != len {
        return Err(fault(format!(
            "the chunk holds {copied} bytes, {len} were declared"
        )));
    }
    let message = parser.finish().map_err(|f| self::fault_error(name, f))?;
    if let Some(tap) = tap {
        tap.finish();
    }
    Ok(message)
}

/// Writes what it is given to the parser, then, once the parser took it, to the tap.
struct Tee<'a, 'b> {
    parser: &'a mut StreamParser<'b>,
    tap: &'a mut dyn TapSink,
}

impl Write for Tee<'_, '_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.parser.write_all(data)?;
        for (offset, len) in self.parser.announced.drain(..) {
            self.tap.lazy_value(offset, len);
        }
        self.tap.write_all(data)?;
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What went wrong while streaming.
#[derive(Debug)]
enum Fault {
    /// Malformed protobuf bytes.
    Malformed(String),
    /// The small fields kept would pass the memory budget.
    Budget { held: u64, limit: u64 },
}

fn fault_error(name: &str, fault: Fault) -> ChunkedError {
    match fault {
        Fault::Malformed(fault) => ChunkedError::Streamed {
            source_name: name.to_string(),
            fault,
        },
        Fault::Budget { held, limit } => ChunkedError::MemoryBudget {
            source_name: name.to_string(),
            held,
            limit,
        },
    }
}

/// One message being parsed: the bytes of its small fields so far, and its large fields.
struct Frame {
    /// The message type, when known.
    desc: Option<MessageDescriptor>,
    /// Offset in the record where the message ends.
    end: u64,
    /// The field number it is the value of, in its parent (0 for the chunk itself).
    number: u32,
    /// The small fields' bytes, as they were read.
    buf: Vec<u8>,
    /// Runs of `buf` and large fields, in the order read.
    items: Vec<Item>,
    /// Where the run being gathered began in `buf`.
    run_start: usize,
    /// Open groups: their fields are kept as they are (a group is parsed whole).
    groups: u32,
}

/// A piece of a message, in order.
enum Item {
    /// Small fields, as bytes of the frame's `buf`.
    Run(Range<usize>),
    /// A large field.
    Field(WireField),
}

impl Frame {
    fn new(desc: Option<MessageDescriptor>, end: u64, number: u32) -> Self {
        Frame {
            desc,
            end,
            number,
            buf: Vec::new(),
            items: Vec::new(),
            run_start: 0,
            groups: 0,
        }
    }

    /// Ends the run being gathered and adds the large `field` after it.
    fn push_field(&mut self, field: WireField) {
        if self.run_start < self.buf.len() {
            self.items.push(Item::Run(self.run_start..self.buf.len()));
        }
        self.run_start = self.buf.len();
        self.items.push(Item::Field(field));
    }

    /// The message: its runs parsed as usual, its large fields in their places.
    fn into_message(mut self) -> std::result::Result<WireMessage, Fault> {
        if self.run_start < self.buf.len() {
            self.items.push(Item::Run(self.run_start..self.buf.len()));
        }
        let buf = Bytes::from(self.buf);
        let mut message = WireMessage::new(self.desc);
        for item in self.items {
            match item {
                Item::Run(range) => message
                    .append_bytes(&buf.slice(range))
                    .map_err(|e| Fault::Malformed(e.to_string()))?,
                Item::Field(field) => message.fields.push(field),
            }
        }
        Ok(message)
    }
}

/// What the parser expects next.
#[derive(Clone, Copy)]
enum Expect {
    /// A field's key, and then whatever of its value comes before its body.
    Head,
    /// The body of a small length-delimited value: copied.
    Copy(u64),
    /// The body of a large `bytes` value: left in the file.
    Skip(u64),
}

/// A push parser of one message's serialization (see the module docs); bytes come in through
/// [`Write`], in pieces of any size.
pub(crate) struct StreamParser<'a> {
    file: &'a Arc<Box<dyn RecordSource>>,
    position: u64,
    /// Open messages, the chunk's own first.
    frames: Vec<Frame>,
    /// Offset in the record of the next byte.
    at: u64,
    expect: Expect,
    /// The head being read (key, then a varint, fixed value or length).
    head: Vec<u8>,
    /// Bytes kept in all frames.
    held: u64,
    budget: u64,
    /// Values of at least this many bytes are not kept ([`LAZY_AT`]).
    lazy_at: u64,
    /// The first fault; once set, the rest of the stream is refused.
    fault: Option<Fault>,
    /// The message parsed, once the last frame closed.
    done: Option<WireMessage>,
    /// The values left in the file since the tee last looked (offset, length), for the tap
    /// ([`TapSink::lazy_value`]); gathered only when `announce`.
    announced: Vec<(u64, u64)>,
    announce: bool,
}

impl<'a> StreamParser<'a> {
    fn new(
        file: &'a Arc<Box<dyn RecordSource>>,
        position: u64,
        len: u64,
        desc: &MessageDescriptor,
        budget: u64,
        lazy_at: u64,
    ) -> Self {
        StreamParser {
            file,
            position,
            frames: vec![Frame::new(Some(desc.clone()), len, 0)],
            at: 0,
            expect: Expect::Head,
            head: Vec::with_capacity(24),
            held: 0,
            budget,
            lazy_at,
            fault: None,
            done: None,
            announced: Vec::new(),
            announce: false,
        }
    }

    /// The message, once every byte came.
    fn finish(mut self) -> std::result::Result<WireMessage, Fault> {
        if self.done.is_none() && self.frames.len() == 1 && self.at == 0 {
            // An empty record: an empty message.
            self.close_frames()?;
        }
        match (self.done, self.head.is_empty(), self.expect) {
            (Some(message), true, Expect::Head) => Ok(message),
            _ => Err(Fault::Malformed(format!(
                "the chunk ends inside a field (at byte {})",
                self.at
            ))),
        }
    }

    /// Takes `data`; what is left of it once the head is whole is handed back.
    fn take(&mut self, mut data: &[u8]) -> std::result::Result<(), Fault> {
        while !data.is_empty() {
            if self.done.is_some() {
                return Err(Fault::Malformed(
                    "bytes after the end of the message".into(),
                ));
            }
            match self.expect {
                Expect::Copy(left) => {
                    let n = left.min(data.len() as u64) as usize;
                    self.keep(&data[..n])?;
                    self.advance(n as u64, left)?;
                    data = &data[n..];
                }
                Expect::Skip(left) => {
                    let n = left.min(data.len() as u64) as usize;
                    self.at += n as u64;
                    self.expect = if left == n as u64 {
                        Expect::Head
                    } else {
                        Expect::Skip(left - n as u64)
                    };
                    data = &data[n..];
                    if matches!(self.expect, Expect::Head) {
                        self.close_frames()?;
                    }
                }
                Expect::Head => {
                    self.head.push(data[0]);
                    data = &data[1..];
                    self.at += 1;
                    self.head_byte()?;
                }
            }
        }
        Ok(())
    }

    /// After `n` bytes of a copied value of which `left` remained.
    fn advance(&mut self, n: u64, left: u64) -> std::result::Result<(), Fault> {
        self.at += n;
        if n == left {
            self.expect = Expect::Head;
            self.close_frames()?;
        } else {
            self.expect = Expect::Copy(left - n);
        }
        Ok(())
    }

    /// Keeps `bytes` in the innermost frame, within the budget.
    fn keep(&mut self, bytes: &[u8]) -> std::result::Result<(), Fault> {
        self.held += bytes.len() as u64;
        if self.held > self.budget {
            return Err(Fault::Budget {
                held: self.held,
                limit: self.budget,
            });
        }
        let frame = self.frames.last_mut().expect("an open frame");
        frame.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// A byte was added to the head: acts once it is whole.
    fn head_byte(&mut self) -> std::result::Result<(), Fault> {
        let Some((key, key_len)) = varint(&self.head) else {
            return self.head_not_too_long();
        };
        let number = u32::try_from(key >> 3).unwrap_or(0);
        let wire_type = (key & 7) as u8;
        if number == 0 {
            return Err(Fault::Malformed(format!(
                "field number 0 at byte {}",
                self.at - self.head.len() as u64
            )));
        }
        let rest = &self.head[key_len..];
        let (value_len, head_done) = match wire_type {
            0 => match varint(rest) {
                Some(_) => (0, true),
                None => return self.head_not_too_long(),
            },
            1 => (0, rest.len() == 8),
            5 => (0, rest.len() == 4),
            3 | 4 => (0, true),
            2 => match varint(rest) {
                Some((len, _)) => (len, true),
                None => return self.head_not_too_long(),
            },
            other => {
                return Err(Fault::Malformed(format!(
                    "wire type {other} at byte {}",
                    self.at - self.head.len() as u64
                )))
            }
        };
        if !head_done {
            return Ok(());
        }
        let head = std::mem::take(&mut self.head);
        let frame = self.frames.last_mut().expect("an open frame");
        if self.at.saturating_add(value_len) > frame.end {
            return Err(Fault::Malformed(format!(
                "field {number} at byte {} runs past the end of its message",
                self.at - head.len() as u64
            )));
        }
        match wire_type {
            3 => frame.groups += 1,
            4 => frame.groups = frame.groups.saturating_sub(1),
            _ => {}
        }
        if wire_type == 2 && value_len >= self.lazy_at && frame.groups == 0 {
            self.head = head;
            self.head.clear();
            return self.large_value(number, value_len);
        }
        self.keep(&head)?;
        self.head = head;
        self.head.clear();
        if wire_type == 2 && value_len > 0 {
            self.expect = Expect::Copy(value_len);
            Ok(())
        } else {
            self.close_frames()
        }
    }

    /// A head not whole yet: fine unless it is already longer than any head can be.
    fn head_not_too_long(&mut self) -> std::result::Result<(), Fault> {
        if self.head.len() > 20 {
            return Err(Fault::Malformed(format!(
                "a varint of more than 10 bytes at byte {}",
                self.at - self.head.len() as u64
            )));
        }
        Ok(())
    }

    /// Field `number`, a length-delimited value of `len` (at least `lazy_at`) bytes that
    /// starts now: a message of a known type is parsed as a frame of its own, anything else
    /// left in the file.
    fn large_value(&mut self, number: u32, len: u64) -> std::result::Result<(), Fault> {
        let frame = self.frames.last().expect("an open frame");
        let child = frame
            .desc
            .as_ref()
            .and_then(|d| d.get_field(number))
            .and_then(|f| match f.kind() {
                Kind::Message(m) if !f.is_group() => Some(m),
                _ => None,
            });
        match child {
            Some(child) if self.frames.len() < MAX_NESTING => {
                let end = self.at + len;
                self.frames.push(Frame::new(Some(child), end, number));
                Ok(())
            }
            _ => {
                let slice = RecordSlice {
                    file: Arc::clone(self.file),
                    offset: self.at,
                    len,
                };
                let value = WireValue::Bytes(Payload::Record(RecordRef {
                    reader: Arc::new(Box::new(slice)),
                    position: self.position,
                    len,
                }));
                let frame = self.frames.last_mut().expect("an open frame");
                frame.push_field(WireField { number, value });
                if self.announce {
                    self.announced.push((self.at, len));
                }
                self.expect = Expect::Skip(len);
                Ok(())
            }
        }
    }

    /// Closes every frame that ends here (a message and the ones it ends).
    fn close_frames(&mut self) -> std::result::Result<(), Fault> {
        while let Some(frame) = self.frames.last() {
            if self.at < frame.end {
                return Ok(());
            }
            if self.at > frame.end {
                return Err(Fault::Malformed(format!(
                    "a field runs past the end of its message at byte {}",
                    frame.end
                )));
            }
            let frame = self.frames.pop().expect("checked");
            let number = frame.number;
            let message = frame.into_message()?;
            match self.frames.last_mut() {
                Some(parent) => parent.push_field(WireField {
                    number,
                    value: WireValue::Message(message),
                }),
                None => {
                    self.done = Some(message);
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

impl Write for StreamParser<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.fault.is_some() {
            return Err(std::io::Error::other("the chunk does not parse"));
        }
        if let Err(fault) = self.take(data) {
            self.fault = Some(fault);
            return Err(std::io::Error::other("the chunk does not parse"));
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A varint at the start of `buf`, and its length; `None` when it is not whole yet (or
/// longer than ten bytes, which [`StreamParser::head_not_too_long`] then refuses).
fn varint(buf: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in buf.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Some((value, i + 1));
        }
    }
    None
}

/// A value left in its record: `len` bytes from `offset` of the record a lazy
/// [`Payload::Record`] names. Streamed from the file whenever it is read: read where it lies
/// when the record is stored, else the record decompressed up to the value's end, the bytes
/// before it discarded.
#[derive(Debug)]
struct RecordSlice {
    file: Arc<Box<dyn RecordSource>>,
    offset: u64,
    len: u64,
}

impl RecordSource for RecordSlice {
    fn name(&self) -> &str {
        self.file.name()
    }

    fn read_record(&self, position: u64) -> std::result::Result<Bytes, SourceError> {
        let mut out = Vec::with_capacity(usize::try_from(self.len).unwrap_or(usize::MAX));
        self.copy_record_to(position, &mut out)?;
        Ok(Bytes::from(out))
    }

    fn copy_record_to(
        &self,
        position: u64,
        out: &mut dyn Write,
    ) -> std::result::Result<u64, SourceError> {
        self.file
            .copy_record_range_to(position, self.offset, self.len, out)
    }

    fn copy_record_range_to(
        &self,
        position: u64,
        offset: u64,
        len: u64,
        out: &mut dyn Write,
    ) -> std::result::Result<u64, SourceError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => {
                self.file
                    .copy_record_range_to(position, self.offset + offset, len, out)
            }
            _ => Err(format!(
                "{}: {len} bytes at byte {offset} of a value of {} bytes: past its end",
                self.file.name(),
                self.len
            )
            .into()),
        }
    }

    fn decoding_is_costly(&self, position: u64) -> bool {
        self.file.decoding_is_costly(position)
    }

    fn offset_in_record(&self) -> Option<u64> {
        Some(self.offset)
    }

    fn record_file(&self) -> Option<&Arc<Box<dyn RecordSource>>> {
        Some(&self.file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records held in memory, each streamed in pieces of 7 bytes (so heads and values are
    /// cut everywhere).
    #[derive(Debug)]
    struct Records(Vec<Bytes>);

    /// One record streamed in pieces of `.1` bytes.
    #[derive(Debug)]
    struct Pieces(Bytes, usize);

    impl RecordSource for Pieces {
        fn name(&self) -> &str {
            "pieces"
        }
        fn read_record(&self, _: u64) -> std::result::Result<Bytes, SourceError> {
            Ok(self.0.clone())
        }
        fn copy_record_to(
            &self,
            _: u64,
            out: &mut dyn Write,
        ) -> std::result::Result<u64, SourceError> {
            for piece in self.0.chunks(self.1) {
                out.write_all(piece)?;
            }
            Ok(self.0.len() as u64)
        }
        fn decoding_is_costly(&self, _: u64) -> bool {
            true
        }
    }

    impl RecordSource for Records {
        fn name(&self) -> &str {
            "memory"
        }
        fn read_record(&self, position: u64) -> std::result::Result<Bytes, SourceError> {
            Ok(self.0[position as usize].clone())
        }
        fn copy_record_to(
            &self,
            position: u64,
            out: &mut dyn Write,
        ) -> std::result::Result<u64, SourceError> {
            let record = &self.0[position as usize];
            for piece in record.chunks(7) {
                out.write_all(piece)?;
            }
            Ok(record.len() as u64)
        }
        fn decoding_is_costly(&self, _: u64) -> bool {
            true
        }
    }

    fn put_len(out: &mut Vec<u8>, number: u32, body: &[u8]) {
        unbound_wire::codec::put_key(number, unbound_wire::codec::WireType::Len, out);
        unbound_wire::codec::put_varint(body.len() as u64, out);
        out.extend_from_slice(body);
    }

    fn descriptor(name: &str) -> MessageDescriptor {
        unbound_proto::descriptor_pool()
            .get_message_by_name(name)
            .unwrap()
    }

    /// A NodeDef whose `attr["value"].tensor.tensor_content` is `content`, with fields
    /// around it.
    fn node(content: &[u8]) -> Vec<u8> {
        let mut tensor = vec![0x08, 0x01]; // dtype
        put_len(&mut tensor, 4, content); // tensor_content
        let mut attr_value = Vec::new();
        put_len(&mut attr_value, 8, &tensor); // AttrValue.tensor
        let mut entry = Vec::new();
        put_len(&mut entry, 1, b"value");
        put_len(&mut entry, 2, &attr_value);
        let mut node = Vec::new();
        put_len(&mut node, 1, b"big");
        put_len(&mut node, 2, b"Const");
        put_len(&mut node, 5, &entry);
        node.extend_from_slice(&[0xa0, 0x06, 0x2a]); // unknown varint field 100
        node
    }

    fn parse(record: Vec<u8>, budget: u64) -> std::result::Result<WireMessage, ChunkedError> {
        let len = record.len() as u64;
        let file: Arc<Box<dyn RecordSource>> = Arc::new(Box::new(Records(vec![record.into()])));
        parse_streamed(
            &file,
            0,
            len,
            &descriptor("tensorflow.NodeDef"),
            budget,
            "memory chunk 0",
            None,
        )
    }

    #[test]
    fn a_large_value_stays_in_the_file_and_the_message_writes_as_read() {
        let content: Vec<u8> = (0..LAZY_AT as usize + 5).map(|i| (i % 251) as u8).collect();
        let record = node(&content);
        let message = parse(record.clone(), 1 << 20).unwrap();
        // Everything but the value was kept: well under a megabyte.
        assert_eq!(message.to_vec().unwrap(), record);
        assert_eq!(message.encoded_len(), record.len() as u64);
        // The value is a lazy record reference of exactly its bytes.
        let attr = message.fields.iter().find(|f| f.number == 5).unwrap();
        let WireValue::Message(entry) = &attr.value else {
            panic!("the large entry is parsed")
        };
        let WireValue::Message(value) = &entry.fields[1].value else {
            panic!("the large AttrValue is parsed")
        };
        let WireValue::Message(tensor) = &value.fields[0].value else {
            panic!("the large TensorProto is parsed")
        };
        let WireValue::Bytes(payload @ Payload::Record(_)) = &tensor.fields[1].value else {
            panic!("the tensor content is lazy")
        };
        assert_eq!(payload.bytes().unwrap(), content);
    }

    #[test]
    fn small_messages_parse_as_usual() {
        let record = node(b"tiny");
        let message = parse(record.clone(), 1 << 20).unwrap();
        assert_eq!(message.to_vec().unwrap(), record);
        assert!(message
            .fields
            .iter()
            .all(|f| !matches!(f.value, WireValue::Message(_))));
    }

    #[test]
    fn what_is_kept_counts_against_the_budget() {
        let record = node(&vec![7u8; 1000]);
        let e = parse(record, 100).unwrap_err();
        assert!(matches!(e, ChunkedError::MemoryBudget { .. }), "{e}");
        assert!(e.to_string().contains("--memory-limit"), "{e}");
    }

    #[test]
    fn malformed_streams_are_refused() {
        let content = vec![1u8; LAZY_AT as usize];
        let whole = node(&content);
        // Cut short, inside the large value and inside a head.
        for cut in [whole.len() - 10, 3, 1] {
            let e = parse(whole[..cut].to_vec(), 1 << 20);
            assert!(e.is_err(), "cut at {cut}");
        }
        // A large field claiming more than its message holds.
        let mut lying = Vec::new();
        put_len(&mut lying, 1, b"x");
        unbound_wire::codec::put_key(5, unbound_wire::codec::WireType::Len, &mut lying);
        unbound_wire::codec::put_varint(LAZY_AT * 4, &mut lying);
        lying.extend_from_slice(&content);
        assert!(parse(lying, 1 << 20).is_err());
        // Field number 0, wire type 7.
        assert!(parse(vec![0x00, 0x01], 1 << 20).is_err());
        assert!(parse(vec![0x0f], 1 << 20).is_err());
    }

    /// Parses `record` streamed in pieces of `piece` bytes, leaving values of `lazy_at` bytes
    /// or more in the "file".
    fn parse_in_pieces(record: &[u8], piece: usize, lazy_at: u64) -> Option<WireMessage> {
        let file: Arc<Box<dyn RecordSource>> =
            Arc::new(Box::new(Pieces(Bytes::copy_from_slice(record), piece)));
        let desc = descriptor("tensorflow.NodeDef");
        let mut parser = StreamParser::new(&file, 0, record.len() as u64, &desc, 1 << 20, lazy_at);
        let copied = file.copy_record_to(0, &mut parser);
        if parser.fault.is_some() || copied.is_err() {
            return None;
        }
        parser.finish().ok()
    }

    /// `message`'s fields serialized in the order they are held (not the order a writer
    /// puts them in), lazy values read: the bytes the message was parsed from.
    fn as_held(message: &WireMessage) -> Vec<u8> {
        use unbound_wire::codec::{put_key, put_varint, WireType};
        let mut out = Vec::new();
        for f in &message.fields {
            match &f.value {
                WireValue::Varint(v) => {
                    put_key(f.number, WireType::Varint, &mut out);
                    put_varint(*v, &mut out);
                }
                WireValue::Fixed64(v) => {
                    put_key(f.number, WireType::Fixed64, &mut out);
                    out.extend_from_slice(&v.to_le_bytes());
                }
                WireValue::Fixed32(v) => {
                    put_key(f.number, WireType::Fixed32, &mut out);
                    out.extend_from_slice(&v.to_le_bytes());
                }
                WireValue::Bytes(p) => {
                    let bytes = p.bytes().unwrap();
                    put_key(f.number, WireType::Len, &mut out);
                    put_varint(bytes.len() as u64, &mut out);
                    out.extend_from_slice(&bytes);
                }
                WireValue::Message(m) => {
                    let inner = as_held(m);
                    put_key(f.number, WireType::Len, &mut out);
                    put_varint(inner.len() as u64, &mut out);
                    out.extend_from_slice(&inner);
                }
                WireValue::Group(g) => {
                    put_key(f.number, WireType::StartGroup, &mut out);
                    out.extend_from_slice(g);
                    put_key(f.number, WireType::EndGroup, &mut out);
                }
            }
        }
        out
    }

    proptest::proptest! {
        /// Whatever the bytes (a node with a few of its bytes changed or cut), streaming them in
        /// pieces of any size never panics, and whatever it accepts holds exactly the bytes
        /// read, in order, its large values read back from the "file".
        #[test]
        fn what_is_accepted_writes_back_as_read(
            flips in proptest::collection::vec((0usize..400, proptest::num::u8::ANY), 0..4),
            cut in 0usize..400,
            piece in 1usize..64,
            lazy_at in 1u64..64,
        ) {
            let mut record = node(&[9u8; 40]);
            let len = record.len();
            for (at, byte) in flips {
                record[at % len] = byte;
            }
            if cut < record.len() {
                record.truncate(cut);
            }
            if let Some(message) = parse_in_pieces(&record, piece, lazy_at) {
                proptest::prop_assert_eq!(as_held(&message), record);
            }
        }
    }
}

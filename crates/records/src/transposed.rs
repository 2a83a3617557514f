//! Transposed chunks (`'t'`): reading only.
//!
//! A transposed chunk stores protocol buffer records column-wise: field
//! values of the same kind go into shared buffers, and a state machine,
//! driven by a byte stream of transitions, says in which order to take tags
//! and values to rebuild each record. Records are rebuilt back to front (the
//! encoder wrote them reversed), so output is produced into a buffer that
//! grows toward its beginning.
//!
//! Data layout: `compression_type` byte; `varint64 header_size`; the header
//! (one compressed buffer); the buckets (each one compressed buffer, lengths
//! in the header); then the transitions (one compressed buffer, to the end).
//!
//! Header contents: `num_buckets`, `num_buffers` (varint32), bucket lengths
//! and buffer lengths (varint64), `state_machine_size`, that many tags, that
//! many next-node indices (varint32, `>= size` means "implicit"), one subtype
//! byte per varint-typed tag, a buffer index per node that has a buffer, and
//! the first node index.

use bytes::Bytes;

use crate::chunk_bytes::ChunkBytes;
use crate::compression::{self, CompressionType};
use crate::error::{corrupt, DecodeFault};
use crate::varint::{self, Cursor};

/// Reserved tag values (message ids) of the state machine.
const NO_OP: u32 = 0;
const NON_PROTO: u32 = 1;
const START_OF_SUBMESSAGE: u32 = 2;
const START_OF_MESSAGE: u32 = 3;

/// Wire type used in the state machine to mark the end of a submessage.
const SUBMESSAGE_END_WIRE_TYPE: u32 = 6;

/// Varint subtypes: 0..=9 mean "varint of length subtype + 1 in the buffer";
/// 10..=137 mean "the value subtype - 10, inline".
const VARINT_INLINE_0: u8 = 10;
const VARINT_INLINE_MAX: u8 = VARINT_INLINE_0 + 0x7f;

/// Length-delimited subtypes.
const LENGTH_DELIMITED_STRING: u8 = 0;
const LENGTH_DELIMITED_END_OF_SUBMESSAGE: u8 = 2;

/// What a state machine node does when visited.
#[derive(Clone, Copy, Debug)]
enum Action {
    NoOp,
    NonProto,
    MessageStart,
    SubmessageStart,
    SubmessageEnd,
    /// Write the first `n` bytes of the tag data (tag, plus an inline
    /// varint value byte when `n` is one more than the tag length).
    CopyTag(u8),
    /// Tag followed by a varint of this many bytes from the buffer.
    Varint(u8),
    /// Tag followed by this many fixed bytes from the buffer.
    Fixed(u8),
    /// Tag followed by a length-prefixed string from the buffer.
    String,
}

/// A state machine node.
#[derive(Clone, Copy, Debug)]
struct Node {
    action: Action,
    /// Encoded tag (varint32) plus one spare byte for an inline value.
    tag: [u8; 6],
    tag_len: u8,
    buffer: u32,
    next: u32,
    implicit: bool,
}

/// Decoded records of a transposed chunk: concatenated values and the end
/// offset of each record.
pub(crate) struct Decoded {
    pub values: Bytes,
    pub limits: Vec<u64>,
}

/// Output buffer filled from the back.
struct BackBuffer {
    buf: Vec<u8>,
    start: usize,
    limit: u64,
}

impl BackBuffer {
    fn written(&self) -> u64 {
        (self.buf.len() - self.start) as u64
    }

    fn prepend(&mut self, data: &[u8]) -> Result<(), DecodeFault> {
        if data.len() > self.start {
            let written = self.buf.len() - self.start;
            let needed = written as u64 + data.len() as u64;
            if needed > self.limit {
                return Err(corrupt(
                    "transposed chunk decodes to more than its decoded data size",
                ));
            }
            let new_len = (written as u64)
                .saturating_mul(2)
                .max(needed)
                .max(4096)
                .min(self.limit) as usize;
            let mut grown = vec![0u8; new_len];
            grown[new_len - written..].copy_from_slice(&self.buf[self.start..]);
            self.buf = grown;
            self.start = new_len - written;
        }
        self.start -= data.len();
        self.buf[self.start..self.start + data.len()].copy_from_slice(data);
        Ok(())
    }
}

/// A value buffer with a read position.
struct Buffer {
    data: Bytes,
    pos: usize,
}

impl Buffer {
    fn take(&mut self, n: u64) -> Result<&[u8], DecodeFault> {
        if n > (self.data.len() - self.pos) as u64 {
            return Err(corrupt("transposed chunk buffer exhausted"));
        }
        let s = &self.data[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }
}

/// Decompresses one buffer of the chunk (a no-op slice when uncompressed), taking its
/// declared size from `budget` first: the buffers of a chunk cannot rightly decode to much more
/// than the records they rebuild, so a buffer declaring more is refused before it is
/// decompressed.
fn decompress(ct: CompressionType, block: Bytes, budget: &mut u64) -> Result<Bytes, DecodeFault> {
    if ct == CompressionType::None {
        return Ok(block);
    }
    let view = ChunkBytes::plain(block);
    let (size, stream) = compression::split_prefix(ct, &view)?;
    if size > *budget {
        return Err(corrupt(format!(
            "transposed chunk: a buffer declares {size} decompressed bytes, more than its records can use"
        )));
    }
    *budget -= size;
    Ok(Bytes::from(compression::decompress_to_vec(
        ct, &stream, size,
    )?))
}

/// Reads a varint32 from the header or fails with `what`.
fn u32_of(c: &mut Cursor<'_>, what: &str) -> Result<u32, DecodeFault> {
    c.u32()
        .ok_or_else(|| corrupt(format!("transposed chunk header: bad {what}")))
}

/// Reads a varint64 from the header or fails with `what`.
fn u64_of(c: &mut Cursor<'_>, what: &str) -> Result<u64, DecodeFault> {
    c.u64()
        .ok_or_else(|| corrupt(format!("transposed chunk header: bad {what}")))
}

/// Splits the buckets (which follow the header in the data) into buffers.
fn read_buffers(
    ct: CompressionType,
    header: &mut Cursor<'_>,
    data: &Bytes,
    data_pos: &mut usize,
    budget: &mut u64,
) -> Result<Vec<Buffer>, DecodeFault> {
    let num_buckets = u32_of(header, "bucket count")?;
    let num_buffers = u32_of(header, "buffer count")?;
    // Every bucket and buffer length takes at least one header byte.
    if u64::from(num_buckets) + u64::from(num_buffers) > header.remaining() as u64 {
        return Err(corrupt(
            "transposed chunk header: more buckets or buffers than header bytes",
        ));
    }
    if num_buckets == 0 {
        if num_buffers != 0 {
            return Err(corrupt("transposed chunk: buffers without buckets"));
        }
        return Ok(Vec::new());
    }
    let mut buckets = Vec::with_capacity(num_buckets as usize);
    for _ in 0..num_buckets {
        let len = u64_of(header, "bucket length")?;
        if len > (data.len() - *data_pos) as u64 {
            return Err(corrupt(
                "transposed chunk: bucket extends past the chunk data",
            ));
        }
        let block = data.slice(*data_pos..*data_pos + len as usize);
        *data_pos += len as usize;
        buckets.push(decompress(ct, block, budget)?);
    }
    let mut buffers = Vec::with_capacity(num_buffers as usize);
    let mut bucket = 0usize;
    let mut offset = 0usize;
    for _ in 0..num_buffers {
        let len = u64_of(header, "buffer length")?;
        let current = &buckets[bucket];
        if len > (current.len() - offset) as u64 {
            return Err(corrupt(
                "transposed chunk: buffer does not fit in its bucket",
            ));
        }
        buffers.push(Buffer {
            data: current.slice(offset..offset + len as usize),
            pos: 0,
        });
        offset += len as usize;
        while offset == buckets[bucket].len() && bucket + 1 < buckets.len() {
            bucket += 1;
            offset = 0;
        }
    }
    if bucket + 1 < buckets.len() {
        return Err(corrupt("transposed chunk: too few buffers for its buckets"));
    }
    if offset != buckets[bucket].len() {
        return Err(corrupt(
            "transposed chunk: unused data at the end of a bucket",
        ));
    }
    Ok(buffers)
}

/// Builds the action for a proto tag node, reading its buffer index when it
/// has one.
fn tag_node(
    raw_tag: u32,
    subtypes: &[u8],
    subtype_index: &mut usize,
    header: &mut Cursor<'_>,
    num_buffers: usize,
) -> Result<Node, DecodeFault> {
    let mut tag = raw_tag;
    let mut subtype = LENGTH_DELIMITED_STRING;
    if tag & 7 == SUBMESSAGE_END_WIRE_TYPE {
        tag = tag - SUBMESSAGE_END_WIRE_TYPE + 2;
        subtype = LENGTH_DELIMITED_END_OF_SUBMESSAGE;
    }
    let wire_type = tag & 7;
    if wire_type > 5 || tag < 8 {
        return Err(corrupt(format!("transposed chunk: invalid tag {raw_tag}")));
    }
    let mut encoded = Vec::with_capacity(5);
    varint::write_u64(&mut encoded, u64::from(tag));
    let mut tag_bytes = [0u8; 6];
    tag_bytes[..encoded.len()].copy_from_slice(&encoded);
    let tag_len = encoded.len() as u8;
    if wire_type == 0 {
        subtype = *subtypes
            .get(*subtype_index)
            .ok_or_else(|| corrupt("transposed chunk: missing subtype"))?;
        *subtype_index += 1;
    }
    let has_buffer = match wire_type {
        0 => subtype < VARINT_INLINE_0,
        1 | 5 => true,
        2 => subtype == LENGTH_DELIMITED_STRING,
        _ => false,
    };
    let mut buffer = 0u32;
    if has_buffer {
        buffer = u32_of(header, "buffer index")?;
        if buffer as usize >= num_buffers {
            return Err(corrupt("transposed chunk: buffer index too large"));
        }
    }
    let action = match wire_type {
        0 if subtype < VARINT_INLINE_0 => Action::Varint(subtype + 1),
        0 if subtype <= VARINT_INLINE_MAX => {
            tag_bytes[tag_len as usize] = subtype - VARINT_INLINE_0;
            Action::CopyTag(tag_len + 1)
        }
        0 => return Err(corrupt("transposed chunk: invalid varint subtype")),
        1 => Action::Fixed(8),
        5 => Action::Fixed(4),
        2 if subtype == LENGTH_DELIMITED_STRING => Action::String,
        2 => Action::SubmessageEnd,
        _ => Action::CopyTag(tag_len), // start or end of group
    };
    Ok(Node {
        action,
        tag: tag_bytes,
        tag_len,
        buffer,
        next: 0,
        implicit: false,
    })
}

/// Whether following implicit transitions from some node never ends.
fn contains_implicit_loop(nodes: &[Node]) -> bool {
    let mut loop_ids = vec![0usize; nodes.len()];
    let mut next_id = 1usize;
    for i in 0..nodes.len() {
        if loop_ids[i] != 0 {
            continue;
        }
        loop_ids[i] = next_id;
        let mut j = i;
        while nodes[j].implicit {
            j = nodes[j].next as usize;
            if loop_ids[j] == next_id {
                return true;
            }
            if loop_ids[j] != 0 {
                break;
            }
            loop_ids[j] = next_id;
        }
        next_id += 1;
    }
    false
}

/// Decodes a transposed chunk's `data` into its records.
pub(crate) fn decode(
    data: Bytes,
    num_records: u64,
    decoded_data_size: u64,
) -> Result<Decoded, DecodeFault> {
    let mut top = Cursor::new(&data);
    let ct = compression::parse_type(
        top.byte()
            .ok_or_else(|| corrupt("transposed chunk data is empty"))?,
    )?;
    let header_size = top
        .u64()
        .ok_or_else(|| corrupt("transposed chunk: bad header size"))?;
    if header_size > top.remaining() as u64 {
        return Err(corrupt(
            "transposed chunk: header extends past the chunk data",
        ));
    }
    let header_start = top.pos();
    let mut data_pos = header_start + header_size as usize;
    // Every buffer byte goes into a record, except the lengths of non-proto records (at most
    // ten bytes each); the header and transitions are of the order of the records' fields. So
    // everything decompressed is bounded by twice the output, plus slack.
    let mut budget = decoded_data_size
        .saturating_mul(2)
        .saturating_add(num_records.saturating_mul(10))
        .saturating_add(1 << 20);
    let header_bytes = decompress(ct, data.slice(header_start..data_pos), &mut budget)?;
    let mut header = Cursor::new(&header_bytes);

    let mut buffers = read_buffers(ct, &mut header, &data, &mut data_pos, &mut budget)?;

    let size = u32_of(&mut header, "state machine size")? as usize;
    // Each node has a tag and a next index of at least one byte each.
    if size as u64 * 2 > header.remaining() as u64 {
        return Err(corrupt(
            "transposed chunk: state machine larger than its header",
        ));
    }
    let mut tags = Vec::with_capacity(size);
    let mut num_subtypes = 0usize;
    for _ in 0..size {
        let tag = u32_of(&mut header, "tag")?;
        if tag & 7 == 0 && tag >= 8 {
            num_subtypes += 1;
        }
        tags.push(tag);
    }
    let mut next_nodes = Vec::with_capacity(size);
    for _ in 0..size {
        next_nodes.push(u32_of(&mut header, "next node")?);
    }
    let subtypes = header
        .bytes(num_subtypes as u64)
        .ok_or_else(|| corrupt("transposed chunk header: subtypes missing"))?;
    let mut subtype_index = 0usize;
    let mut nodes = Vec::with_capacity(size);
    let mut has_non_proto = false;
    for (&tag, &next) in tags.iter().zip(&next_nodes) {
        let mut node = match tag {
            NO_OP | START_OF_MESSAGE | START_OF_SUBMESSAGE => Node {
                action: match tag {
                    NO_OP => Action::NoOp,
                    START_OF_MESSAGE => Action::MessageStart,
                    _ => Action::SubmessageStart,
                },
                tag: [0; 6],
                tag_len: 0,
                buffer: 0,
                next: 0,
                implicit: false,
            },
            NON_PROTO => {
                let buffer = u32_of(&mut header, "buffer index")?;
                if buffer as usize >= buffers.len() {
                    return Err(corrupt("transposed chunk: buffer index too large"));
                }
                has_non_proto = true;
                Node {
                    action: Action::NonProto,
                    tag: [0; 6],
                    tag_len: 0,
                    buffer,
                    next: 0,
                    implicit: false,
                }
            }
            _ => tag_node(
                tag,
                subtypes,
                &mut subtype_index,
                &mut header,
                buffers.len(),
            )?,
        };
        let mut next = next as usize;
        if next >= size {
            next -= size;
            node.implicit = true;
        }
        if next >= size {
            return Err(corrupt("transposed chunk: next node index too large"));
        }
        node.next = next as u32;
        nodes.push(node);
    }
    if has_non_proto && buffers.is_empty() {
        return Err(corrupt(
            "transposed chunk: missing buffer for non-proto record lengths",
        ));
    }
    let first_node = u32_of(&mut header, "first node")? as usize;
    if first_node >= size {
        return Err(corrupt("transposed chunk: first node index too large"));
    }
    if contains_implicit_loop(&nodes) {
        return Err(corrupt("transposed chunk: nodes contain an implicit loop"));
    }
    if header.remaining() != 0 {
        return Err(corrupt(
            "transposed chunk: extra bytes at the end of the header",
        ));
    }
    let transitions = decompress(ct, data.slice(data_pos..), &mut budget)?;

    let initial = decoded_data_size.min(
        (data.len() as u64)
            .saturating_mul(8)
            .saturating_add(1 << 20),
    ) as usize;
    let mut out = BackBuffer {
        buf: vec![0u8; initial],
        start: initial,
        limit: decoded_data_size,
    };
    let mut limits: Vec<u64> = Vec::with_capacity(
        num_records
            .min(decoded_data_size.saturating_add(1))
            .min(1 << 20) as usize,
    );
    let mut stack: Vec<(u64, [u8; 6], u8)> = Vec::new();
    let nonproto_lengths = buffers.len().saturating_sub(1);

    let mut node = first_node;
    let mut num_iters = u32::from(nodes[node].implicit);
    let mut transitions_pos = 0usize;
    loop {
        let n = nodes
            .get(node)
            .ok_or_else(|| corrupt("transposed chunk: invalid node index"))?;
        match n.action {
            Action::NoOp => {}
            Action::CopyTag(len) => out.prepend(&n.tag[..len as usize])?,
            Action::Varint(len) => {
                let mut bytes = [0u8; 10];
                let src = buffers[n.buffer as usize].take(u64::from(len))?;
                bytes[..len as usize].copy_from_slice(src);
                for b in bytes.iter_mut().take(len as usize - 1) {
                    *b |= 0x80;
                }
                out.prepend(&bytes[..len as usize])?;
                out.prepend(&n.tag[..n.tag_len as usize])?;
            }
            Action::Fixed(len) => {
                let src = buffers[n.buffer as usize].take(u64::from(len))?;
                out.prepend(src)?;
                out.prepend(&n.tag[..n.tag_len as usize])?;
            }
            Action::String => {
                let buf = &mut buffers[n.buffer as usize];
                let (length, length_len) = varint::read_u32(&buf.data[buf.pos..])
                    .ok_or_else(|| corrupt("transposed chunk: bad string length"))?;
                let src = buf.take(length_len as u64 + u64::from(length))?;
                out.prepend(src)?;
                out.prepend(&n.tag[..n.tag_len as usize])?;
            }
            Action::SubmessageEnd => {
                // An open submessage costs at least two output bytes when it
                // closes; bound the stack by what the output can hold.
                if stack.len() as u64 > decoded_data_size / 2 {
                    return Err(corrupt("transposed chunk: too many open submessages"));
                }
                stack.push((out.written(), n.tag, n.tag_len));
            }
            Action::SubmessageStart => {
                let (end, tag, tag_len) = stack
                    .pop()
                    .ok_or_else(|| corrupt("transposed chunk: submessage stack underflow"))?;
                let length = out.written() - end;
                if length > u64::from(u32::MAX) {
                    return Err(corrupt("transposed chunk: submessage too large"));
                }
                let mut len_bytes = Vec::with_capacity(5);
                varint::write_u64(&mut len_bytes, length);
                out.prepend(&len_bytes)?;
                out.prepend(&tag[..tag_len as usize])?;
            }
            Action::NonProto | Action::MessageStart => {
                if let Action::NonProto = n.action {
                    let lengths = &mut buffers[nonproto_lengths];
                    let (length, length_len) = varint::read_u32(&lengths.data[lengths.pos..])
                        .ok_or_else(|| corrupt("transposed chunk: bad non-proto record length"))?;
                    lengths.pos += length_len;
                    let src = buffers[n.buffer as usize].take(u64::from(length))?;
                    out.prepend(src)?;
                }
                if !stack.is_empty() {
                    return Err(corrupt(
                        "transposed chunk: submessages still open at a record boundary",
                    ));
                }
                if limits.len() as u64 == num_records {
                    return Err(corrupt(
                        "transposed chunk: more records than the header declares",
                    ));
                }
                limits.push(out.written());
            }
        }
        node = n.next as usize;
        if num_iters == 0 {
            let Some(&t) = transitions.get(transitions_pos) else {
                break;
            };
            transitions_pos += 1;
            node += usize::from(t >> 2);
            num_iters = u32::from(t & 3);
            if nodes.get(node).is_some_and(|n| n.implicit) {
                num_iters += 1;
            }
        } else if !nodes.get(node).is_some_and(|n| n.implicit) {
            num_iters -= 1;
        }
    }

    if !stack.is_empty() {
        return Err(corrupt(
            "transposed chunk: submessages still open at the end",
        ));
    }
    if limits.len() as u64 != num_records {
        return Err(corrupt(format!(
            "transposed chunk holds {} records but its header declares {num_records}",
            limits.len()
        )));
    }
    let total = out.written();
    if total != decoded_data_size || limits.last().copied().unwrap_or(0) != total {
        return Err(corrupt(format!(
            "transposed chunk decodes to {total} bytes but its header declares {decoded_data_size}"
        )));
    }
    // Limits were recorded from the back: convert to forward end offsets.
    let n = limits.len();
    let forward: Vec<u64> = (0..n)
        .map(|j| total - if j + 1 < n { limits[n - 2 - j] } else { 0 })
        .collect();
    let values = Bytes::from(out.buf).slice(out.start..);
    Ok(Decoded {
        values,
        limits: forward,
    })
}

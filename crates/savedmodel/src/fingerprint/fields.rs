//! Field occurrences read from where a message is held, without copying: a message the
//! Merger built ([`WireMessage`]), or serialized bytes scanned in place (a slice of a mapped
//! file or of a chunk), so that nested messages cost one scan, not an allocation per field.

use std::borrow::Cow;

use crate::{Result, SavedModelError};
use bytes::Bytes;
use unbound_wire::codec::{read_field, WireType};
use unbound_wire::{Payload, WireMessage, WireValue};

use super::rope::Rope;

/// Where a message's fields come from. Several sources of one message are merged in order
/// (protobuf's semantics for a singular message field that occurs more than once).
pub enum Source<'a> {
    /// A message already held (a parsed file, or a message the Merger expanded).
    Ref(&'a WireMessage),
    /// Serialized fields in a buffer of their own, scanned when iterated.
    Raw(Bytes),
    /// Serialized fields at `buf[start..end]`, scanned when iterated.
    Slice(&'a Bytes, usize, usize),
    /// A built message and the pieces its serialization is made of, in order (a split's
    /// chunk as it is written: for a run of nodes, one slice of the model file). Read as
    /// [`Source::Ref`]; the encoder takes the pieces as they are where every field of the
    /// message is a child it trusts (see [`Source::run_of`]).
    Written(&'a WireMessage, &'a [Bytes]),
}

/// One field value, borrowed from its [`Source`].
#[derive(Clone, Copy)]
pub enum Val<'s> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 5.
    Fixed32(u32),
    /// Wire type 2: `buf[start..end]`.
    Slice(&'s Bytes, usize, usize),
    /// Wire type 2, as held by a [`WireMessage`] (possibly a lazy record).
    Payload(&'s Payload),
    /// Wire type 2, a message the Merger expanded.
    Message(&'s WireMessage),
    /// A group's raw contents.
    Group(&'s [u8]),
}

fn wire_error(error: unbound_wire::DecodeError) -> SavedModelError {
    SavedModelError::malformed("message being fingerprinted", error)
}

impl Source<'_> {
    /// Calls `f` with each field occurrence in wire order.
    pub fn for_each<'s>(&'s self, mut f: impl FnMut(u32, Val<'s>)) -> Result<()> {
        match self {
            Source::Ref(m) | Source::Written(m, _) => {
                for field in &m.fields {
                    f(field.number, Val::from_wire(&field.value));
                }
            }
            Source::Raw(buf) => scan(buf, 0, buf.len(), f)?,
            Source::Slice(buf, start, end) => scan(buf, *start, *end, f)?,
        }
        Ok(())
    }

    /// Size of the serialized input when known without serializing (a hint).
    pub fn input_len(&self) -> usize {
        match self {
            Source::Ref(_) => 0,
            Source::Raw(b) => b.len(),
            Source::Slice(_, s, e) => e - s,
            Source::Written(_, pieces) => pieces.iter().map(Bytes::len).sum(),
        }
    }

    /// The number of a [`Source::Written`] message whose fields are all occurrences of that
    /// one number holding serialized bytes in memory, and how many there are (a chunk of
    /// graph nodes): what lets the encoder take its pieces as they are. `None` for any other
    /// source, and when a field holds a built message or a lazy record (the encoder encodes
    /// those again, so the pieces need not be its bytes).
    pub fn run_of(&self) -> Option<(u32, usize)> {
        let Source::Written(m, _) = self else {
            return None;
        };
        let number = m.fields.first()?.number;
        m.fields
            .iter()
            .all(|f| f.number == number && matches!(f.value, WireValue::Bytes(Payload::Inline(_))))
            .then_some((number, m.fields.len()))
    }
}

/// Calls `f` with each field of `buf[start..end]`.
pub fn scan<'s>(
    buf: &'s Bytes,
    start: usize,
    end: usize,
    mut f: impl FnMut(u32, Val<'s>),
) -> Result<()> {
    let within = &buf[..end];
    let mut pos = start;
    while pos < end {
        let raw = read_field(within, &mut pos).map_err(wire_error)?;
        let at = &buf[raw.start..raw.end];
        let val = match raw.wire_type {
            WireType::Varint => Val::Varint(raw.varint),
            WireType::Fixed64 => Val::Fixed64(u64::from_le_bytes(at.try_into().expect("8 bytes"))),
            WireType::Fixed32 => Val::Fixed32(u32::from_le_bytes(at.try_into().expect("4 bytes"))),
            WireType::Len => Val::Slice(buf, raw.start, raw.end),
            WireType::StartGroup | WireType::EndGroup => Val::Group(at),
        };
        f(raw.number, val);
    }
    Ok(())
}

impl<'s> Val<'s> {
    /// The borrowed form of a held value.
    pub fn from_wire(value: &'s WireValue) -> Self {
        match value {
            WireValue::Varint(v) => Val::Varint(*v),
            WireValue::Fixed64(v) => Val::Fixed64(*v),
            WireValue::Fixed32(v) => Val::Fixed32(*v),
            WireValue::Bytes(p) => Val::Payload(p),
            WireValue::Message(m) => Val::Message(m),
            WireValue::Group(g) => Val::Group(g),
        }
    }

    /// An owned copy (sharing the underlying buffers).
    pub fn to_wire(self) -> WireValue {
        match self {
            Val::Varint(v) => WireValue::Varint(v),
            Val::Fixed64(v) => WireValue::Fixed64(v),
            Val::Fixed32(v) => WireValue::Fixed32(v),
            Val::Slice(b, s, e) => WireValue::Bytes(Payload::Inline(b.slice(s..e))),
            Val::Payload(p) => WireValue::Bytes(p.clone()),
            Val::Message(m) => WireValue::Message(m.clone()),
            Val::Group(g) => WireValue::Group(Bytes::copy_from_slice(g)),
        }
    }

    /// Whether the value is length-delimited (a string, bytes, message or packed run).
    pub fn is_len(self) -> bool {
        matches!(self, Val::Slice(..) | Val::Payload(_) | Val::Message(_))
    }

    /// The message a length-delimited value holds.
    pub fn to_source(self) -> Result<Option<Source<'s>>> {
        Ok(match self {
            Val::Slice(b, s, e) => Some(Source::Slice(b, s, e)),
            Val::Payload(Payload::Inline(b)) => Some(Source::Slice(b, 0, b.len())),
            Val::Payload(p) => Some(Source::Raw(p.bytes()?)),
            Val::Message(m) => Some(Source::Ref(m)),
            _ => None,
        })
    }

    /// The bytes of a length-delimited value (a held message is serialized as it is held).
    pub fn bytes(self) -> Result<Option<Bytes>> {
        Ok(match self {
            Val::Slice(b, s, e) => Some(b.slice(s..e)),
            Val::Payload(p) => Some(p.bytes()?),
            Val::Message(m) => Some(Bytes::from(m.to_vec()?)),
            _ => None,
        })
    }

    /// Appends a length-delimited value, length prefix first: small values are copied, large
    /// ones shared (or, for a lazy record, referenced).
    pub fn put_len(self, out: &mut Rope) -> Result<()> {
        match self {
            Val::Slice(b, s, e) => {
                out.put_varint((e - s) as u64);
                out.put_shared(b, s, e);
            }
            Val::Payload(p) => {
                out.put_varint(p.len());
                out.put_payload(p);
            }
            Val::Message(m) => {
                let bytes = m.to_vec()?;
                out.put_varint(bytes.len() as u64);
                out.put(&bytes);
            }
            _ => {
                out.put_varint(0);
            }
        }
        Ok(())
    }

    /// Whether a length-delimited value is empty.
    pub fn is_empty_len(self) -> bool {
        match self {
            Val::Slice(_, s, e) => s == e,
            Val::Payload(p) => p.is_empty(),
            Val::Message(m) => m.fields.is_empty(),
            _ => true,
        }
    }
}

/// The message a length-delimited held value holds, parsed one level if it is not expanded.
pub fn held_message(value: &WireValue) -> Result<Option<Cow<'_, WireMessage>>> {
    Ok(match value {
        WireValue::Message(m) => Some(Cow::Borrowed(m)),
        WireValue::Bytes(p) => Some(Cow::Owned(
            WireMessage::parse(&p.bytes()?, None).map_err(wire_error)?,
        )),
        _ => None,
    })
}

/// The bytes of the last length-delimited occurrence of field `number` in `source`.
pub fn last_bytes(source: &Source<'_>, number: u32) -> Result<Option<Bytes>> {
    let mut last = None;
    source.for_each(|n, v| {
        if n == number && v.is_len() {
            last = Some(v);
        }
    })?;
    match last {
        Some(v) => v.bytes(),
        None => Ok(None),
    }
}

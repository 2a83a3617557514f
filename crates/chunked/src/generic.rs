//! A size-driven splitter for any message type, for types without a splitter of their own.
//!
//! Walking the message in field order while it is above the maximum: a message value (singular,
//! repeated element or map value) larger than a third of the maximum moves whole into a chunk,
//! leaving an empty placeholder; one above the maximum is first split on its own, its chunks
//! nested under its chunk's `ChunkedMessage`; a string
//! or bytes value larger than a third of the maximum becomes a BYTES chunk when the field is
//! singular. If the message is still above the maximum, its repeated message, string and bytes
//! fields are cut into runs that fit, moved into chunks of the message's own type with an empty
//! tag (appended on merge), as TensorFlow does for nodes. Only layouts TensorFlow's own Merger
//! accepts are produced: it aborts on BYTES chunks for repeated elements or map values.

use prost_reflect::{Kind, MessageDescriptor};

use crate::error::Result;
use crate::split::{Chunk, ChunkSink, Scope};
use crate::tags::{KeyValue, PathElem};
use unbound_wire::{Payload, WireMessage, WireValue};

/// Deepest recursion of the generic splitter.
const MAX_DEPTH: usize = 64;

/// Splits `message` (of type `desc`) in place until it fits `max_size`, adding chunks through
/// `scope`.
pub fn split_generic(
    message: &mut WireMessage,
    desc: &MessageDescriptor,
    scope: &mut Scope<'_>,
    max_size: u64,
) -> Result<()> {
    split_level(message, desc, scope, max_size, 0)
}

fn split_level(
    message: &mut WireMessage,
    desc: &MessageDescriptor,
    scope: &mut Scope<'_>,
    max: u64,
    depth: usize,
) -> Result<()> {
    if message.encoded_len() <= max || depth > MAX_DEPTH {
        return Ok(());
    }
    let mut ranks: std::collections::HashMap<u32, u64> = std::collections::HashMap::new();
    for pos in 0..message.fields.len() {
        if message.encoded_len() <= max {
            break;
        }
        let number = message.fields[pos].number;
        // An occurrence of another wire type than the field's is an unknown field to protobuf
        // C++: neither an element nor a place to cut.
        let Some(fd) = desc
            .get_field(number)
            .filter(|fd| unbound_wire::wire_type_fits(fd, &message.fields[pos].value))
        else {
            continue;
        };
        let rank = {
            let r = ranks.entry(number).or_insert(0);
            *r += 1;
            *r - 1
        };
        let size = value_len(&message.fields[pos].value);
        if size <= max / 3 {
            continue;
        }
        match fd.kind() {
            Kind::Message(sub_desc) if fd.is_map() => {
                let value_fd = sub_desc.map_entry_value_field();
                let Kind::Message(value_desc) = value_fd.kind() else {
                    continue;
                };
                let entry = message.expand_at(pos, &sub_desc)?;
                let Some(key) = entry_key(entry, &sub_desc) else {
                    continue;
                };
                let value = entry.singular_message_mut(&value_fd)?;
                let path = [PathElem::Number(number), PathElem::Key(key)];
                chunk_message(value, &value_desc, &mut scope.child(&path), max, depth)?;
            }
            Kind::Message(sub_desc) => {
                let path: Vec<PathElem> = if fd.is_list() {
                    vec![PathElem::Number(number), PathElem::Index(rank)]
                } else {
                    vec![PathElem::Number(number)]
                };
                if !fd.is_list() && message.message_positions(number).len() > 1 {
                    continue; // several occurrences merge; leave such rare layouts whole
                }
                let sub = message.expand_at(pos, &sub_desc)?;
                chunk_message(sub, &sub_desc, &mut scope.child(&path), max, depth)?;
            }
            // TensorFlow's Merger only accepts BYTES chunks on singular fields (it aborts on
            // repeated elements and map values), so repeated strings move in runs instead.
            Kind::String | Kind::Bytes if !fd.is_list() => {
                let WireValue::Bytes(payload) = &message.fields[pos].value else {
                    continue;
                };
                let payload = payload.clone();
                let path = [PathElem::Number(number)];
                scope.add_chunk(Chunk::Bytes(payload), &path, None)?;
                message.fields[pos].value = WireValue::Bytes(Payload::Inline(bytes::Bytes::new()));
            }
            _ => {}
        }
    }
    if message.encoded_len() > max {
        split_runs(message, desc, scope, max)?;
    }
    Ok(())
}

/// Moves a large message value into a chunk. One above the maximum is first split on its own,
/// and its chunks are nested under it (see [`crate::ChunkSink::add_nested`]).
fn chunk_message(
    sub: &mut WireMessage,
    sub_desc: &MessageDescriptor,
    scope: &mut Scope<'_>,
    max: u64,
    depth: usize,
) -> Result<()> {
    let taken = std::mem::replace(sub, WireMessage::new(Some(sub_desc.clone())));
    let mut taken = taken;
    taken.descriptor = Some(sub_desc.clone());
    if taken.encoded_len() > max {
        let mut part = ChunkSink::new(sub_desc.clone(), true);
        split_level(&mut taken, sub_desc, &mut part.root(), max, depth + 1)?;
        scope.add_nested(part.finish(taken), &[])
    } else {
        scope
            .add_chunk(Chunk::Message(taken), &[], None)
            .map(|_| ())
    }
}

/// Moves runs of repeated message, string and bytes elements into chunks of the parent's type
/// (empty tag: merged by concatenation).
fn split_runs(
    message: &mut WireMessage,
    desc: &MessageDescriptor,
    scope: &mut Scope<'_>,
    max: u64,
) -> Result<()> {
    let repeated: Vec<u32> = desc
        .fields()
        .filter(|f| {
            f.is_list() && matches!(f.kind(), Kind::Message(_) | Kind::String | Kind::Bytes)
        })
        .map(|f| f.number())
        .collect();
    let mut run = WireMessage::new(Some(desc.clone()));
    let mut kept = Vec::with_capacity(message.fields.len());
    let mut size = 0u64;
    let fields = std::mem::take(&mut message.fields);
    let mut moving = false;
    let mut base_size: u64 = fields.iter().map(|f| f.encoded_len()).sum();
    for f in fields {
        let len = f.encoded_len();
        if repeated.contains(&f.number) && (moving || base_size > max) {
            moving = true;
            base_size -= len;
            if size + len > max && !run.fields.is_empty() {
                scope.add_chunk(
                    Chunk::Message(std::mem::replace(
                        &mut run,
                        WireMessage::new(Some(desc.clone())),
                    )),
                    &[],
                    None,
                )?;
                size = 0;
            }
            size += len;
            run.fields.push(f);
        } else {
            kept.push(f);
        }
    }
    if !run.fields.is_empty() {
        scope.add_chunk(Chunk::Message(run), &[], None)?;
    }
    message.fields = kept;
    Ok(())
}

fn value_len(v: &WireValue) -> u64 {
    match v {
        WireValue::Bytes(p) => p.len(),
        WireValue::Message(m) => m.encoded_len(),
        _ => 0,
    }
}

/// The typed key of an expanded map entry, for a field tag.
fn entry_key(entry: &WireMessage, entry_desc: &MessageDescriptor) -> Option<KeyValue> {
    let key_fd = entry_desc.map_entry_key_field();
    let value = entry
        .fields
        .iter()
        .rev()
        .find(|f| f.number == key_fd.number())
        .map(|f| &f.value);
    Some(match (key_fd.kind(), value) {
        (Kind::String, Some(WireValue::Bytes(p))) => {
            KeyValue::Str(String::from_utf8(p.bytes().ok()?.to_vec()).ok()?)
        }
        (Kind::String, None) => KeyValue::Str(String::new()),
        (Kind::Bool, Some(WireValue::Varint(v))) => KeyValue::Bool(*v != 0),
        (Kind::Bool, None) => KeyValue::Bool(false),
        (Kind::Int32 | Kind::Int64, Some(WireValue::Varint(v))) => KeyValue::Signed(*v as i64),
        (Kind::Uint32 | Kind::Uint64, Some(WireValue::Varint(v))) => KeyValue::Unsigned(*v),
        (Kind::Sint32 | Kind::Sint64, Some(WireValue::Varint(v))) => {
            KeyValue::Signed(((*v >> 1) as i64) ^ -((*v & 1) as i64))
        }
        (Kind::Fixed32, Some(WireValue::Fixed32(v))) => KeyValue::Unsigned(u64::from(*v)),
        (Kind::Sfixed32, Some(WireValue::Fixed32(v))) => KeyValue::Signed(i64::from(*v as i32)),
        (Kind::Fixed64, Some(WireValue::Fixed64(v))) => KeyValue::Unsigned(*v),
        (Kind::Sfixed64, Some(WireValue::Fixed64(v))) => KeyValue::Signed(*v as i64),
        (_, None) => KeyValue::Signed(0),
        _ => return None,
    })
}

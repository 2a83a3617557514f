//! Protobuf C++'s deterministic serialization (`SetSerializationDeterministic(true)`) of a
//! message held at the wire level, as TensorFlow's fingerprinting hashes it.
//!
//! The result is what C++ would write after parsing the input:
//!
//! - known fields in field-number order, then unknown fields in the order they were read
//!   (also a known field number with the wrong wire type, which C++ keeps as unknown);
//! - a singular scalar is its last occurrence, written unless it equals the default and the
//!   field has no presence (proto3 `optional` and oneof members have presence; floats compare
//!   by bits, so `-0.0` is written); varints are re-encoded by type (`int32` and enums
//!   sign-extended to 10 bytes, `uint32` truncated, `bool` as 0/1);
//! - a singular message merges all its occurrences; a oneof keeps only its last-set member
//!   (merging that member's occurrences since it was last set);
//! - repeated numeric fields are written packed when the schema says so (proto3's default),
//!   however they were read;
//! - map entries: the last entry wins for a key, entries are sorted by key (strings bytewise,
//!   integers by value, `false` before `true`), and **both key and value are always written**,
//!   defaults included (`08 00` for key 0, `12 00` for an empty message value); unknown fields
//!   inside an entry are dropped, as C++ does.
//!
//! Groups are passed through as unknown fields (no TensorFlow message uses them).

use std::collections::HashMap;
use std::rc::Rc;

use bytes::Bytes;
use prost_reflect::{FieldDescriptor, MessageDescriptor};
use unbound_chunked::{ChunkedError, Payload, Result, WireField, WireMessage, WireValue};

use super::maps::{map_entries, KeyOrder, MapKey, MapValue};
use super::rope::Rope;
use super::wire_values::{
    class_of, fits, numbers, put_number, put_numbers, put_unknown, Class, LEN,
};

/// Where a message's fields come from. Several sources of one message are merged in order
/// (protobuf's semantics for a singular message field that occurs more than once).
pub enum Source<'a> {
    /// A message already held (a parsed file, or a message the Merger expanded).
    Ref(&'a WireMessage),
    /// A message parsed on the way.
    Owned(WireMessage),
}

impl Source<'_> {
    /// The message.
    pub fn message(&self) -> &WireMessage {
        match self {
            Source::Ref(m) => m,
            Source::Owned(m) => m,
        }
    }
}

/// The source of a length-delimited value that holds a message.
pub fn source_of(value: &WireValue) -> Result<Option<Source<'_>>> {
    Ok(match value {
        WireValue::Message(m) => Some(Source::Ref(m)),
        WireValue::Bytes(p) => Some(Source::Owned(parse(p)?)),
        _ => None,
    })
}

/// Parses one level of a payload (reading it if it is a lazy record).
pub fn parse(payload: &Payload) -> Result<WireMessage> {
    let bytes = payload.bytes()?;
    WireMessage::parse(&bytes, None).map_err(|error| ChunkedError::Wire {
        source_name: "message being fingerprinted".to_string(),
        error,
    })
}

/// The bytes of a length-delimited value (a message value is serialized as it is held).
pub fn payload_bytes(value: &WireValue) -> Result<Option<Bytes>> {
    Ok(match value {
        WireValue::Bytes(p) => Some(p.bytes()?),
        WireValue::Message(m) => Some(Bytes::from(m.to_vec()?)),
        _ => None,
    })
}

/// A known field, as the encoder needs it.
struct FieldInfo {
    fd: FieldDescriptor,
    number: u32,
    class: Class,
    /// For a map field: the key and value fields of its entry.
    map: Option<(FieldDescriptor, FieldDescriptor)>,
    list: bool,
    packed: bool,
    presence: bool,
    /// Index of its (non-synthetic) oneof in [`Layout::oneofs`].
    oneof: Option<usize>,
}

/// A message type's fields in number order.
struct Layout {
    fields: Vec<FieldInfo>,
    by_number: HashMap<u32, usize>,
    oneofs: usize,
}

impl Layout {
    fn new(desc: &MessageDescriptor) -> Self {
        let oneof_names: Vec<String> = desc
            .oneofs()
            .filter(|o| !o.is_synthetic())
            .map(|o| o.full_name().to_string())
            .collect();
        let mut fields: Vec<FieldInfo> = desc
            .fields()
            .map(|fd| {
                let map = fd.is_map().then(|| {
                    let entry = fd.kind().as_message().expect("map entry").clone();
                    (entry.map_entry_key_field(), entry.map_entry_value_field())
                });
                let oneof = fd
                    .containing_oneof()
                    .filter(|o| !o.is_synthetic())
                    .and_then(|o| oneof_names.iter().position(|n| n == o.full_name()));
                FieldInfo {
                    number: fd.number(),
                    class: class_of(&fd),
                    map,
                    list: fd.is_list(),
                    packed: fd.is_packed(),
                    presence: fd.supports_presence(),
                    oneof,
                    fd,
                }
            })
            .collect();
        fields.sort_by_key(|f| f.number);
        let by_number = fields
            .iter()
            .enumerate()
            .map(|(i, f)| (f.number, i))
            .collect();
        Self {
            fields,
            by_number,
            oneofs: oneof_names.len(),
        }
    }
}

/// Writes deterministic serializations; caches the field layout of each message type.
#[derive(Default)]
pub struct Encoder {
    layouts: HashMap<String, Rc<Layout>>,
}

impl Encoder {
    /// A new encoder.
    pub fn new() -> Self {
        Self::default()
    }

    fn layout(&mut self, desc: &MessageDescriptor) -> Rc<Layout> {
        self.layouts
            .entry(desc.full_name().to_string())
            .or_insert_with(|| Rc::new(Layout::new(desc)))
            .clone()
    }

    /// The deterministic serialization of the message of type `desc` made of `sources`.
    pub fn encode(&mut self, sources: &[Source<'_>], desc: &MessageDescriptor) -> Result<Rope> {
        let layout = self.layout(desc);
        // Known occurrences (field index, sequence number, value) and unknown ones.
        let mut known: Vec<(usize, usize, &WireValue)> = Vec::new();
        let mut unknown: Vec<&WireField> = Vec::new();
        // Per oneof: the member last set and the sequence number from which it counts.
        let mut oneof_state: Vec<Option<(usize, usize)>> = vec![None; layout.oneofs];
        let mut seq = 0;
        for source in sources {
            for field in &source.message().fields {
                seq += 1;
                let Some(&i) = layout.by_number.get(&field.number) else {
                    unknown.push(field);
                    continue;
                };
                let info = &layout.fields[i];
                if !fits(info.class, info.list, &field.value) {
                    unknown.push(field);
                    continue;
                }
                if let Some(o) = info.oneof {
                    if oneof_state[o].is_none_or(|(member, _)| member != i) {
                        oneof_state[o] = Some((i, seq));
                    }
                }
                known.push((i, seq, &field.value));
            }
        }
        known.sort_by_key(|&(i, s, _)| (i, s));

        let mut out = Rope::new();
        let mut rest = known.as_slice();
        while let Some(&(i, _, _)) = rest.first() {
            let n = rest.iter().take_while(|(j, _, _)| *j == i).count();
            let (group, tail) = rest.split_at(n);
            rest = tail;
            let info = &layout.fields[i];
            let mut values: Vec<&WireValue> = group.iter().map(|&(_, _, v)| v).collect();
            if let Some(o) = info.oneof {
                match oneof_state[o] {
                    Some((member, from)) if member == i => {
                        values = group
                            .iter()
                            .filter(|&&(_, s, _)| s >= from)
                            .map(|&(_, _, v)| v)
                            .collect();
                    }
                    _ => continue,
                }
            }
            self.encode_field(info, &values, &mut out)?;
        }
        for field in unknown {
            put_unknown(field, &mut out)?;
        }
        Ok(out)
    }

    fn encode_field(
        &mut self,
        info: &FieldInfo,
        values: &[&WireValue],
        out: &mut Rope,
    ) -> Result<()> {
        if let Some((key_fd, value_fd)) = &info.map {
            let entries = map_entries(values, key_fd, value_fd)?;
            for (key, value) in &entries {
                let body = self.map_entry(key, value, key_fd, value_fd)?;
                out.put_key(info.number, LEN);
                out.put_varint(body.len());
                out.append(body);
            }
            return Ok(());
        }
        match info.class {
            Class::Message => {
                let desc = message_desc(&info.fd);
                if info.list {
                    for v in values {
                        let src: Vec<Source<'_>> = source_of(v)?.into_iter().collect();
                        self.put_message(info.number, &src, &desc, out)?;
                    }
                } else {
                    let mut srcs = Vec::with_capacity(values.len());
                    for v in values {
                        srcs.extend(source_of(v)?);
                    }
                    self.put_message(info.number, &srcs, &desc, out)?;
                }
            }
            Class::Bytes => {
                let chosen = if info.list {
                    values
                } else {
                    &values[values.len() - 1..]
                };
                for v in chosen {
                    let payload = match v {
                        WireValue::Bytes(p) => p.clone(),
                        other => Payload::Inline(payload_bytes(other)?.unwrap_or_default()),
                    };
                    if info.list || info.presence || !payload.is_empty() {
                        out.put_key(info.number, LEN);
                        out.put_varint(payload.len());
                        out.put_payload(&payload);
                    }
                }
            }
            Class::Varint(_) | Class::Fixed32 | Class::Fixed64 if info.list => {
                let mut items = Vec::new();
                for v in values {
                    numbers(info.class, v, &mut items)?;
                }
                put_numbers(info.number, info.class, info.packed, &items, out);
            }
            Class::Varint(_) | Class::Fixed32 | Class::Fixed64 => {
                let mut items = Vec::new();
                numbers(info.class, values[values.len() - 1], &mut items)?;
                let v = items[0];
                if info.presence || v != 0 {
                    put_number(info.number, info.class, v, out);
                }
            }
            Class::Group => unreachable!("groups never fit a known field"),
        }
        Ok(())
    }

    fn put_message(
        &mut self,
        number: u32,
        sources: &[Source<'_>],
        desc: &MessageDescriptor,
        out: &mut Rope,
    ) -> Result<()> {
        let body = self.encode(sources, desc)?;
        out.put_key(number, LEN);
        out.put_varint(body.len());
        out.append(body);
        Ok(())
    }

    /// One map entry: key and value, both always written.
    fn map_entry(
        &mut self,
        key: &MapKey,
        value: &MapValue<'_>,
        key_fd: &FieldDescriptor,
        value_fd: &FieldDescriptor,
    ) -> Result<Rope> {
        let mut body = Rope::new();
        match &key.order {
            KeyOrder::Str(s) => {
                body.put_key(1, LEN);
                body.put_varint(s.len() as u64);
                body.put(s);
            }
            _ => put_number(1, class_of(key_fd), key.wire, &mut body),
        }
        let class = class_of(value_fd);
        match class {
            Class::Message => {
                let mut srcs = Vec::new();
                for v in value {
                    srcs.extend(source_of(v)?);
                }
                self.put_message(2, &srcs, &message_desc(value_fd), &mut body)?;
            }
            Class::Bytes => {
                let payload = match value.last().map(|v| v.as_ref()) {
                    Some(WireValue::Bytes(p)) => p.clone(),
                    Some(other) => Payload::Inline(payload_bytes(other)?.unwrap_or_default()),
                    None => Payload::Inline(Bytes::new()),
                };
                body.put_key(2, LEN);
                body.put_varint(payload.len());
                body.put_payload(&payload);
            }
            Class::Varint(_) | Class::Fixed32 | Class::Fixed64 => {
                let mut items = Vec::new();
                if let Some(v) = value.last() {
                    numbers(class, v, &mut items)?;
                }
                put_number(2, class, items.first().copied().unwrap_or(0), &mut body);
            }
            Class::Group => unreachable!("map values are never groups"),
        }
        Ok(body)
    }
}

fn message_desc(fd: &FieldDescriptor) -> MessageDescriptor {
    fd.kind().as_message().expect("message field").clone()
}

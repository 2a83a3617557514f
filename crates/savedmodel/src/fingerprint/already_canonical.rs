//! The fast path of the deterministic encoding: recognizing serialized bytes that are already
//! in the form [`Encoder`] would write, so they are hashed as they are instead of re-encoded.
//!
//! Protobuf writes fields in number order and, deterministically, maps sorted, so nearly every
//! node and function of a real model is already canonical: checking costs one scan with no
//! allocation, where re-encoding costs a rope and a sort per message (issue 15: re-encoding was
//! most of the time on models of millions of small nodes). Whole models are canonical less
//! often: TensorFlow's Python (upb) leaves out a map entry's default key or value, where C++,
//! whose form the fingerprint hashes, writes both (`FunctionDef.arg_attr` has key 0 for the
//! first argument of every function), so such a model's functions take the general path.
//!
//! The check is conservative: it accepts a message only if encoding it would give back exactly
//! its bytes, and rejects anything unusual (unknown fields before known ones, groups,
//! repeated singular fields,
//! non-minimal varints, out-of-order fields or map keys, defaults written for fields without
//! presence, too deep nesting, malformed bytes); rejected messages take the general path, which
//! also reports the errors.

use bytes::Bytes;
use unbound_wire::codec::{is_utf8, RawField, WireType, MAX_FIELD_NUMBER};

use super::canonical::{Encoder, MAX_DEPTH};
use super::entry_memo::EntryContext;
use super::fields::Val;
use super::layout::{FieldInfo, MapInfo};
use super::maps::{map_key, MapKey};
use super::wire_values::Class;

/// A message at least this large is checked on two threads: the second checks the nested
/// messages of its second half while the first checks everything else. Below it, starting a
/// thread costs more than it saves.
const SPLIT_AT: usize = 16 << 20;

/// Reads a varint at `*pos` if it is well formed and minimal (no trailing zero byte after
/// the first), as every writer emits varints; `None` otherwise. One- and two-byte varints
/// (keys, and the lengths of small nodes) are read inline; this runs once per field of every
/// message a fingerprint checks.
#[inline(always)]
fn minimal_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let at = *pos;
    let first = *buf.get(at)?;
    if first < 0x80 {
        *pos = at + 1;
        return Some(u64::from(first));
    }
    let second = *buf.get(at + 1)?;
    if second < 0x80 {
        if second == 0 {
            return None;
        }
        *pos = at + 2;
        return Some(u64::from(first & 0x7f) | (u64::from(second) << 7));
    }
    long_minimal_varint(buf, pos)
}

/// [`minimal_varint`] of three bytes or more.
#[inline(never)]
fn long_minimal_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let first = *buf.get(*pos)?;
    let mut value = u64::from(first & 0x7f);
    for i in 1..10 {
        let byte = *buf.get(*pos + i)?;
        if i == 9 && byte > 1 {
            return None;
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            if byte == 0 {
                return None;
            }
            *pos += i + 1;
            return Some(value);
        }
    }
    None
}

/// Reads the field at `*pos` if its key and any varint or length prefix are minimal (as a
/// writer emits them) and it lies within `buf`; `None` otherwise, groups included.
#[inline(always)]
fn minimal_field(buf: &[u8], pos: &mut usize) -> Option<RawField> {
    let key = minimal_varint(buf, pos)?;
    // A number past protobuf's largest is a malformed message, not an unknown field: the
    // general reader (and protobuf C++) refuse it.
    let number = u32::try_from(key >> 3)
        .ok()
        .filter(|&n| n != 0 && n <= MAX_FIELD_NUMBER)?;
    let (wire_type, varint, start, end) = match key & 7 {
        0 => {
            let start = *pos;
            let v = minimal_varint(buf, pos)?;
            (WireType::Varint, v, start, *pos)
        }
        1 | 5 => {
            let width = if key & 7 == 1 { 8 } else { 4 };
            let start = *pos;
            let end = start.checked_add(width).filter(|&e| e <= buf.len())?;
            *pos = end;
            let wire_type = if width == 8 {
                WireType::Fixed64
            } else {
                WireType::Fixed32
            };
            (wire_type, 0, start, end)
        }
        2 => {
            let len = minimal_varint(buf, pos)?;
            let start = *pos;
            let end = usize::try_from(len)
                .ok()
                .and_then(|l| start.checked_add(l))
                .filter(|&e| e <= buf.len())?;
            *pos = end;
            (WireType::Len, 0, start, end)
        }
        _ => return None,
    };
    Some(RawField {
        number,
        wire_type,
        varint,
        start,
        end,
    })
}

/// The first field boundary at or after `target` in the fields from `start`, scanning keys
/// and lengths only; `None` if a field on the way is malformed (the full check refuses it).
fn field_boundary(buf: &[u8], start: usize, target: usize) -> Option<usize> {
    let mut pos = start;
    while pos < target {
        minimal_field(buf, &mut pos)?;
    }
    Some(pos)
}

/// Whether protobuf C++ parses an occurrence of known field `info` with wire type `wire` as
/// that field: a message, a string or a map entry length-delimited, a number with its own
/// wire type (or length-delimited, packed, when repeated). Otherwise it keeps it as an unknown
/// field, written after the known ones.
fn parses_as_known(info: &FieldInfo, wire: WireType) -> bool {
    if info.map.is_some() {
        return wire == WireType::Len;
    }
    match scalar_wire_type(info.class) {
        Some(own) => wire == own || (info.list && wire == WireType::Len),
        None => false,
    }
}

/// Whether a varint scalar read for `class` is written back as it was (normalized already:
/// `int32`s sign-extended, `uint32`s within 32 bits, `bool`s 0 or 1).
fn normal_varint(class: Class, v: u64) -> bool {
    match class {
        Class::Varint(kind) => kind.normalize(v) == v,
        _ => false,
    }
}

/// Whether a packed run of `class` values is written back as it was.
fn canonical_run(class: Class, run: &[u8]) -> bool {
    if run.is_empty() {
        return false;
    }
    match class {
        Class::Fixed32 => run.len() % 4 == 0,
        Class::Fixed64 => run.len() % 8 == 0,
        Class::Varint(_) => {
            let mut pos = 0;
            while pos < run.len() {
                let Some(v) = minimal_varint(run, &mut pos) else {
                    return false;
                };
                if !normal_varint(class, v) {
                    return false;
                }
            }
            true
        }
        _ => false,
    }
}

/// The wire type a field of `class` takes when written one value at a time.
fn scalar_wire_type(class: Class) -> Option<WireType> {
    match class {
        Class::Varint(_) => Some(WireType::Varint),
        Class::Fixed32 => Some(WireType::Fixed32),
        Class::Fixed64 => Some(WireType::Fixed64),
        Class::Bytes | Class::Message => Some(WireType::Len),
        Class::Group => None,
    }
}

/// Whether one scalar or string value `raw` (of field `info`, or of a map entry's key or
/// value when `always` is set) is written back as it was. `always`: written even when it is
/// the default (list elements, map keys and values, fields with presence).
fn canonical_scalar(class: Class, raw: &RawField, buf: &[u8], always: bool) -> bool {
    if Some(raw.wire_type) != scalar_wire_type(class) {
        return false;
    }
    let zero = match raw.wire_type {
        WireType::Varint => {
            if !normal_varint(class, raw.varint) {
                return false;
            }
            raw.varint == 0
        }
        _ => buf[raw.start..raw.end].iter().all(|&b| b == 0),
    };
    always || !zero
}

impl Encoder {
    /// Whether `value`, of a field that is a `string` when `string` is set, passes
    /// [`Encoder::validate`]'s check: UTF-8, as verify's schema check has it.
    #[inline]
    fn valid_string(&self, string: bool, value: &[u8]) -> bool {
        !(self.validate && string) || is_utf8(value)
    }

    /// Whether encoding the message of layout `layout` serialized at `buf[start..end]` gives
    /// back exactly those bytes. `depth` is the nesting the encoder would give that message.
    pub(super) fn already_canonical(
        &mut self,
        buf: &Bytes,
        start: usize,
        end: usize,
        layout: usize,
        depth: usize,
    ) -> bool {
        self.deepest = self.deepest.max(depth);
        if depth > MAX_DEPTH {
            return false;
        }
        if end - start >= SPLIT_AT {
            if let Some(half) = field_boundary(&buf[..end], start, start + (end - start) / 2) {
                if half < end {
                    return self.canonical_on_two_threads(buf, start, half, end, layout, depth);
                }
            }
        }
        self.canonical_fields(buf, start, end, layout, depth, end)
    }

    /// [`Encoder::already_canonical`] of `buf[start..end]` with the nested messages of
    /// `buf[half..end]` (`half` a field boundary) checked on a second thread, by an encoder of
    /// its own (an encoder's layouts are not shared between threads). The answer is the same
    /// as on one thread: every check is made once, by one of the two.
    fn canonical_on_two_threads(
        &mut self,
        buf: &Bytes,
        start: usize,
        half: usize,
        end: usize,
        layout: usize,
        depth: usize,
    ) -> bool {
        let desc = self.layout_rc(layout).desc.clone();
        let validate = self.validate;
        std::thread::scope(|s| {
            let second = s.spawn(|| {
                let mut other = Encoder::new();
                other.validate = validate;
                other.nested_canonical(buf, half, end, &desc, depth)
            });
            let first = self.canonical_fields(buf, start, end, layout, depth, half);
            let second = second
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            // How deep the other half went is not tracked: as deep as allowed, to be safe.
            self.deepest = MAX_DEPTH;
            first && second
        })
    }

    /// Whether every nested message held by a (non-map) message field of `buf[start..end]`,
    /// a message of type `desc`, is canonical; `false` also for anything
    /// [`Encoder::canonical_fields`] would refuse on the way (an unknown or malformed field).
    fn nested_canonical(
        &mut self,
        buf: &Bytes,
        start: usize,
        end: usize,
        desc: &prost_reflect::MessageDescriptor,
        depth: usize,
    ) -> bool {
        let index = self.layout_index(desc);
        let layout = self.layout_rc(index);
        let within = &buf[..end];
        let mut pos = start;
        while pos < end {
            let Some(raw) = minimal_field(within, &mut pos) else {
                return false;
            };
            // Unknown fields (their place is checked by `canonical_fields`) hold no nested
            // message of ours.
            let Some(i) = layout.index(raw.number) else {
                continue;
            };
            let info = &layout.fields[i];
            if !parses_as_known(info, raw.wire_type) {
                continue;
            }
            if info.map.is_none() && info.class == Class::Message {
                let child = self.child(info);
                if raw.wire_type != WireType::Len
                    || !self.already_canonical(buf, raw.start, raw.end, child, depth + 1)
                {
                    return false;
                }
            }
        }
        true
    }

    /// [`Encoder::already_canonical`] on this thread, leaving out the nested messages of
    /// (non-map) message fields from `deep_until` on (checked by
    /// [`Encoder::nested_canonical`] instead; `deep_until == end` checks them all).
    fn canonical_fields(
        &mut self,
        buf: &Bytes,
        start: usize,
        end: usize,
        layout: usize,
        depth: usize,
        deep_until: usize,
    ) -> bool {
        let layout_index = layout;
        let layout = self.layout_rc(layout);
        let within = &buf[..end];
        let mut pos = start;
        // The last known field seen, the oneofs already set, and the last key of the map
        // being read.
        let mut last: Option<usize> = None;
        let mut oneofs_set: u64 = 0;
        let mut last_key: Option<MapKey<'_>> = None;
        // Whether an unknown field has been read: protobuf C++ writes them after every known
        // field, in the order read, as they were (a varint, a key and a length minimal, as
        // `minimal_field` reads them; a group is refused there). Models written by a newer
        // TensorFlow than our schema hold some, so they are accepted here rather than sent
        // down the general path (issue 29).
        let mut unknown_seen = false;
        while pos < end {
            let Some(raw) = minimal_field(within, &mut pos) else {
                return false;
            };
            let Some(i) = layout
                .index(raw.number)
                .filter(|&i| parses_as_known(&layout.fields[i], raw.wire_type))
            else {
                unknown_seen = true;
                continue;
            };
            if unknown_seen {
                return false;
            }
            let info = &layout.fields[i];
            match last {
                Some(prev) if prev > i => return false,
                Some(prev) if prev == i && !(info.map.is_some() || info.list && !info.packed) => {
                    return false
                }
                Some(prev) if prev == i => {}
                _ => {
                    last_key = None;
                    if let Some(o) = info.oneof {
                        if o >= 64 || oneofs_set & (1 << o) != 0 {
                            return false;
                        }
                        oneofs_set |= 1 << o;
                    }
                }
            }
            last = Some(i);
            if let Some(map) = &info.map {
                if raw.wire_type != WireType::Len {
                    return false;
                }
                let context = EntryContext {
                    layout: layout_index,
                    field: i,
                    depth,
                    validate: self.validate,
                };
                let Some(key) = self.canonical_entry(info, map, buf, raw.start, raw.end, context)
                else {
                    return false;
                };
                if last_key.as_ref().is_some_and(|k| *k >= key) {
                    return false;
                }
                last_key = Some(key);
                continue;
            }
            if info.class == Class::Message && raw.start >= deep_until {
                if raw.wire_type != WireType::Len {
                    return false;
                }
                continue;
            }
            if !self.canonical_field(info, &raw, buf, depth) {
                return false;
            }
        }
        true
    }

    /// Whether one occurrence `raw` of known, non-map field `info` is written back as it was.
    fn canonical_field(
        &mut self,
        info: &FieldInfo,
        raw: &RawField,
        buf: &Bytes,
        depth: usize,
    ) -> bool {
        match info.class {
            Class::Message => {
                raw.wire_type == WireType::Len && {
                    let child = self.child(info);
                    self.already_canonical(buf, raw.start, raw.end, child, depth + 1)
                }
            }
            Class::Group => false,
            Class::Bytes => {
                raw.wire_type == WireType::Len
                    && (info.list || info.presence || raw.end > raw.start)
                    && self.valid_string(info.string, &buf[raw.start..raw.end])
            }
            class if info.list && info.packed => {
                raw.wire_type == WireType::Len && canonical_run(class, &buf[raw.start..raw.end])
            }
            class => canonical_scalar(class, raw, buf, info.list || info.presence),
        }
    }

    /// The key of the map entry at `buf[start..end]` if the entry is written back as it was:
    /// its key then its value, both present and canonical, nothing else. An entry equal to
    /// one accepted before in the same `context` is not checked again ([`EntryMemo`]).
    fn canonical_entry<'b>(
        &mut self,
        info: &FieldInfo,
        map: &MapInfo,
        buf: &'b Bytes,
        start: usize,
        end: usize,
        context: EntryContext,
    ) -> Option<MapKey<'b>> {
        let depth = context.depth;
        // Protobuf C++ parses the entry as a message of its own: one more level.
        if self.validate {
            self.deepest = self.deepest.max(depth + 1);
        }
        if self.validate && depth + 1 > MAX_DEPTH {
            return None;
        }
        let within = &buf[..end];
        let mut pos = start;
        let key = minimal_field(within, &mut pos)?;
        let value = minimal_field(within, &mut pos)?;
        if pos != end || key.number != 1 || value.number != 2 {
            return None;
        }
        let entry = &buf[start..end];
        match self.entry_memo.find(context, entry) {
            Some(deepest) => self.deepest = self.deepest.max(deepest),
            None => {
                let outer = std::mem::take(&mut self.deepest);
                let ok = self.canonical_key_and_value(info, map, buf, &key, &value, depth);
                let reached = self.deepest;
                self.deepest = outer.max(reached);
                if !ok {
                    return None;
                }
                self.entry_memo.remember(context, entry, reached);
            }
        }
        let key_val = match key.wire_type {
            WireType::Len => Val::Slice(buf, key.start, key.end),
            WireType::Varint => Val::Varint(key.varint),
            WireType::Fixed32 => {
                Val::Fixed32(u32::from_le_bytes(buf[key.start..key.end].try_into().ok()?))
            }
            _ => Val::Fixed64(u64::from_le_bytes(buf[key.start..key.end].try_into().ok()?)),
        };
        map_key(map, key_val).ok()
    }

    /// Whether a map entry's `key` and `value` fields (of map field `info`, in a message at
    /// nesting `depth`) are written back as they were.
    fn canonical_key_and_value(
        &mut self,
        info: &FieldInfo,
        map: &MapInfo,
        buf: &Bytes,
        key: &RawField,
        value: &RawField,
        depth: usize,
    ) -> bool {
        let key_ok = match map.key_class {
            Class::Bytes => {
                key.wire_type == WireType::Len
                    && self.valid_string(map.key_string, &buf[key.start..key.end])
            }
            class => canonical_scalar(class, key, buf, true),
        };
        let value_depth = depth + 1 + usize::from(self.validate);
        key_ok
            && match map.value_class {
                Class::Message => {
                    value.wire_type == WireType::Len && {
                        let child = self.child(info);
                        self.already_canonical(buf, value.start, value.end, child, value_depth)
                    }
                }
                Class::Bytes => {
                    value.wire_type == WireType::Len
                        && self.valid_string(map.value_string, &buf[value.start..value.end])
                }
                Class::Group => false,
                class => canonical_scalar(class, value, buf, true),
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
        out
    }

    /// Minimal varints of every length read back with their length; padded (a trailing zero
    /// group), truncated and overlong ones are refused.
    #[test]
    fn only_minimal_varints_are_read() {
        let mut values = vec![
            0,
            1,
            127,
            128,
            300,
            16383,
            16384,
            u64::from(u32::MAX),
            u64::MAX,
        ];
        values.extend((0..64).map(|shift| 1u64 << shift));
        values.extend((1..64).map(|shift| (1u64 << shift) - 1));
        for v in values {
            let bytes = encode(v);
            let mut buf = bytes.clone();
            buf.push(0x55);
            let mut pos = 0;
            assert_eq!(minimal_varint(&buf, &mut pos), Some(v), "{v}");
            assert_eq!(pos, bytes.len(), "{v}");

            let mut truncated = bytes.clone();
            truncated.pop();
            assert_eq!(minimal_varint(&truncated, &mut 0), None, "{v} truncated");

            if bytes.len() < 10 {
                let mut padded = bytes.clone();
                *padded.last_mut().unwrap() |= 0x80;
                padded.push(0);
                assert_eq!(minimal_varint(&padded, &mut 0), None, "{v} padded");
            }
        }
        let overlong = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(minimal_varint(&overlong, &mut 0), None);
        let eleven = [
            0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x81, 0x01,
        ];
        assert_eq!(minimal_varint(&eleven, &mut 0), None);
    }
}

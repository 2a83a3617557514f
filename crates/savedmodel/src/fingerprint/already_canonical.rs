//! The fast path of the deterministic encoding: recognizing serialized bytes that are already
//! in the form [`Encoder`] would write, so they are hashed as they are instead of re-encoded.
//!
//! TensorFlow writes SavedModels with deterministic serialization, and prost writes fields in
//! number order with maps sorted, so nearly every node and function of a real model is already
//! canonical: checking costs one scan with no allocation, where re-encoding costs a rope and a
//! sort per message (issue 15: re-encoding was most of the time on models of millions of
//! small nodes).
//!
//! The check is conservative: it accepts a message only if encoding it would give back exactly
//! its bytes, and rejects anything unusual (unknown fields, groups, repeated singular fields,
//! non-minimal varints, out-of-order fields or map keys, defaults written for fields without
//! presence, too deep nesting, malformed bytes); rejected messages take the general path, which
//! also reports the errors.

use bytes::Bytes;
use unbound_wire::codec::{read_field, varint_len, RawField, WireType};

use super::canonical::{Encoder, MAX_DEPTH};
use super::fields::Val;
use super::layout::{FieldInfo, MapInfo};
use super::maps::{map_key, MapKey};
use super::wire_values::Class;

/// Whether `field`'s key and length prefix (for a length-delimited field) take the fewest
/// bytes possible, as a writer emits them. `at` is where the field's key starts.
fn minimal_header(raw: &RawField, at: usize) -> bool {
    let key = (u64::from(raw.number) << 3) | raw.wire_type.bits();
    let len = match raw.wire_type {
        WireType::Len => varint_len((raw.end - raw.start) as u64),
        _ => 0,
    };
    match raw.wire_type {
        WireType::Len => raw.start - at == (varint_len(key) + len) as usize,
        WireType::Varint => {
            raw.start - at == varint_len(key) as usize
                && raw.end - raw.start == varint_len(raw.varint) as usize
        }
        _ => raw.start - at == varint_len(key) as usize,
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
                let at = pos;
                let Ok(v) = unbound_wire::codec::read_varint(run, &mut pos) else {
                    return false;
                };
                if pos - at != varint_len(v) as usize || !normal_varint(class, v) {
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
        if depth > MAX_DEPTH {
            return false;
        }
        let layout = self.layout_rc(layout);
        let within = &buf[..end];
        let mut pos = start;
        // The last known field seen, the oneofs already set, and the last key of the map
        // being read.
        let mut last: Option<usize> = None;
        let mut oneofs_set: u64 = 0;
        let mut last_key: Option<MapKey<'_>> = None;
        while pos < end {
            let at = pos;
            let Ok(raw) = read_field(within, &mut pos) else {
                return false;
            };
            if !minimal_header(&raw, at) {
                return false;
            }
            let Some(i) = layout.index(raw.number) else {
                return false;
            };
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
                let Some(key) = self.canonical_entry(info, map, buf, raw.start, raw.end, depth)
                else {
                    return false;
                };
                if last_key.as_ref().is_some_and(|k| *k >= key) {
                    return false;
                }
                last_key = Some(key);
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
            }
            class if info.list && info.packed => {
                raw.wire_type == WireType::Len && canonical_run(class, &buf[raw.start..raw.end])
            }
            class => canonical_scalar(class, raw, buf, info.list || info.presence),
        }
    }

    /// The key of the map entry at `buf[start..end]` if the entry is written back as it was:
    /// its key then its value, both present and canonical, nothing else.
    fn canonical_entry<'b>(
        &mut self,
        info: &FieldInfo,
        map: &MapInfo,
        buf: &'b Bytes,
        start: usize,
        end: usize,
        depth: usize,
    ) -> Option<MapKey<'b>> {
        let within = &buf[..end];
        let mut pos = start;
        let read = |pos: &mut usize| {
            let at = *pos;
            read_field(within, pos)
                .ok()
                .filter(|raw| minimal_header(raw, at))
        };
        let key = read(&mut pos)?;
        let value = read(&mut pos)?;
        if pos != end || key.number != 1 || value.number != 2 {
            return None;
        }
        let key_ok = match map.key_class {
            Class::Bytes => key.wire_type == WireType::Len,
            class => canonical_scalar(class, &key, buf, true),
        };
        let value_ok = match map.value_class {
            Class::Message => {
                value.wire_type == WireType::Len && {
                    let child = self.child(info);
                    self.already_canonical(buf, value.start, value.end, child, depth + 1)
                }
            }
            Class::Bytes => value.wire_type == WireType::Len,
            Class::Group => false,
            class => canonical_scalar(class, &value, buf, true),
        };
        if !(key_ok && value_ok) {
            return None;
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
}

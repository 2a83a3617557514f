//! Map fields as C++ reads and sorts them: the last entry of a key wins, keys sort by type
//! (strings bytewise, integers by value, `false` first), missing keys and values are defaults.

use std::borrow::Cow;
use std::collections::BTreeMap;

use bytes::Bytes;
use prost_reflect::{FieldDescriptor, Kind};
use unbound_chunked::{Result, WireValue};

use super::canonical::{parse, payload_bytes};
use super::wire_values::{class_of, fits, Class};

/// A map key: how C++'s `MapSorter` orders it, and its value as written.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct MapKey {
    /// The sort order.
    pub order: KeyOrder,
    /// The normalized wire value of a numeric or bool key.
    pub(super) wire: u64,
}

/// The ordering part of a [`MapKey`].
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeyOrder {
    /// `bool` keys.
    Bool(bool),
    /// Signed integer keys.
    Signed(i64),
    /// Unsigned integer keys.
    Unsigned(u64),
    /// String keys, compared bytewise.
    Str(Bytes),
}

/// The effective value of one map entry: the value's occurrences in the winning entry
/// (merged for a message value; the last one counts for a scalar). Empty when the entry has
/// no value (the default).
pub type MapValue<'a> = Vec<Cow<'a, WireValue>>;

/// The entries of a map field by key, sorted; the last entry of a key wins.
pub fn map_entries<'a>(
    values: &[&'a WireValue],
    key_fd: &FieldDescriptor,
    value_fd: &FieldDescriptor,
) -> Result<BTreeMap<MapKey, MapValue<'a>>> {
    let key_class = class_of(key_fd);
    let value_class = class_of(value_fd);
    let mut out = BTreeMap::new();
    for v in values {
        let entry: Vec<(u32, Cow<'a, WireValue>)> = match v {
            WireValue::Message(m) => m
                .fields
                .iter()
                .map(|f| (f.number, Cow::Borrowed(&f.value)))
                .collect(),
            WireValue::Bytes(p) => parse(p)?
                .fields
                .into_iter()
                .map(|f| (f.number, Cow::Owned(f.value)))
                .collect(),
            _ => continue,
        };
        let mut key = None;
        let mut vals: MapValue<'a> = Vec::new();
        for (number, value) in entry {
            match number {
                1 if fits(key_class, false, &value) => key = Some(value),
                2 if fits(value_class, false, &value) => {
                    if value_class != Class::Message {
                        vals.clear();
                    }
                    vals.push(value);
                }
                _ => {}
            }
        }
        out.insert(map_key(key_fd, key.as_deref())?, vals);
    }
    Ok(out)
}

fn map_key(key_fd: &FieldDescriptor, value: Option<&WireValue>) -> Result<MapKey> {
    let class = class_of(key_fd);
    if class == Class::Bytes {
        let bytes = match value {
            Some(v) => payload_bytes(v)?.unwrap_or_default(),
            None => Bytes::new(),
        };
        return Ok(MapKey {
            order: KeyOrder::Str(bytes),
            wire: 0,
        });
    }
    let raw = match value {
        Some(WireValue::Varint(v)) => *v,
        Some(WireValue::Fixed32(v)) => u64::from(*v),
        Some(WireValue::Fixed64(v)) => *v,
        _ => 0,
    };
    let wire = match class {
        Class::Varint(k) => k.normalize(raw),
        _ => raw,
    };
    let order = match key_fd.kind() {
        Kind::Bool => KeyOrder::Bool(wire != 0),
        Kind::Int32 | Kind::Sfixed32 => KeyOrder::Signed(i64::from(wire as u32 as i32)),
        Kind::Sint32 => KeyOrder::Signed(i64::from(zigzag32(wire as u32))),
        Kind::Int64 | Kind::Sfixed64 => KeyOrder::Signed(wire as i64),
        Kind::Sint64 => KeyOrder::Signed(zigzag64(wire)),
        _ => KeyOrder::Unsigned(wire),
    };
    Ok(MapKey { order, wire })
}

fn zigzag32(v: u32) -> i32 {
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}

fn zigzag64(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

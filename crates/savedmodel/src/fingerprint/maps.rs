//! Map fields as C++ reads and sorts them: the last entry of a key wins, keys sort by type
//! (strings bytewise, integers by value, `false` first), missing keys and values are defaults.

use crate::Result;
use prost_reflect::Kind;
use std::borrow::Cow;
use unbound_wire::{Payload, WireValue};

use super::fields::{scan, Val};
use super::layout::MapInfo;
use super::wire_values::{fits, Class};

/// A map key: how C++'s `MapSorter` orders it, and its value as written.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct MapKey<'a> {
    /// The sort order.
    pub order: KeyOrder<'a>,
    /// The normalized wire value of a numeric or bool key.
    pub(super) wire: u64,
}

impl MapKey<'_> {
    /// The same key, owning its string.
    pub fn into_owned(self) -> MapKey<'static> {
        MapKey {
            order: match self.order {
                KeyOrder::Bool(b) => KeyOrder::Bool(b),
                KeyOrder::Signed(v) => KeyOrder::Signed(v),
                KeyOrder::Unsigned(v) => KeyOrder::Unsigned(v),
                KeyOrder::Str(s) => KeyOrder::Str(Cow::Owned(s.into_owned())),
            },
            wire: self.wire,
        }
    }
}

/// The ordering part of a [`MapKey`].
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeyOrder<'a> {
    /// `bool` keys.
    Bool(bool),
    /// Signed integer keys.
    Signed(i64),
    /// Unsigned integer keys.
    Unsigned(u64),
    /// String keys, compared bytewise.
    Str(Cow<'a, [u8]>),
}

/// A map value occurrence: borrowed, or owned when its entry had to be read from a record.
pub enum Held<'a> {
    /// Borrowed from the map's source.
    Val(Val<'a>),
    /// Read on the way.
    Owned(WireValue),
}

impl Held<'_> {
    /// The value.
    pub fn val(&self) -> Val<'_> {
        match self {
            Held::Val(v) => *v,
            Held::Owned(w) => Val::from_wire(w),
        }
    }
}

/// The effective value of one map entry: the value's occurrences in the winning entry
/// (merged for a message value; the last one counts for a scalar). Empty when the entry has
/// no value (the default).
pub type MapValue<'a> = Vec<Held<'a>>;

/// The entries of a map field, sorted by key; the last entry of a key wins.
pub(super) fn map_entries<'a>(
    values: &[Val<'a>],
    info: &MapInfo,
) -> Result<Vec<(MapKey<'a>, MapValue<'a>)>> {
    let mut out = Vec::with_capacity(values.len());
    for &v in values {
        let mut key = None;
        let mut vals: MapValue<'a> = Vec::new();
        let mut visit = |number: u32, value: Val<'a>| match number {
            1 if fits(info.key_class, false, value) => key = Some(value),
            2 if fits(info.value_class, false, value) => {
                if info.value_class != Class::Message {
                    vals.clear();
                }
                vals.push(Held::Val(value));
            }
            _ => {}
        };
        match v {
            Val::Message(m) => {
                for f in &m.fields {
                    visit(f.number, Val::from_wire(&f.value));
                }
            }
            Val::Slice(buf, start, end) => scan(buf, start, end, &mut visit)?,
            Val::Payload(Payload::Inline(buf)) => scan(buf, 0, buf.len(), &mut visit)?,
            Val::Payload(p) => {
                // A lazy record: read it, and keep owned copies of what the entry holds.
                let buf = p.bytes()?;
                let mut owned_key = None;
                scan(&buf, 0, buf.len(), |number, value| match number {
                    1 if fits(info.key_class, false, value) => owned_key = Some(value.to_wire()),
                    2 if fits(info.value_class, false, value) => {
                        if info.value_class != Class::Message {
                            vals.clear();
                        }
                        vals.push(Held::Owned(value.to_wire()));
                    }
                    _ => {}
                })?;
                let key = match &owned_key {
                    Some(k) => map_key(info, Val::from_wire(k))?.into_owned(),
                    None => map_key(info, Val::Varint(0))?.into_owned(),
                };
                out.push((key, vals));
                continue;
            }
            _ => continue,
        }
        let key = map_key(info, key.unwrap_or(Val::Varint(0)))?;
        out.push((key, vals));
    }
    // Sorted by key; of entries with one key, the last read wins (the sort is stable, so
    // reversed it comes first and `dedup` keeps it).
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.reverse();
    out.dedup_by(|later, kept| later.0 == kept.0);
    out.reverse();
    Ok(out)
}

/// The key an entry holds, as C++ sorts and writes it.
pub(super) fn map_key<'a>(info: &MapInfo, value: Val<'a>) -> Result<MapKey<'a>> {
    let class = info.key_class;
    if class == Class::Bytes {
        return Ok(MapKey {
            order: KeyOrder::Str(match value {
                Val::Slice(b, s, e) => Cow::Borrowed(&b[s..e]),
                Val::Payload(Payload::Inline(b)) => Cow::Borrowed(&b[..]),
                other => Cow::Owned(other.bytes()?.unwrap_or_default().to_vec()),
            }),
            wire: 0,
        });
    }
    let raw = match value {
        Val::Varint(v) | Val::Fixed64(v) => v,
        Val::Fixed32(v) => u64::from(v),
        _ => 0,
    };
    let wire = match class {
        Class::Varint(k) => k.normalize(raw),
        _ => raw,
    };
    let order = match info.key.kind() {
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

//! Read-only helpers over [`WireMessage`]s whose nested messages may be expanded (a merged
//! `.cpb`) or still raw bytes (a mapped `.pb`): the fields `show` needs, decoded on demand.

use std::borrow::Cow;

use crate::{Result, SavedModelError};
use unbound_wire::{Payload, WireMessage, WireValue};

/// The occurrences of message field `number`, each expanded (borrowed) or parsed from its
/// bytes (one level; its own nested messages stay bytes).
pub fn messages<'a>(
    m: &'a WireMessage,
    number: u32,
    what: &'a str,
) -> impl Iterator<Item = Result<Cow<'a, WireMessage>>> + 'a {
    // An occurrence of another wire type is an unknown field to protobuf C++: skipped.
    m.fields
        .iter()
        .filter(move |f| f.number == number)
        .filter_map(move |f| match &f.value {
            WireValue::Message(sub) => Some(Ok(Cow::Borrowed(sub))),
            WireValue::Bytes(p) => Some(parse(p, what).map(Cow::Owned)),
            _ => None,
        })
}

/// Parses one level of a payload.
pub fn parse(p: &Payload, what: &str) -> Result<WireMessage> {
    let bytes = p.bytes()?;
    WireMessage::parse(&bytes, None).map_err(|error| SavedModelError::malformed(what, error))
}

/// The last varint of field `number` (protobuf's "last one wins"), or 0.
pub fn varint(m: &WireMessage, number: u32) -> u64 {
    m.fields
        .iter()
        .rev()
        .find_map(|f| match (&f.value, f.number == number) {
            (WireValue::Varint(v), true) => Some(*v),
            _ => None,
        })
        .unwrap_or(0)
}

/// The last string of field `number` (lossy UTF-8), or empty.
pub fn string(m: &WireMessage, number: u32) -> Result<String> {
    match m.fields.iter().rev().find(|f| f.number == number) {
        Some(f) => match &f.value {
            WireValue::Bytes(p) => Ok(String::from_utf8_lossy(&p.bytes()?).into_owned()),
            WireValue::Message(sub) => Ok(String::from_utf8_lossy(&sub.to_vec()?).into_owned()),
            _ => Ok(String::new()),
        },
        None => Ok(String::new()),
    }
}

/// The message made of `m`'s fields other than `skip`, serialized (for prost decoding of the
/// small parts of a large message).
pub fn encode_without(m: &WireMessage, skip: u32) -> Result<Vec<u8>> {
    let rest = WireMessage {
        fields: m
            .fields
            .iter()
            .filter(|f| f.number != skip)
            .cloned()
            .collect(),
        descriptor: None,
    };
    Ok(rest.to_vec()?)
}

//! TensorFlow's graph regularization for fingerprints (`core/graph/regularization/`):
//! `SimpleDelete` on a GraphDef and `GetSuffixUID` on function names.
//!
//! `SimpleDelete`:
//! - `PartitionedCall` / `StatefulPartitionedCall` nodes: the UID suffix of
//!   `attr["f"].func.name` is stripped (when it has one) and `attr["config_proto"]` becomes
//!   `s: ""` (when present);
//! - `Const` nodes whose `attr["dtype"]` is `DT_STRING`: `attr["value"]` is cleared (an empty
//!   `AttrValue`);
//! - `library` and `versions` are cleared, which leaves them present but empty.
//!
//! Edits are made by appending to the wire-level messages: a map entry appended for a key
//! replaces the earlier one and a field appended to a message is merged into it, exactly as
//! protobuf parses it, so untouched nodes stay zero-copy slices of their source.

use bytes::Bytes;
use unbound_proto::fields::tensorflow::{attr_value, graph_def, name_attr_list, node_def};
use unbound_proto::tensorflow::{attr_value::Value, AttrValue};
use unbound_wire::{WireField, WireMessage, WireValue};

use super::fields::{last_bytes, Source, Val};
use super::{model_fault, Result};

/// `DataType.DT_STRING`.
const DT_STRING: i32 = 7;

/// `SimpleDelete` on a GraphDef held as one wire-level message (all its occurrences merged).
pub fn simple_delete(graph: &mut WireMessage) -> Result<()> {
    let mut fields = Vec::with_capacity(graph.fields.len() + 2);
    for field in std::mem::take(&mut graph.fields) {
        let is_len = matches!(field.value, WireValue::Bytes(_) | WireValue::Message(_));
        match field.number {
            graph_def::LIBRARY | graph_def::VERSIONS if is_len => {}
            graph_def::NODE if is_len => match regularize_node(&field.value)? {
                Some(node) => fields.push(WireField {
                    number: graph_def::NODE,
                    value: WireValue::Message(node),
                }),
                None => fields.push(field),
            },
            _ => fields.push(field),
        }
    }
    for number in [graph_def::LIBRARY, graph_def::VERSIONS] {
        fields.push(WireField {
            number,
            value: WireValue::Bytes(unbound_wire::Payload::Inline(Bytes::new())),
        });
    }
    graph.fields = fields;
    Ok(())
}

/// The ops of the nodes `SimpleDelete` may edit.
pub(super) const REGULARIZED_OPS: [&[u8]; 3] =
    [b"PartitionedCall", b"StatefulPartitionedCall", b"Const"];

/// The regularized node, or `None` when the node is left as it is.
pub(super) fn regularize_node(value: &WireValue) -> Result<Option<WireMessage>> {
    // The op, from a scan of the node in place: most nodes are left as they are.
    let Some(source) = Val::from_wire(value).to_source()? else {
        return Ok(None);
    };
    let op = last_bytes(&source, node_def::OP)?.unwrap_or_default();
    if !REGULARIZED_OPS.contains(&&op[..]) {
        return Ok(None);
    }
    let node = &source;
    let mut entries = Vec::new();
    match &op[..] {
        b"PartitionedCall" | b"StatefulPartitionedCall" => {
            let f = attr(node, b"f")?.ok_or_else(|| node_fault(node, &op, "has no attr \"f\""))?;
            let name = match decode_attr(&f, node, "f")?.value {
                Some(Value::Func(func)) => func.name,
                _ => String::new(),
            };
            if let Some(uid) = suffix_uid(name.as_bytes()) {
                let stripped = strip_uid(name.as_bytes(), uid);
                let mut attr = f;
                attr.fields.push(message_field(
                    attr_value::FUNC,
                    vec![bytes_field(
                        name_attr_list::NAME,
                        Bytes::copy_from_slice(stripped),
                    )],
                ));
                entries.push(entry(b"f", attr));
            }
            if let Some(mut config) = attr(node, b"config_proto")? {
                config.fields.push(bytes_field(attr_value::S, Bytes::new()));
                entries.push(entry(b"config_proto", config));
            }
        }
        b"Const" => {
            let dtype = attr(node, b"dtype")?
                .ok_or_else(|| node_fault(node, &op, "has no attr \"dtype\""))?;
            let is_string = matches!(
                decode_attr(&dtype, node, "dtype")?.value,
                Some(Value::Type(DT_STRING))
            );
            if is_string {
                if let Some(mut value) = attr(node, b"value")? {
                    // `clear_value()`: every known field is in the oneof; unknown ones stay.
                    value.fields.retain(|f| !is_attr_value_field(f));
                    entries.push(entry(b"value", value));
                }
            }
        }
        _ => {}
    }
    if entries.is_empty() {
        return Ok(None);
    }
    let mut out = WireMessage::new(None);
    node.for_each(|number, v| {
        out.fields.push(WireField {
            number,
            value: v.to_wire(),
        })
    })?;
    out.fields.extend(entries);
    Ok(Some(out))
}

/// The effective `attr[key]` of a node (the last entry for the key wins), as one message
/// made of its value's occurrences. `None` when there is no entry for the key.
fn attr(node: &Source<'_>, key: &[u8]) -> Result<Option<WireMessage>> {
    let mut entries = Vec::new();
    node.for_each(|number, v| {
        if number == node_def::ATTR && v.is_len() {
            entries.push(v);
        }
    })?;
    let mut found = None;
    for v in entries {
        let Some(entry) = v.to_source()? else {
            continue;
        };
        if last_bytes(&entry, node_def::attr_entry::KEY)?.unwrap_or_default() != key {
            continue;
        }
        let mut values = Vec::new();
        entry.for_each(|n, v| {
            if n == node_def::attr_entry::VALUE && v.is_len() {
                values.push(v);
            }
        })?;
        let mut value = WireMessage::new(None);
        for v in values {
            if let Some(src) = v.to_source()? {
                src.for_each(|number, v| {
                    value.fields.push(WireField {
                        number,
                        value: v.to_wire(),
                    })
                })?;
            }
        }
        found = Some(value);
    }
    Ok(found)
}

fn decode_attr(attr: &WireMessage, node: &Source<'_>, key: &str) -> Result<AttrValue> {
    let bytes = attr.to_vec()?;
    unbound_wire::decode_lenient::<AttrValue>(bytes, unbound_proto::descriptor_pool()).map_err(
        |e| {
            node_fault(
                node,
                b"",
                &format!("has an attr \"{key}\" that does not decode: {e}"),
            )
        },
    )
}

fn node_fault(node: &Source<'_>, op: &[u8], what: &str) -> crate::SavedModelError {
    let name = last_bytes(node, node_def::NAME)
        .ok()
        .flatten()
        .unwrap_or_default();
    let op = if op.is_empty() {
        String::new()
    } else {
        format!("{} ", String::from_utf8_lossy(op))
    };
    model_fault(format!(
        "{op}node \"{}\" {what}; TensorFlow cannot fingerprint this graph",
        String::from_utf8_lossy(&name)
    ))
}

/// Whether `f` is a field of `AttrValue` as C++ reads it: a known number with its wire type
/// (`list`, `s`, `shape`, `tensor`, `placeholder`, `func` length-delimited; `i`, `b`, `type`
/// varints; `f` fixed32). Anything else is an unknown field.
fn is_attr_value_field(f: &WireField) -> bool {
    match f.number {
        attr_value::LIST
        | attr_value::S
        | attr_value::SHAPE
        | attr_value::TENSOR
        | attr_value::PLACEHOLDER
        | attr_value::FUNC => matches!(f.value, WireValue::Bytes(_) | WireValue::Message(_)),
        attr_value::I | attr_value::B | attr_value::TYPE => matches!(f.value, WireValue::Varint(_)),
        attr_value::F => matches!(f.value, WireValue::Fixed32(_)),
        _ => false,
    }
}

fn entry(key: &[u8], value: WireMessage) -> WireField {
    message_field(
        node_def::ATTR,
        vec![
            bytes_field(node_def::attr_entry::KEY, Bytes::copy_from_slice(key)),
            WireField {
                number: node_def::attr_entry::VALUE,
                value: WireValue::Message(value),
            },
        ],
    )
}

fn message_field(number: u32, fields: Vec<WireField>) -> WireField {
    WireField {
        number,
        value: WireValue::Message(WireMessage {
            fields,
            descriptor: None,
        }),
    }
}

fn bytes_field(number: u32, value: Bytes) -> WireField {
    WireField {
        number,
        value: WireValue::Bytes(unbound_wire::Payload::Inline(value)),
    }
}

/// TensorFlow's `GetSuffixUID`: the text after the last `_` (the whole name without one),
/// parsed like `absl::SimpleAtoi` into an `int64` (surrounding ASCII whitespace and a sign
/// allowed, nothing else).
pub fn suffix_uid(name: &[u8]) -> Option<i64> {
    let last = name.rsplit(|&b| b == b'_').next().unwrap_or(name);
    simple_atoi(last)
}

fn simple_atoi(text: &[u8]) -> Option<i64> {
    let is_space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r');
    let start = text.iter().position(|b| !is_space(b))?;
    let end = text.iter().rposition(|b| !is_space(b))? + 1;
    let text = &text[start..end];
    let (negative, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() {
        return None;
    }
    let mut value: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        let d = i64::from(b - b'0');
        value = value.checked_mul(10)?;
        value = if negative {
            value.checked_sub(d)?
        } else {
            value.checked_add(d)?
        };
    }
    Some(value)
}

/// `absl::StripSuffix(name, std::to_string(uid))`.
pub fn strip_uid(name: &[u8], uid: i64) -> &[u8] {
    let suffix = uid.to_string();
    name.strip_suffix(suffix.as_bytes()).unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffix_uids_parse_like_absl() {
        assert_eq!(suffix_uid(b"__inference_f_123"), Some(123));
        assert_eq!(suffix_uid(b"f_-5"), Some(-5));
        assert_eq!(suffix_uid(b"f_+7"), Some(7));
        assert_eq!(suffix_uid(b"f_ 12 "), Some(12));
        assert_eq!(suffix_uid(b"42"), Some(42));
        assert_eq!(suffix_uid(b"f_007"), Some(7));
        assert_eq!(suffix_uid(b"f_"), None);
        assert_eq!(suffix_uid(b"f_1a"), None);
        assert_eq!(suffix_uid(b"f_-"), None);
        assert_eq!(suffix_uid(b"f_99999999999999999999"), None);
        assert_eq!(suffix_uid(b"f_-9223372036854775808"), Some(i64::MIN));
    }

    #[test]
    fn stripping_uses_the_canonical_number() {
        assert_eq!(strip_uid(b"__inference_f_123", 123), b"__inference_f_");
        assert_eq!(strip_uid(b"f_007", 7), b"f_00");
        assert_eq!(strip_uid(b"f_+7", 7), b"f_+");
        assert_eq!(strip_uid(b"f_12 ", 12), b"f_12 ");
    }
}

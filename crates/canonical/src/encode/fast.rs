//! The fast walk: a small buffered message written as it is read, field by field, with no
//! list of its occurrences.
//!
//! Most messages of a model are small (a node, an attribute, a shape) and their known fields
//! come in field order even when the model as a whole is not canonical: then each field can
//! be written the moment it is read. This walk does that with the least work per field (one
//! key read, one table lookup, the value written), where the general walk lists every
//! occurrence, groups them by field and dispatches each group. It gives up, returning
//! `false`, when the message needs the general walk; the caller then drops what it wrote and
//! walks the message again the general way. It gives up on a known field after one of a
//! higher number (out of order), on a second member of a oneof, and on types of more than 64
//! oneofs. A field whose occurrences must be taken together (a map's entries, a packed
//! field's runs, a singular message sent in parts) is gathered when first met, up to the
//! next known field, unknown fields between its occurrences set aside.
//!
//! The encoder gives the walk a budget of bytes it may give up on ([`Encoder::fast_budget`]):
//! messages below one given up on are tried fast again, so a model mostly out of order is
//! not walked twice at every level, and a nesting of messages each given up on cannot cost
//! more than about one more reading of the input.
//!
//! What it does not give up on, it writes as the general walk would: a singular scalar or
//! string met several times in a row keeps its last value (what was written for the earlier
//! ones is dropped), defaults of fields without presence are left out, varints are
//! normalized, map entries are sorted by the general map writer, unknown fields go last.

use unbound_wire::codec::{read_field, RawField, WireType};

use super::{fixed, Encoder, Level, Occ, BUFFER, UNKNOWN};
use crate::error::{CanonicalError, Result};
use crate::schema::{Class, MessageType};
use crate::sink::Sink;

impl<'s, 'a, 'o, S: Sink> Encoder<'s, 'a, 'o, S> {
    /// Writes the message `data` of type `t` (at nesting `depth`) into the buffer as it is
    /// read. `Ok(false)` when it needs the general walk (see the module's documentation);
    /// what was written is then the caller's to drop.
    pub(super) fn fast(
        &mut self,
        level: &mut Level<'a>,
        data: &'a [u8],
        t: &'s MessageType,
        depth: usize,
    ) -> Result<bool> {
        if t.oneofs > 64 {
            return Ok(false);
        }
        let Level {
            occs: unknown,
            group,
            scratch,
            ..
        } = level;
        unknown.clear();
        let mut oneofs = 0u64;
        // The field being written (an index into `t.fields`), and where its output starts.
        let mut current = usize::MAX;
        let mut field_at = self.tmp.len();
        let mut pos = 0;
        let mut seq = 0;
        while pos < data.len() {
            let raw = read_field(data, &mut pos).map_err(|error| CanonicalError::Malformed {
                type_name: t.name.clone(),
                error,
            })?;
            seq += 1;
            let wire = raw.wire_type.bits() as u8;
            let bytes = &data[raw.start..raw.end];
            let known = t
                .index(raw.number)
                .map(|i| i as usize)
                .filter(|&i| t.fields[i].class.takes(wire, t.fields[i].list));
            let Some(idx) = known else {
                unknown.push(Occ {
                    field: UNKNOWN,
                    number: raw.number,
                    wire,
                    seq,
                    value: value_of(&raw, bytes),
                    data: bytes,
                });
                continue;
            };
            let f = &t.fields[idx];
            let numeric = matches!(f.class, Class::Varint(_) | Class::Fixed32 | Class::Fixed64);
            if idx != current {
                if current != usize::MAX && idx < current {
                    return Ok(false);
                }
                current = idx;
                field_at = self.tmp.len();
                if let Some(o) = f.oneof {
                    let bit = 1u64 << o;
                    if oneofs & bit != 0 {
                        return Ok(false);
                    }
                    oneofs |= bit;
                }
            } else if f.map.is_some()
                || (f.list && f.packed && numeric)
                || !f.list && f.class == Class::Message
            {
                // Gathered whole when first met (up to the next known field), so not met again
                // here; the general walk answers if it ever were.
                return Ok(false);
            } else if !f.list {
                // The last occurrence of a singular scalar or string wins.
                self.tmp.truncate(field_at);
            }
            let occ = Occ {
                field: idx as u32,
                number: raw.number,
                wire,
                seq,
                value: value_of(&raw, bytes),
                data: bytes,
            };
            let mut as_is = false;
            let gathered = f.map.is_some()
                || (!f.list && f.class == Class::Message)
                || (f.list && f.packed && numeric);
            if gathered {
                // Every occurrence up to the next known field, to be merged, sorted or packed
                // together (unknown fields between them set aside as usual).
                group.clear();
                group.push(occ);
                while pos < data.len() {
                    let mut next = pos;
                    let Ok(more) = read_field(data, &mut next) else {
                        break;
                    };
                    let more_wire = more.wire_type.bits() as u8;
                    let more_known = t
                        .index(more.number)
                        .map(|i| i as usize)
                        .filter(|&i| t.fields[i].class.takes(more_wire, t.fields[i].list));
                    if more_known.is_some_and(|i| i != idx) {
                        break;
                    }
                    pos = next;
                    seq += 1;
                    let more_bytes = &data[more.start..more.end];
                    let o = Occ {
                        field: more_known.map_or(UNKNOWN, |i| i as u32),
                        number: more.number,
                        wire: more_wire,
                        seq,
                        value: value_of(&more, more_bytes),
                        data: more_bytes,
                    };
                    if more_known.is_some() {
                        group.push(o);
                    } else {
                        unknown.push(o);
                    }
                }
                self.field::<BUFFER>(f, group, t, depth, scratch, &mut as_is)?;
                continue;
            }
            match f.class {
                Class::Message => {
                    let child = f.child.expect("a message field has a type");
                    self.buffered(f.number, bytes.len(), |enc| {
                        enc.message::<BUFFER>(&[bytes], child, depth + 1, true)
                            .map(|_| ())
                    })?;
                }
                Class::Bytes => {
                    if f.list || f.presence || !bytes.is_empty() {
                        self.put_len_field::<BUFFER>(f.number, bytes);
                    }
                }
                class if f.list => {
                    debug_assert!(numeric, "{class:?}");
                    self.repeated_numbers::<BUFFER>(f, &[occ], t, &mut as_is)?;
                }
                class => {
                    let v = super::normalize(class, occ.value);
                    if f.presence || v != 0 {
                        self.put_key::<BUFFER>(f.number, wire);
                        self.put_value::<BUFFER>(class, v);
                    }
                }
            }
        }
        for o in unknown.iter() {
            let mut as_is = false;
            self.unknown::<BUFFER>(o, &mut as_is);
        }
        Ok(true)
    }
}

/// A varint's value or a fixed value's bits (0 for other wire types).
#[inline]
fn value_of(raw: &RawField, bytes: &[u8]) -> u64 {
    match raw.wire_type {
        WireType::Varint => raw.varint,
        WireType::Fixed64 | WireType::Fixed32 => fixed(bytes),
        _ => 0,
    }
}

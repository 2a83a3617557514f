//! The fast walk: a small buffered message written as it is read, field by field, with no
//! list of its occurrences.
//!
//! Most messages of a model are small (a node, an attribute, a shape). This walk writes each
//! field the moment it is read, with the least work per field (one key read, one table
//! lookup, the value written), where the general walk lists every occurrence, groups them by
//! field and dispatches each group.
//!
//! Fields out of number order (a shape's `unknown_rank` before its dims, a node's `device`
//! after its attributes: what other writers do) are written as read too, each run of one
//! field's occurrences remembered by where it starts in the buffer; at the end of the message
//! the runs are put back in field order (a stable reordering: a repeated field's occurrences
//! keep the order read), which is a copy of the message's bytes, not a second walk of what is
//! below it. A singular scalar or string met again after other fields drops its earlier run
//! (the last occurrence wins). A field whose occurrences must be taken together (a map's
//! entries, a packed field's runs, a singular message sent in parts) is gathered when first
//! met, up to the next known field (unknown fields between its occurrences set aside), and
//! its occurrences kept: met again later, its earlier run is dropped and it is written again
//! from all of them. A member of a oneof set after another drops the other's runs and
//! occurrences (protobuf keeps the member set last, merged from its occurrences since). A
//! message sent in several parts is read as their concatenation.
//!
//! It gives up, returning `false`, when the message needs the general walk; the caller then
//! drops what it wrote and walks the message again the general way. It gives up only on
//! types of more than 64 oneofs, and on fields out of order in types of more than 64 fields
//! (which fields were met is a 64-bit mask).
//!
//! The encoder gives the walk a budget of bytes it may give up on ([`Encoder::fast_budget`]):
//! messages below one given up on are tried fast again, so a model mostly given up on is not
//! walked twice at every level, and a nesting of messages each given up on cannot cost more
//! than about one more reading of the input.
//!
//! What it does not give up on, it writes as the general walk would: a singular scalar or
//! string met several times keeps its last value, defaults of fields without presence are
//! left out, varints are normalized, map entries are sorted by the general map writer,
//! unknown fields go last.

use unbound_wire::codec::{read_field, RawField, WireType};

use super::{fixed, Encoder, Level, Occ, Run, BUFFER, UNKNOWN};
use crate::error::{CanonicalError, Result};
use crate::schema::{Class, MessageType};
use crate::sink::Sink;

impl<'s, 'a, 'o, S: Sink> Encoder<'s, 'a, 'o, S> {
    /// Writes the message of type `t` made of `parts` (at nesting `depth`; a message sent in
    /// several parts is read as their concatenation, as protobuf merges them) into the buffer
    /// as it is read. `Ok(false)` when it needs the general walk (see the module's
    /// documentation); what was written is then the caller's to drop.
    pub(super) fn fast(
        &mut self,
        level: &mut Level<'a>,
        parts: &[&'a [u8]],
        t: &'s MessageType,
        depth: usize,
    ) -> Result<bool> {
        if t.oneofs > 64 {
            return Ok(false);
        }
        let Level {
            occs: unknown,
            group,
            runs,
            held,
            scratch,
            ..
        } = level;
        unknown.clear();
        runs.clear();
        held.clear();
        // Which fields were met (a mask: a type of more than 64 fields gives up on order).
        let tracked = t.fields.len() <= 64;
        let mut seen = 0u64;
        let mut oneofs = 0u64;
        // The runs are not in field order, or one was dropped: put back in order at the end.
        let mut reorder = false;
        let start = self.tmp.len();
        // The field being written (an index into `t.fields`), and where its output starts.
        let mut current = usize::MAX;
        let mut field_at = self.tmp.len();
        let mut seq = 0;
        for &data in parts {
            let mut pos = 0;
            while pos < data.len() {
                let raw =
                    read_field(data, &mut pos).map_err(|error| CanonicalError::Malformed {
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
                let gathered = f.map.is_some()
                    || (!f.list && f.class == Class::Message)
                    || (f.list && f.packed && numeric);
                // A gathered field met again: its earlier occurrences are taken with these.
                let mut again = false;
                if idx != current {
                    if current != usize::MAX && idx < current {
                        if !tracked {
                            return Ok(false);
                        }
                        reorder = true;
                    }
                    let bit = if tracked { 1u64 << idx } else { 0 };
                    if seen & bit != 0 && (gathered || !f.list) {
                        // Met again after other fields. A singular scalar or string: its last
                        // occurrence wins. A field gathered when first met: written again with
                        // its earlier occurrences (below). Either way its earlier runs go.
                        for run in runs.iter_mut().filter(|r| r.field == idx as u32) {
                            run.field = DROPPED;
                        }
                        reorder = true;
                        again = gathered;
                    }
                    seen |= bit;
                    current = idx;
                    field_at = self.tmp.len();
                    runs.push(Run {
                        field: idx as u32,
                        start: field_at,
                        end: 0,
                    });
                    if let Some(o) = f.oneof {
                        let bit = 1u64 << o;
                        if oneofs & bit != 0 {
                            // Another member was set before: setting this one clears it (its
                            // runs are dropped, and it counts as never met).
                            let other =
                                |member: usize| member != idx && t.fields[member].oneof == Some(o);
                            for run in runs.iter_mut() {
                                let member = run.field as usize;
                                if run.field != DROPPED && other(member) {
                                    run.field = DROPPED;
                                    seen &= !1u64.checked_shl(member as u32).unwrap_or(0);
                                    reorder = true;
                                }
                            }
                            held.retain(|o| !other(o.field as usize));
                        }
                        oneofs |= bit;
                    }
                } else if gathered {
                    // Gathered up to the end of the part it began in, and met again in the next
                    // part: written again with its earlier occurrences.
                    self.tmp.truncate(field_at);
                    again = true;
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
                if gathered {
                    // Every occurrence up to the next known field, to be merged, sorted or packed
                    // together (unknown fields between them set aside as usual).
                    group.clear();
                    if again {
                        group.extend(held.iter().filter(|o| o.field == idx as u32));
                    }
                    let new = group.len();
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
                    held.extend_from_slice(&group[new..]);
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
                        // (An occurrence a later one overrides is checked too: C++ parses it.)
                        self.check_utf8(f.utf8, t, f.number, bytes)?;
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
        }
        if reorder {
            self.put_runs_in_order(runs, start);
        }
        for o in unknown.iter() {
            let mut as_is = false;
            self.unknown::<BUFFER>(o, &mut as_is);
        }
        Ok(true)
    }

    /// Puts the runs of a message's fields, written to the buffer from `start` as read, back
    /// in field order (a repeated field's runs in the order read), leaving out dropped ones.
    /// The runs already in place at the front stay where they are; the rest is copied aside
    /// once and back in order.
    fn put_runs_in_order(&mut self, runs: &mut [Run], start: usize) {
        let end = self.tmp.len();
        for i in 0..runs.len() {
            runs[i].end = runs.get(i + 1).map_or(end, |next| next.start);
        }
        // Sorted by field, then by where each starts (the order read): no stable sort (and
        // its allocation) needed.
        runs.sort_unstable_by_key(|r| (r.field, r.start));
        let mut kept = start;
        let mut first = 0;
        while let Some(run) = runs
            .get(first)
            .filter(|r| r.field != DROPPED && r.start == kept)
        {
            kept = run.end;
            first += 1;
        }
        let mut aside = std::mem::take(&mut self.reorder);
        aside.clear();
        aside.extend_from_slice(&self.tmp[kept..end]);
        self.tmp.truncate(kept);
        // (A run may be empty: a default left out. Empty ones may start inside the runs kept
        // in place, and hold nothing to copy.)
        for run in runs[first..]
            .iter()
            .filter(|r| r.field != DROPPED && r.start < r.end)
        {
            self.tmp
                .extend_from_slice(&aside[run.start - kept..run.end - kept]);
        }
        self.reorder = aside;
    }
}

/// A run whose field met a later occurrence that replaces it.
const DROPPED: u32 = u32::MAX;

/// A varint's value or a fixed value's bits (0 for other wire types).
#[inline]
fn value_of(raw: &RawField, bytes: &[u8]) -> u64 {
    match raw.wire_type {
        WireType::Varint => raw.varint,
        WireType::Fixed64 | WireType::Fixed32 => fixed(bytes),
        _ => 0,
    }
}

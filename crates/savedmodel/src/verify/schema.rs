//! The schema check of a model: every field of a message checked against its type as
//! TensorFlow's parser (protobuf C++) accepts it. Nested messages parse, packed runs are whole,
//! strings are UTF-8, nesting is bounded. Unknown fields are allowed, and so is a known field
//! with a wire type its kind does not have (the parser keeps it as an unknown field).
//!
//! On models of millions of small nodes this check is most of a `split` or `merge` (issue 15),
//! so the schema is compiled once into a [`Schema`] (a table from field number to what to
//! check, per message type) and serialized messages are scanned in place against it: no
//! descriptor lookup, allocation or label formatting per field. Only when a scan fails is the
//! message parsed and checked again the slow way, which finds and words the fault (so every
//! fault reads as it always did). Large messages are checked on two threads (see
//! [`PARALLEL_MIN_BYTES`]).

use std::collections::HashMap;

use prost_reflect::{Kind, MessageDescriptor};
use unbound_chunked::merger::MAX_NESTING;
use unbound_wire::codec::{is_utf8, read_field, read_varint, WireType};
use unbound_wire::scalar::{scalar_wire, ScalarWire};
use unbound_wire::{Payload, WireMessage, WireValue};

use crate::show::wire;

/// A message (or a run of a message's fields) at least this large is checked on two threads:
/// below it, starting a thread costs more than it saves.
const PARALLEL_MIN_BYTES: usize = 8 << 20;

/// A message with at least this many parsed fields is checked on two threads.
const PARALLEL_MIN_FIELDS: usize = 1 << 16;

/// Field numbers below this are looked up in a dense table; larger ones in a sorted list.
const DENSE_FIELDS: u32 = 64;

/// What to check of one known field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// Not in the schema: anything goes.
    Unknown,
    /// A message of the type numbered so in the [`Schema`].
    Message(u32),
    /// A string: UTF-8.
    Utf8,
    /// Bytes, or a scalar field that cannot be packed: any length-delimited value is fine.
    Any,
    /// A repeated scalar: a length-delimited value must be a whole packed run.
    Packed(ScalarWire),
}

/// One message type's checks, by field number.
struct TypeChecks {
    desc: MessageDescriptor,
    dense: Vec<Check>,
    sparse: Vec<(u32, Check)>,
}

/// A message type and every type it reaches, compiled for checking.
pub(super) struct Schema {
    types: Vec<TypeChecks>,
}

impl Schema {
    /// Compiles `root` and every message type reachable from it; `root` is type 0.
    pub(super) fn new(root: &MessageDescriptor) -> Self {
        let mut index: HashMap<String, u32> = HashMap::new();
        let mut order = vec![root.clone()];
        index.insert(root.full_name().to_string(), 0);
        let mut types = Vec::new();
        let mut next = 0;
        while next < order.len() {
            let desc = order[next].clone();
            next += 1;
            let mut dense = vec![Check::Unknown; DENSE_FIELDS as usize];
            let mut sparse = Vec::new();
            for fd in desc.fields() {
                let check = match fd.kind() {
                    Kind::Message(sub) => {
                        let n = order.len() as u32;
                        let i = *index.entry(sub.full_name().to_string()).or_insert(n);
                        if i == n {
                            order.push(sub);
                        }
                        Check::Message(i)
                    }
                    Kind::String => Check::Utf8,
                    Kind::Bytes => Check::Any,
                    kind => match scalar_wire(&kind) {
                        Some(
                            w @ (ScalarWire::Varint | ScalarWire::Fixed32 | ScalarWire::Fixed64),
                        ) if fd.is_list() => Check::Packed(w),
                        _ => Check::Any,
                    },
                };
                match usize::try_from(fd.number()) {
                    Ok(n) if n < dense.len() => dense[n] = check,
                    _ => sparse.push((fd.number(), check)),
                }
            }
            sparse.sort_unstable_by_key(|&(n, _)| n);
            types.push(TypeChecks {
                desc,
                dense,
                sparse,
            });
        }
        Schema { types }
    }

    /// What to check of field `number` of type `ty`.
    #[inline]
    fn check(&self, ty: u32, number: u32) -> Check {
        let t = &self.types[ty as usize];
        if number < DENSE_FIELDS {
            t.dense[number as usize]
        } else {
            t.sparse
                .binary_search_by_key(&number, |&(n, _)| n)
                .map_or(Check::Unknown, |i| t.sparse[i].1)
        }
    }

    /// The descriptor of type `ty`.
    fn desc(&self, ty: u32) -> &MessageDescriptor {
        &self.types[ty as usize].desc
    }

    /// Checks `m`, a message of the schema's root type; the fault, worded, if any.
    pub(super) fn check_root(&self, m: &WireMessage) -> Result<(), String> {
        self.check_message(m, 0, 0)
    }

    /// Checks `m`, a message of the type named `type_name` at nesting `depth` below the root
    /// (a part of a root message checked on its own: its nesting counts from where it lies).
    pub(super) fn check_part(
        &self,
        m: &WireMessage,
        type_name: &str,
        depth: usize,
    ) -> Result<(), String> {
        let ty = self
            .types
            .iter()
            .position(|t| t.desc.full_name() == type_name)
            .ok_or_else(|| format!("{type_name} is not a part of {}", self.desc(0).full_name()))?;
        self.check_message(m, ty as u32, depth)
    }

    /// Checks `m`, a message of type `ty` at nesting `depth`.
    fn check_message(&self, m: &WireMessage, ty: u32, depth: usize) -> Result<(), String> {
        if depth > MAX_NESTING {
            return Err(format!("nested deeper than {MAX_NESTING} levels"));
        }
        if m.fields.len() >= PARALLEL_MIN_FIELDS {
            let mid = m.fields.len() / 2;
            let (first, second) = std::thread::scope(|s| {
                let second = s.spawn(|| self.check_fields(m, mid..m.fields.len(), ty, depth));
                let first = self.check_fields(m, 0..mid, ty, depth);
                (first, second.join().expect("schema check thread panicked"))
            });
            // The first fault in field order, as the sequential check reports it.
            return first.and(second);
        }
        self.check_fields(m, 0..m.fields.len(), ty, depth)
    }

    /// Checks the fields `range` of `m`, a message of type `ty` at nesting `depth`.
    fn check_fields(
        &self,
        m: &WireMessage,
        range: std::ops::Range<usize>,
        ty: u32,
        depth: usize,
    ) -> Result<(), String> {
        for i in range {
            let f = &m.fields[i];
            let check = self.check(ty, f.number);
            let ok = match (check, &f.value) {
                (Check::Unknown, _) => true,
                (Check::Message(sub), WireValue::Message(inner)) => {
                    if let Err(e) = self.check_message(inner, sub, depth + 1) {
                        return Err(format!("{}.{e}", self.label(m, ty, i)));
                    }
                    true
                }
                (Check::Message(sub), WireValue::Bytes(p)) => {
                    with_bytes(p, |b| self.valid_in_place(b, sub, depth + 1)).unwrap_or(false)
                }
                (Check::Utf8, WireValue::Bytes(p)) => with_bytes(p, is_utf8).unwrap_or(false),
                (Check::Packed(w), WireValue::Bytes(p)) => {
                    with_bytes(p, |b| packed_run_ok(w, b).is_ok()).unwrap_or(false)
                }
                // Bytes, wire types the kind allows and wire types it does not (an unknown
                // field to protobuf C++) all pass.
                _ => true,
            };
            if !ok {
                if let Some(fault) = self.fault_at(m, ty, i, depth) {
                    return Err(fault);
                }
            }
        }
        Ok(())
    }

    /// The fault of field `i` of `m` (type `ty`), which failed the quick check: found again
    /// the slow way and worded. `None` when the slow way finds none (the field then passes,
    /// as it always did).
    #[cold]
    fn fault_at(&self, m: &WireMessage, ty: u32, i: usize, depth: usize) -> Option<String> {
        let f = &m.fields[i];
        let WireValue::Bytes(p) = &f.value else {
            return None;
        };
        let at = || self.label(m, ty, i);
        match self.check(ty, f.number) {
            Check::Message(sub) => {
                let inner = match wire::parse(p, &at()) {
                    Ok(inner) => inner,
                    Err(e) => return Some(format!("{}: {e}", at())),
                };
                self.check_message(&inner, sub, depth + 1)
                    .err()
                    .map(|e| format!("{}.{e}", at()))
            }
            Check::Utf8 => match p.bytes() {
                Err(e) => Some(format!("{}: {e}", at())),
                Ok(b) => std::str::from_utf8(&b)
                    .err()
                    .map(|e| format!("{}: string is not valid UTF-8: {e}", at())),
            },
            Check::Packed(w) => match p.bytes() {
                Err(e) => Some(format!("{}: {e}", at())),
                Ok(b) => packed_run_ok(w, &b).err().map(|e| format!("{}: {e}", at())),
            },
            Check::Unknown | Check::Any => None,
        }
    }

    /// The name of field `i` of `m` (type `ty`), with its occurrence for repeated fields:
    /// `node[12]`, `versions`.
    #[cold]
    fn label(&self, m: &WireMessage, ty: u32, i: usize) -> String {
        let number = m.fields[i].number;
        let Some(fd) = self.desc(ty).get_field(number) else {
            return number.to_string();
        };
        if fd.is_list() || fd.is_map() {
            let n = m.fields[..i].iter().filter(|g| g.number == number).count();
            format!("{}[{n}]", fd.name())
        } else {
            fd.name().to_string()
        }
    }

    /// Whether serialized `buf` is a valid message of type `ty` at nesting `depth`, scanned in
    /// place: the rules of [`Schema::check_message`], without saying why not. A large one is
    /// checked on two threads.
    fn valid_in_place(&self, buf: &[u8], ty: u32, depth: usize) -> bool {
        if buf.len() >= PARALLEL_MIN_BYTES {
            return self.valid_in_place_split(buf, ty, depth);
        }
        self.valid_run(buf, ty, depth)
    }

    /// [`Schema::valid_in_place`] of a large `buf`: a field holding most of it is descended
    /// into; otherwise the fields are cut in two runs of about equal size, checked at once
    /// (the fields of a message are checked independently, so each run is checked as a
    /// message of the same type).
    fn valid_in_place_split(&self, buf: &[u8], ty: u32, depth: usize) -> bool {
        if depth > MAX_NESTING {
            return false;
        }
        let mut pos = 0;
        let mut cut = None;
        while pos < buf.len() {
            let at = pos;
            let Ok(f) = read_field(buf, &mut pos) else {
                return false;
            };
            if f.end - f.start > buf.len() / 2 {
                // One field holds most of the message: check the rest here, it in parts.
                let Check::Message(sub) = self.check(ty, f.number) else {
                    break;
                };
                if f.wire_type != WireType::Len {
                    break;
                }
                return self.valid_run(&buf[..at], ty, depth)
                    && self.valid_in_place(&buf[f.start..f.end], sub, depth + 1)
                    && self.valid_run(&buf[pos..], ty, depth);
            }
            if cut.is_none() && pos >= buf.len() / 2 {
                cut = Some(pos);
            }
        }
        let Some(cut) = cut.filter(|&c| c < buf.len()) else {
            return self.valid_run(buf, ty, depth);
        };
        let (first, second) = buf.split_at(cut);
        std::thread::scope(|s| {
            let other = s.spawn(|| self.valid_run(second, ty, depth));
            let here = self.valid_run(first, ty, depth);
            other.join().expect("schema check thread panicked") && here
        })
    }

    /// [`Schema::valid_in_place`] on one thread.
    fn valid_run(&self, buf: &[u8], ty: u32, depth: usize) -> bool {
        if depth > MAX_NESTING {
            return false;
        }
        let mut pos = 0;
        while pos < buf.len() {
            let Ok(f) = read_field(buf, &mut pos) else {
                return false;
            };
            if f.wire_type != WireType::Len {
                // Scalars, groups and wrong wire types all pass.
                continue;
            }
            let value = &buf[f.start..f.end];
            let ok = match self.check(ty, f.number) {
                Check::Message(sub) => self.valid_in_place(value, sub, depth + 1),
                Check::Utf8 => is_utf8(value),
                Check::Packed(w) => packed_run_ok(w, value).is_ok(),
                Check::Unknown | Check::Any => true,
            };
            if !ok {
                return false;
            }
        }
        true
    }
}

/// `f` applied to the bytes of `p`, borrowed when they are in memory; an error when a lazy
/// record cannot be read.
fn with_bytes<T>(p: &Payload, f: impl FnOnce(&[u8]) -> T) -> Result<T, ()> {
    match p {
        Payload::Inline(b) => Ok(f(b)),
        Payload::Record(_) => p.bytes().map(|b| f(&b)).map_err(drop),
    }
}

/// A packed run of scalars of layout `wire`: whole fixed-width values, or varints that decode.
fn packed_run_ok(wire: ScalarWire, bytes: &[u8]) -> Result<(), String> {
    let width = match wire {
        ScalarWire::Fixed64 => 8,
        ScalarWire::Fixed32 => 4,
        ScalarWire::Varint => 0,
        ScalarWire::Len => return Err("a packed run where the schema has no scalar".into()),
    };
    if width > 0 {
        return match bytes.len() % width {
            0 => Ok(()),
            _ => Err(format!(
                "packed run of {} bytes is not a multiple of {width}",
                bytes.len()
            )),
        };
    }
    let mut pos = 0;
    while pos < bytes.len() {
        read_varint(bytes, &mut pos).map_err(|e| e.to_string())?;
    }
    Ok(())
}

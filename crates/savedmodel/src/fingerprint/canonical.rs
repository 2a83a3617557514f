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

use crate::{Result, SavedModelError};
use prost_reflect::MessageDescriptor;
use unbound_wire::Payload;

use super::entry_memo::EntryMemo;
pub use super::fields::{Source, Val};
use super::layout::{FieldInfo, Layout};
use super::maps::{map_entries, Held, KeyOrder, MapKey, MapValue};
use super::rope::Rope;
use super::wire_values::{fits, number, put_number, put_repeated, put_unknown, Class, LEN};

/// Deepest message nesting encoded: protobuf C++'s default parsing recursion limit (a model
/// nested deeper does not parse in TensorFlow either).
pub const MAX_DEPTH: usize = 100;

/// Output buffers start this large at most (they grow past it as needed).
const MAX_RESERVE: usize = 64 << 10;

/// What a read of a message's field occurrences learns on the way: the unknown ones (kept in
/// order, written last), and which member of each oneof was set last.
struct Occurrences<'v> {
    /// Occurrences read so far (the sequence number of the last one).
    seq: usize,
    /// Unknown fields, and known numbers with the wrong wire type (C++ keeps those as unknown).
    unknown: Vec<(u32, Val<'v>)>,
    /// Per oneof: the member last set and the sequence number from which it counts.
    oneof_state: Vec<Option<(usize, usize)>>,
}

impl<'v> Occurrences<'v> {
    fn new(layout: &Layout) -> Self {
        Occurrences {
            seq: 0,
            unknown: Vec::new(),
            oneof_state: vec![None; layout.oneofs],
        }
    }

    /// Reads the next occurrence: the index of its known field, or `None` when it is unknown.
    fn known(&mut self, layout: &Layout, number: u32, value: Val<'v>) -> Option<usize> {
        self.seq += 1;
        let Some(i) = layout
            .index(number)
            .filter(|&i| fits(layout.fields[i].class, layout.fields[i].list, value))
        else {
            self.unknown.push((number, value));
            return None;
        };
        if let Some(o) = layout.fields[i].oneof {
            if self.oneof_state[o].is_none_or(|(member, _)| member != i) {
                self.oneof_state[o] = Some((i, self.seq));
            }
        }
        Some(i)
    }

    /// The sequence number from which field `i`'s occurrences count, once all are read:
    /// 0, or where its oneof last switched to it; `None` when another member of its oneof won.
    fn counts_from(&self, layout: &Layout, i: usize) -> Option<usize> {
        match layout.fields[i].oneof.map(|o| self.oneof_state[o]) {
            None => Some(0),
            Some(Some((member, from))) if member == i => Some(from),
            Some(_) => None,
        }
    }
}

/// Built messages with at least this many fields in all are encoded a field number at a time
/// ([`Encoder::encode_fields_by_number`]).
const MANY_FIELDS: usize = 4096;

/// Whether `sources` are all built messages (whose fields cost nothing to read again) with at
/// least [`MANY_FIELDS`] fields in all.
fn many_built_fields(sources: &[Source<'_>]) -> bool {
    let mut count = 0;
    for source in sources {
        match source {
            Source::Ref(m) | Source::Written(m, _) => count += m.fields.len(),
            _ => return false,
        }
    }
    count >= MANY_FIELDS
}

/// Room to reserve for the encoding of `sources`: about their size, within [`MAX_RESERVE`].
fn reserve_for(sources: &[Source<'_>]) -> usize {
    let input: usize = sources.iter().map(Source::input_len).sum();
    (input + input / 8 + 16).min(MAX_RESERVE)
}

/// Writes deterministic serializations; caches the field layout of each message type.
pub struct Encoder {
    layouts: Vec<Rc<Layout>>,
    by_name: HashMap<String, usize>,
    depth: usize,
    /// Whether serialized messages already in canonical form are taken as they are
    /// (`already_canonical.rs`) instead of re-encoded.
    fast_path: bool,
    /// How many messages were taken as they are.
    taken_as_is: u64,
    /// The serialized messages at nesting 1 to this below the message being encoded are known
    /// to be canonical already (0: none; see [`Encoder::trust_children`]).
    trust_depth: usize,
    /// Whether the canonical check also checks what protobuf C++ checks when it parses (see
    /// [`Encoder::is_canonical_and_valid`]).
    pub(super) validate: bool,
    /// The deepest nesting a canonical check has met since this was last reset: the check of
    /// a message at nesting `d` that met nesting `m` gives the same answer at any nesting up
    /// to `d + MAX_DEPTH - m` (its only limit is on nesting).
    pub(super) deepest: usize,
    /// Map entries the canonical check accepted lately ([`EntryMemo`]).
    pub(super) entry_memo: EntryMemo,
    /// See [`Encoder::write_out_built`].
    copy_built: bool,
}

impl Default for Encoder {
    fn default() -> Self {
        Self {
            layouts: Vec::new(),
            by_name: HashMap::new(),
            depth: 0,
            fast_path: true,
            taken_as_is: 0,
            trust_depth: 0,
            validate: false,
            deepest: 0,
            entry_memo: EntryMemo::default(),
            copy_built: false,
        }
    }
}

impl Encoder {
    /// A new encoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// An encoder that re-encodes every message, never taking serialized bytes as they are:
    /// the reference the fast path is tested against (its output must be identical).
    pub fn without_fast_path() -> Self {
        Self {
            fast_path: false,
            ..Self::default()
        }
    }

    /// How many serialized messages were found already canonical and taken as they are.
    pub fn taken_as_is(&self) -> u64 {
        self.taken_as_is
    }

    /// Whether serialized `buf` is a message of type `desc` already in canonical form (its
    /// deterministic serialization is `buf` itself).
    pub fn is_canonical(&mut self, buf: &bytes::Bytes, desc: &MessageDescriptor) -> bool {
        let layout = self.layout_index(desc);
        self.already_canonical(buf, 0, buf.len(), layout, 0)
    }

    /// [`Encoder::is_canonical`], and also a message protobuf C++ parses: every string
    /// UTF-8, nesting within its recursion limit counted as it counts it (a map entry is a
    /// level). A canonical message has every other property `verify`'s schema check asks
    /// (well-formed fields, nested messages that parse, whole packed runs; `verify::schema`
    /// lists them), so `verify` skips its own check of a `.pb` this accepts; the tests in
    /// `tests/verify_schema.rs` hold the two to that.
    pub fn is_canonical_and_valid(&mut self, buf: &bytes::Bytes, desc: &MessageDescriptor) -> bool {
        self.validate = true;
        let valid = self.is_canonical(buf, desc);
        self.validate = false;
        valid
    }

    /// Trusts (or stops trusting) the serialized messages one level below the message being
    /// encoded to be canonical, taking them as they are without a scan. For a message whose
    /// fields are slices of a larger message [`Encoder::is_canonical`] accepted, each such
    /// slice being the value of the same field there: re-rooted, the same bytes at a smaller
    /// depth are canonical too (the fingerprint of a `.pb` hashes the whole model, then its
    /// graph again). Messages built in memory (edited) are still encoded, and everything
    /// below them is checked as usual.
    pub fn trust_children(&mut self, trust: bool) {
        self.trust_depth = usize::from(trust);
    }

    /// Whether serialized messages below the top are trusted to be canonical (see
    /// [`Encoder::trust_children`]).
    pub(super) fn trusts_children(&self) -> bool {
        self.trust_depth > 0
    }

    /// Lets [`super::hashes::hash_message`] write built messages out for the byte encoder
    /// (a copy of them) however much of the input they are.
    pub(super) fn write_out_built(&mut self, allow: bool) {
        self.copy_built = allow;
    }

    /// See [`Encoder::write_out_built`].
    pub(super) fn writes_out_built(&self) -> bool {
        self.copy_built
    }

    /// Whether `buf[start..end]`, a message of layout `layout`, can be taken as it is (and
    /// counts it if so).
    fn take_as_is(&mut self, buf: &bytes::Bytes, start: usize, end: usize, layout: usize) -> bool {
        let depth = self.depth;
        let trusted = self.children_trusted();
        if !self.fast_path {
            return false;
        }
        self.deepest = 0;
        let ok = trusted || self.already_canonical(buf, start, end, layout, depth);
        self.taken_as_is += u64::from(ok);
        ok
    }

    /// Whether the serialized messages directly inside the message being encoded are trusted
    /// to be canonical ([`Encoder::trust_children`]).
    fn children_trusted(&self) -> bool {
        (1..=self.trust_depth).contains(&self.depth)
    }

    /// The field of `layout` whose occurrences make up all of `source`, and how many there
    /// are, when that field is a repeated message field whose serialized occurrences are
    /// taken as they are when trusted: then `source`'s pieces, when it is a
    /// [`Source::Written`], are exactly what encoding each occurrence in turn writes.
    fn whole_run(source: &Source<'_>, layout: &Layout) -> Option<(usize, usize)> {
        let (number, count) = source.run_of()?;
        let i = layout.index(number)?;
        let info = &layout.fields[i];
        (info.list && info.class == Class::Message && info.map.is_none()).then_some((i, count))
    }

    pub(super) fn layout_index(&mut self, desc: &MessageDescriptor) -> usize {
        if let Some(&i) = self.by_name.get(desc.full_name()) {
            return i;
        }
        self.layouts.push(Rc::new(Layout::new(desc)));
        let i = self.layouts.len() - 1;
        self.by_name.insert(desc.full_name().to_string(), i);
        i
    }

    /// The layout numbered `index`.
    pub(super) fn layout_rc(&self, index: usize) -> Rc<Layout> {
        self.layouts[index].clone()
    }

    /// The layout of the messages `field` holds.
    pub(super) fn child(&mut self, field: &FieldInfo) -> usize {
        if let Some(i) = field.child.get() {
            return i;
        }
        let desc = field.message.as_ref().expect("a message field");
        let i = self.layout_index(desc);
        field.child.set(Some(i));
        i
    }

    /// The deterministic serialization of the message of type `desc` made of `sources`.
    pub fn encode(&mut self, sources: &[Source<'_>], desc: &MessageDescriptor) -> Result<Rope> {
        let mut out = Rope::with_capacity(reserve_for(sources));
        self.encode_to(sources, desc, &mut out)?;
        Ok(out)
    }

    /// FarmHash `Fingerprint64` of [`Encoder::encode`]'s bytes, hashed as they are produced
    /// (never held whole: see [`Rope::hashing`]).
    pub fn fingerprint64(
        &mut self,
        sources: &[Source<'_>],
        desc: &MessageDescriptor,
    ) -> Result<u64> {
        let mut out = Rope::hashing();
        self.encode_to(sources, desc, &mut out)?;
        out.finish()
    }

    /// [`Encoder::fingerprint64`] of [`Encoder::encode`]'s bytes followed by `tail`.
    pub fn fingerprint64_then(
        &mut self,
        sources: &[Source<'_>],
        desc: &MessageDescriptor,
        tail: &[u8],
    ) -> Result<u64> {
        let mut out = Rope::hashing();
        self.encode_to(sources, desc, &mut out)?;
        out.put(tail);
        out.finish()
    }

    fn encode_to(
        &mut self,
        sources: &[Source<'_>],
        desc: &MessageDescriptor,
        out: &mut Rope,
    ) -> Result<()> {
        let layout = self.layout_index(desc);
        if let [Source::Slice(buf, start, end)] = sources {
            if self.take_as_is(buf, *start, *end, layout) {
                out.put_shared(buf, *start, *end);
                return Ok(());
            }
        }
        if let [Source::Raw(buf)] = sources {
            if self.take_as_is(buf, 0, buf.len(), layout) {
                out.put_shared(buf, 0, buf.len());
                return Ok(());
            }
        }
        self.encode_at(sources, layout, out)
    }

    /// Appends the encoding of the message of layout `layout` made of `sources` to `out`.
    fn encode_at(&mut self, sources: &[Source<'_>], layout: usize, out: &mut Rope) -> Result<()> {
        let layout = self.layouts[layout].clone();
        if self.depth > MAX_DEPTH {
            return Err(SavedModelError::TooDeep {
                source_name: format!("{} being fingerprinted", layout.name),
                limit: MAX_DEPTH,
            });
        }
        self.depth += 1;
        let result = self.encode_fields(sources, &layout, out);
        self.depth -= 1;
        result
    }

    /// The encoding of a nested message, held so that its length can prefix it.
    fn encode_nested(&mut self, sources: &[Source<'_>], layout: usize) -> Result<Rope> {
        let mut out = Rope::with_capacity(reserve_for(sources));
        self.encode_at(sources, layout, &mut out)?;
        Ok(out)
    }

    fn encode_fields(
        &mut self,
        sources: &[Source<'_>],
        layout: &Layout,
        out: &mut Rope,
    ) -> Result<()> {
        if many_built_fields(sources) {
            return self.encode_fields_by_number(sources, layout, out);
        }
        // Known occurrences (field index, sequence number, value); unknown ones in `seen`.
        let mut known: Vec<(usize, usize, Val<'_>)> = Vec::with_capacity(16);
        let mut seen = Occurrences::new(layout);
        for source in sources {
            source.for_each(|number, value| {
                if let Some(i) = seen.known(layout, number, value) {
                    known.push((i, seen.seq, value));
                }
            })?;
        }
        if !known.is_sorted_by_key(|&(i, _, _)| i) {
            known.sort_by_key(|&(i, s, _)| (i, s));
        }

        let mut rest = known.as_slice();
        let mut values: Vec<Val<'_>> = Vec::new();
        while let Some(&(i, _, _)) = rest.first() {
            let n = rest.iter().take_while(|(j, _, _)| *j == i).count();
            let (group, tail) = rest.split_at(n);
            rest = tail;
            let info = &layout.fields[i];
            let Some(from) = seen.counts_from(layout, i) else {
                continue;
            };
            values.clear();
            values.extend(
                group
                    .iter()
                    .filter(|&&(_, s, _)| s >= from)
                    .map(|&(_, _, v)| v),
            );
            self.encode_field(info, &values, out)?;
        }
        for (number, value) in seen.unknown {
            put_unknown(number, value, out)?;
        }
        Ok(())
    }

    /// [`Encoder::encode_fields`] of built messages with very many fields (a merged graph of
    /// millions of nodes): the fields are read once to find which occur, then once more per
    /// field number that occurs, in order, each occurrence of a repeated message field encoded
    /// as it is met. The same bytes as collecting and sorting every occurrence first, which
    /// held tens of bytes per field twice over (issue 15: the allocation, its page faults and
    /// its copies as it grew were a quarter of the fingerprint of a merged model of millions of
    /// nodes).
    fn encode_fields_by_number(
        &mut self,
        sources: &[Source<'_>],
        layout: &Layout,
        out: &mut Rope,
    ) -> Result<()> {
        // A source made of one repeated message field only is counted without a read of its
        // fields (and, when its messages are trusted, written as its pieces: below).
        let runs: Vec<Option<(usize, usize)>> = sources
            .iter()
            .map(|source| Self::whole_run(source, layout))
            .collect();
        let mut present = vec![false; layout.fields.len()];
        let mut seen = Occurrences::new(layout);
        for (source, run) in sources.iter().zip(&runs) {
            if let Some((i, count)) = *run {
                present[i] = true;
                seen.seq += count;
                continue;
            }
            source.for_each(|number, value| {
                if let Some(i) = seen.known(layout, number, value) {
                    present[i] = true;
                }
            })?;
        }
        let mut values: Vec<Val<'_>> = Vec::new();
        for (i, info) in layout.fields.iter().enumerate() {
            if !present[i] {
                continue;
            }
            let Some(from) = seen.counts_from(layout, i) else {
                continue;
            };
            // Each occurrence of a repeated message field is a message of its own.
            let streamed = (info.list && info.class == Class::Message && info.map.is_none())
                .then(|| self.child(info));
            values.clear();
            let mut seq = 0;
            let mut result = Ok(());
            for (source, run) in sources.iter().zip(&runs) {
                if let (Source::Written(_, pieces), Some((j, count))) = (source, *run) {
                    if j != i {
                        seq += count;
                        continue;
                    }
                    // Each occurrence would be taken as it is, key and length included:
                    // the pieces are those bytes, in order (issue 15: a split's chunks of
                    // millions of nodes, hashed a node at a time, were half of the hash of
                    // its output's graph).
                    if self.fast_path && self.children_trusted() && result.is_ok() {
                        for piece in pieces.iter() {
                            out.put_shared(piece, 0, piece.len());
                        }
                        self.taken_as_is += count as u64;
                        seq += count;
                        continue;
                    }
                }
                source.for_each(|number, value| {
                    seq += 1;
                    if number != info.number || seq < from || !fits(info.class, info.list, value) {
                        return;
                    }
                    match streamed {
                        Some(child) if result.is_ok() => {
                            result = self.put_message(info.number, &[value], child, out);
                        }
                        Some(_) => {}
                        None => values.push(value),
                    }
                })?;
            }
            result?;
            if streamed.is_none() {
                self.encode_field(info, &values, out)?;
            }
        }
        for (number, value) in seen.unknown {
            put_unknown(number, value, out)?;
        }
        Ok(())
    }

    fn encode_field(&mut self, info: &FieldInfo, values: &[Val<'_>], out: &mut Rope) -> Result<()> {
        if let Some(map) = &info.map {
            let entries = map_entries(values, map)?;
            for (key, value) in &entries {
                let body = self.map_entry(info, key, value)?;
                out.put_key(info.number, LEN);
                out.put_varint(body.len());
                out.append(body);
            }
            return Ok(());
        }
        let last = values[values.len() - 1];
        match info.class {
            Class::Message => {
                let child = self.child(info);
                if info.list {
                    for v in values {
                        self.put_message(info.number, &[*v], child, out)?;
                    }
                } else {
                    self.put_message(info.number, values, child, out)?;
                }
            }
            Class::Bytes if info.list => {
                for v in values {
                    out.put_key(info.number, LEN);
                    v.put_len(out)?;
                }
            }
            Class::Bytes => {
                if info.presence || !last.is_empty_len() {
                    out.put_key(info.number, LEN);
                    last.put_len(out)?;
                }
            }
            Class::Varint(_) | Class::Fixed32 | Class::Fixed64 if info.list => {
                put_repeated(info.number, info.class, info.packed, values, out)?;
            }
            Class::Varint(_) | Class::Fixed32 | Class::Fixed64 => {
                let v = number(info.class, last);
                if info.presence || v != 0 {
                    put_number(info.number, info.class, v, out);
                }
            }
            Class::Group => unreachable!("groups never fit a known field"),
        }
        Ok(())
    }

    /// Writes a message field made of the messages `values` hold (merged in order).
    fn put_message(
        &mut self,
        number: u32,
        values: &[Val<'_>],
        layout: usize,
        out: &mut Rope,
    ) -> Result<()> {
        if let [one] = values {
            let slice = match one {
                Val::Slice(buf, start, end) => Some((*buf, *start, *end)),
                Val::Payload(Payload::Inline(buf)) => Some((buf, 0, buf.len())),
                _ => None,
            };
            if let Some((buf, start, end)) = slice {
                if self.take_as_is(buf, start, end, layout) {
                    out.put_field_in_place(number, buf, start, end);
                    return Ok(());
                }
            }
        }
        let body = if let [one] = values {
            let source = one.to_source()?;
            self.encode_nested(source.as_slice(), layout)?
        } else {
            let mut sources = Vec::with_capacity(values.len());
            for v in values {
                sources.extend(v.to_source()?);
            }
            self.encode_nested(&sources, layout)?
        };
        out.put_key(number, LEN);
        out.put_varint(body.len());
        out.append(body);
        Ok(())
    }

    /// One entry of map field `info`: key and value, both always written.
    fn map_entry(&mut self, info: &FieldInfo, key: &MapKey, value: &MapValue<'_>) -> Result<Rope> {
        let map = info.map.as_ref().expect("a map field");
        let mut body = Rope::new();
        match &key.order {
            KeyOrder::Str(s) => {
                body.put_key(1, LEN);
                body.put_varint(s.len() as u64);
                body.put(s);
            }
            _ => put_number(1, map.key_class, key.wire, &mut body),
        }
        let last = value.last().map(|v| v.val());
        match map.value_class {
            Class::Message => {
                let child = self.child(info);
                if let [one] = value.as_slice() {
                    self.put_message(2, &[one.val()], child, &mut body)?;
                } else {
                    let vals: Vec<Val<'_>> = value.iter().map(Held::val).collect();
                    self.put_message(2, &vals, child, &mut body)?;
                }
            }
            Class::Bytes => {
                body.put_key(2, LEN);
                match last {
                    Some(v) => v.put_len(&mut body)?,
                    None => body.put_varint(0),
                }
            }
            class @ (Class::Varint(_) | Class::Fixed32 | Class::Fixed64) => {
                let v = last.map_or(0, |v| number(class, v));
                put_number(2, class, v, &mut body);
            }
            Class::Group => unreachable!("map values are never groups"),
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::hashes::descriptor;
    use bytes::Bytes;
    use unbound_wire::codec::{put_key, put_varint, WireType};
    use unbound_wire::WireMessage;

    fn varint(out: &mut Vec<u8>, number: u32, value: u64) {
        put_key(number, WireType::Varint, out);
        put_varint(value, out);
    }

    fn len(out: &mut Vec<u8>, number: u32, value: &[u8]) {
        put_key(number, WireType::Len, out);
        put_varint(value.len() as u64, out);
        out.extend_from_slice(value);
    }

    /// The encoding of `bytes` read as serialized (fields collected and sorted) and as a built
    /// message (past `MANY_FIELDS`, a field number at a time), checked equal to the encoding
    /// of the same fields as several built sources ([`in_pieces`]).
    fn both_ways(bytes: Vec<u8>, type_name: &str) -> (Vec<u8>, Vec<u8>) {
        let desc = descriptor(type_name).unwrap();
        let bytes = Bytes::from(bytes);
        let built = WireMessage::parse(&bytes, None).unwrap();
        assert!(built.fields.len() >= MANY_FIELDS);
        let serialized = Encoder::new()
            .encode(&[Source::Raw(bytes)], &desc)
            .unwrap()
            .to_vec()
            .unwrap();
        let by_number = Encoder::new()
            .encode(&[Source::Ref(&built)], &desc)
            .unwrap()
            .to_vec()
            .unwrap();
        for pieces in [2, 9, 70] {
            assert_eq!(
                in_pieces(&built, &desc, pieces),
                by_number,
                "{type_name} in {pieces} sources"
            );
        }
        (serialized, by_number)
    }

    /// The encoding of `built` given as `pieces` built messages of consecutive fields (a
    /// merged graph's chunks, hashed as they are held): some fields then occur in a few of
    /// the sources only, and a oneof's last member may be set in another source than the
    /// one before.
    fn in_pieces(built: &WireMessage, desc: &MessageDescriptor, pieces: usize) -> Vec<u8> {
        let per = built.fields.len().div_ceil(pieces);
        let parts: Vec<WireMessage> = built
            .fields
            .chunks(per)
            .map(|fields| WireMessage {
                fields: fields.to_vec(),
                descriptor: None,
            })
            .collect();
        assert_eq!(parts.len(), pieces);
        let sources: Vec<Source<'_>> = parts.iter().map(Source::Ref).collect();
        Encoder::new()
            .encode(&sources, desc)
            .unwrap()
            .to_vec()
            .unwrap()
    }

    #[test]
    fn many_fields_encode_a_number_at_a_time_as_they_would_collected() {
        // A graph: nodes, versions in three occurrences (merged), unknown fields and a node
        // number with the wrong wire type (kept as unknown), all out of order.
        let mut graph = Vec::new();
        for i in 0..MANY_FIELDS + 10 {
            if i % 1000 == 7 {
                let mut versions = Vec::new();
                varint(&mut versions, 1, i as u64);
                len(&mut graph, 4, &versions);
                varint(&mut graph, 99, i as u64);
                varint(&mut graph, 1, 5);
            }
            let mut node = Vec::new();
            len(&mut node, 2, b"AddV2");
            len(&mut node, 1, format!("n{i}").as_bytes());
            len(&mut graph, 1, &node);
        }
        let (serialized, by_number) = both_ways(graph, "tensorflow.GraphDef");
        assert_eq!(serialized, by_number);

        // A oneof switching members many times (AttrValue's `value`): the member set last,
        // a message (`list`), merges only its occurrences since it was last set; unknown
        // fields in between.
        let list = |s: &[u8]| {
            let mut list = Vec::new();
            len(&mut list, 2, s);
            list
        };
        let mut attr = Vec::new();
        for i in 0..MANY_FIELDS as u64 {
            match i % 3 {
                0 => len(&mut attr, 1, &list(format!("s{i}").as_bytes())),
                1 => varint(&mut attr, 3, i),
                _ => varint(&mut attr, 50, i),
            }
        }
        varint(&mut attr, 3, 1);
        len(&mut attr, 1, &list(b"x"));
        len(&mut attr, 1, &list(b"y"));
        let (serialized, by_number) = both_ways(attr, "tensorflow.AttrValue");
        assert_eq!(serialized, by_number);

        // The oneof's members at both ends only, unknown fields between: in pieces, the
        // sources between hold neither member.
        let mut attr = Vec::new();
        len(&mut attr, 1, &list(b"first"));
        for i in 0..MANY_FIELDS as u64 {
            varint(&mut attr, 50, i);
        }
        varint(&mut attr, 3, 7);
        len(&mut attr, 1, &list(b"last"));
        let (serialized, by_number) = both_ways(attr, "tensorflow.AttrValue");
        assert_eq!(serialized, by_number);
    }

    /// A graph's node chunks given as [`Source::Written`] (each chunk a run of nodes of a
    /// canonical model, and the pieces of its serialization) encode exactly as the same chunks
    /// given as built messages: taken as their pieces only where the nodes are trusted, node
    /// by node otherwise (and a chunk with anything but nodes in it, node by node always).
    #[test]
    fn written_chunks_encode_as_their_built_messages() {
        let desc = descriptor("tensorflow.GraphDef").unwrap();
        let node = |i: usize, canonical: bool| {
            let mut node = Vec::new();
            if canonical {
                len(&mut node, 1, format!("n{i}").as_bytes());
                len(&mut node, 2, b"AddV2");
            } else {
                // Out of field order: re-encoded unless trusted.
                len(&mut node, 2, b"AddV2");
                len(&mut node, 1, format!("n{i}").as_bytes());
            }
            node
        };
        for canonical in [true, false] {
            let mut nodes = Vec::new();
            for i in 0..MANY_FIELDS + 10 {
                len(&mut nodes, 1, &node(i, canonical || i % 100 != 3));
            }
            let nodes = Bytes::from(nodes);
            let parsed = WireMessage::parse(&nodes, None).unwrap();
            // Chunks of consecutive nodes, each with the pieces of its bytes: one slice, or
            // the same bytes cut in three.
            let mut chunks = Vec::new();
            let mut at = 0;
            for (c, fields) in parsed.fields.chunks(1000).enumerate() {
                let chunk = WireMessage {
                    fields: fields.to_vec(),
                    descriptor: None,
                };
                let size = chunk.encoded_len() as usize;
                let whole = nodes.slice(at..at + size);
                at += size;
                let pieces = if c % 2 == 0 {
                    vec![whole]
                } else {
                    vec![
                        whole.slice(..1),
                        whole.slice(1..size / 2),
                        whole.slice(size / 2..),
                    ]
                };
                chunks.push((chunk, pieces));
            }
            // The rest of the graph: versions, a node and an unknown field.
            let mut rest = Vec::new();
            let mut versions = Vec::new();
            varint(&mut versions, 1, 27);
            len(&mut rest, 4, &versions);
            len(&mut rest, 1, &node(99_999, true));
            varint(&mut rest, 99, 5);
            let rest = WireMessage::parse(&Bytes::from(rest), None).unwrap();
            // A chunk that holds more than nodes.
            let mut mixed = Vec::new();
            len(&mut mixed, 1, &node(7, true));
            len(&mut mixed, 4, &versions);
            let mixed = WireMessage::parse(&Bytes::from(mixed), None).unwrap();
            let mixed_pieces = vec![Bytes::from(mixed.to_vec().unwrap())];
            // A chunk of nodes one of which is built, its fields out of order: encoded again,
            // so its pieces (the fields as held) are not what the encoding writes.
            let mut built_node = WireMessage::parse(&Bytes::from(node(8, true)), None).unwrap();
            built_node.fields.reverse();
            let holding_built = WireMessage {
                fields: vec![unbound_wire::WireField {
                    number: 1,
                    value: unbound_wire::WireValue::Message(built_node),
                }],
                descriptor: None,
            };
            let built_pieces = vec![Bytes::from(holding_built.to_vec().unwrap())];

            let built: Vec<Source<'_>> = std::iter::once(Source::Ref(&rest))
                .chain(chunks.iter().map(|(chunk, _)| Source::Ref(chunk)))
                .chain([Source::Ref(&mixed), Source::Ref(&holding_built)])
                .collect();
            let written: Vec<Source<'_>> = std::iter::once(Source::Ref(&rest))
                .chain(chunks.iter().map(|(c, p)| Source::Written(c, p)))
                .chain([
                    Source::Written(&mixed, &mixed_pieces),
                    Source::Written(&holding_built, &built_pieces),
                ])
                .collect();
            for trusted in [true, false] {
                let encode = |sources: &[Source<'_>], enc: &mut Encoder| {
                    enc.trust_children(trusted);
                    enc.encode(sources, &desc).unwrap().to_vec().unwrap()
                };
                let (mut as_built, mut as_written) = (Encoder::new(), Encoder::new());
                let expected = encode(&built, &mut as_built);
                let got = encode(&written, &mut as_written);
                assert_eq!(got, expected, "canonical {canonical}, trusted {trusted}");
                assert_eq!(as_written.taken_as_is(), as_built.taken_as_is());
                if !trusted {
                    // Checked node by node: the reference agrees, and a node out of order was
                    // re-encoded, not taken from the pieces.
                    let reference = Encoder::without_fast_path()
                        .encode(&written, &desc)
                        .unwrap()
                        .to_vec()
                        .unwrap();
                    assert_eq!(got, reference);
                    let raw_nodes = got.windows(nodes.len()).any(|w| w == &nodes[..]);
                    assert_eq!(raw_nodes, canonical);
                }
            }
        }
    }
}

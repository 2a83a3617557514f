//! The encoder: protobuf C++'s deterministic serialization of serialized messages, read and
//! written in one streaming walk per pass, with no allocation per field.
//!
//! # How
//! A message's bytes are read into a list of occurrences (field, order read, value as a
//! slice of the input), sorted by field when they are not in order already, and written field
//! by field. The lists live in one scratch area per nesting level, reused for every message
//! at that level, so nothing is allocated per message or per field once the first few
//! messages are done.
//!
//! A nested message is written after its length, which is only known once it is encoded.
//! Messages read from fewer than 64 KiB are encoded into a buffer first (their length is
//! reserved as wide as their input's, and the bytes moved in the rare case it differs). Larger ones (a
//! graph, its library: megabytes to gigabytes) are not buffered: a first pass works out the
//! size of each of them, and the second writes them straight to the [`Sink`] after their
//! sizes. So memory stays within a few buffers of 64 KiB whatever the input's size,
//! and the two passes cost about twice the work of one.
//!
//! A message already in canonical form (its encoding is its bytes) is found so in the first
//! pass and copied as it is in the second: canonical input is a scan and a copy.

mod fast;
mod pipeline;
mod validate;

use unbound_wire::codec::{read_field, read_varint, varint_len, RawField, WireType};
use unbound_wire::DecodeError;

use crate::error::{CanonicalError, Result};
use crate::schema::{Class, Field, KeyOrder, MessageType, Schema, TypeId};
use crate::sink::{Count, Sink};
use pipeline::Pipeline;

/// Deepest message nesting encoded: protobuf C++'s default recursion limit (a model nested
/// deeper does not parse in TensorFlow either). The root is at depth 0.
pub const MAX_DEPTH: usize = 100;

/// Messages read from at least this many bytes are sized by a first pass and streamed; smaller
/// ones are encoded into a buffer.
const BIG: usize = 64 << 10;

/// The encoder's output buffer is handed to the sink when it holds this much.
const FLUSH_AT: usize = 256 << 10;

/// Bytes at least this long are handed to the sink directly rather than through the buffer.
const DIRECT: usize = 16 << 10;

/// Buffered messages read from at least this many bytes have their long runs of message
/// elements encoded on several threads.
const PARALLEL_AT: usize = 4 << 20;

/// Such runs are encoded a batch of this many bytes at a time (while the batch, just read,
/// is in the cache).
const PARALLEL_BATCH: usize = 1 << 20;

/// Index of an unknown field's occurrences (sorts after every known field).
const UNKNOWN: u32 = u32::MAX;

/// A size slot of the first pass whose message is in canonical form already.
const AS_IS: u64 = 1 << 63;

/// A size slot of the first pass whose message's fields had to be collected and sorted.
const OUT_OF_ORDER: u64 = 1 << 62;

/// What a walk of a message found.
struct Walked {
    size: u64,
    /// In canonical form already (found by the size pass only).
    as_is: bool,
    /// Its known fields came in field order ([`Encoder::fields_in_order`]).
    in_order: bool,
}

/// The three ways a message is walked.
const SIZE: u8 = 0;
const STREAM: u8 = 1;
const BUFFER: u8 = 2;

/// One field occurrence as read.
#[derive(Clone, Copy)]
struct Occ<'a> {
    /// Index of the known field it is, or [`UNKNOWN`].
    field: u32,
    number: u32,
    wire: u8,
    /// Order of reading within its message.
    seq: usize,
    /// A varint's value or a fixed value's bits.
    value: u64,
    /// A length-delimited payload, a group's contents, or a scalar's bytes.
    data: &'a [u8],
}

/// A map entry as read.
#[derive(Clone, Copy)]
struct Entry<'a> {
    seq: usize,
    /// A string key.
    key_bytes: &'a [u8],
    /// A numeric key's value as written (normalized).
    key_wire: u64,
    /// A numeric key's sort value.
    key_order: i128,
    /// A scalar value as written (normalized), or a string value.
    value: u64,
    value_bytes: &'a [u8],
    /// A message value: its occurrences (merged), `parts[start..start + count]`.
    parts_start: usize,
    parts_count: usize,
}

/// Scratch space for the messages at one nesting level.
#[derive(Default)]
struct Level<'a> {
    occs: Vec<Occ<'a>>,
    /// The occurrences of the field being read (in-order walk).
    group: Vec<Occ<'a>>,
    oneofs: Vec<Option<(u32, usize)>>,
    /// The runs of one field's output in the buffer, in the order written (fast walk).
    runs: Vec<Run>,
    /// The occurrences of the fields gathered so far (fast walk): taken again with a later
    /// occurrence of the same field.
    held: Vec<Occ<'a>>,
    scratch: Scratch<'a>,
}

/// A run of a field's occurrences written by the fast walk ([`fast`]): the field's index, and
/// where its output lies in the buffer (it ends where the next run starts, filled in once the
/// message is written).
#[derive(Clone, Copy)]
struct Run {
    field: u32,
    start: usize,
    end: usize,
}

/// What the fields of one message need on the way: the parts of a message sent in several,
/// the entries of a map.
#[derive(Default)]
struct Scratch<'a> {
    parts: Vec<&'a [u8]>,
    entries: Vec<Entry<'a>>,
}

/// The deterministic serialization of the message of type `ty` made of `parts` (serialized
/// messages of that type, merged in order as protobuf merges them), written to `sink`.
/// Returns the number of bytes written.
pub fn encode<S: Sink>(schema: &Schema, ty: TypeId, parts: &[&[u8]], sink: &mut S) -> Result<u64> {
    encode_streaming_from(BIG, schema, ty, parts, sink)
}

/// [`encode`], streaming messages read from at least `big` bytes (rather than 64 KiB) and
/// buffering smaller ones: the output is the same for any `big`, which the tests check with
/// small ones so that small messages take the streaming path too.
pub fn encode_streaming_from<S: Sink>(
    big: usize,
    schema: &Schema,
    ty: TypeId,
    parts: &[&[u8]],
    sink: &mut S,
) -> Result<u64> {
    let mut encoder = Encoder::new(schema, sink);
    encoder.big = big.max(1);
    let input: usize = parts.iter().map(|p| p.len()).sum();
    encoder.fast_budget = input;
    if input < encoder.big {
        encoder.message::<BUFFER>(parts, ty, 0, true)?;
        let tmp = std::mem::take(&mut encoder.tmp);
        encoder.sink.write(&tmp);
        return Ok(tmp.len() as u64);
    }
    let walked = encoder.message::<SIZE>(parts, ty, 0, true)?;
    if walked.as_is {
        if let [part] = parts {
            encoder.sink.write(part);
        }
        return Ok(walked.size);
    }
    encoder.message::<STREAM>(parts, ty, 0, walked.in_order)?;
    encoder.flush();
    debug_assert_eq!(
        encoder.cursor,
        encoder.sizes.len(),
        "both passes met the same messages"
    );
    Ok(walked.size)
}

/// The deterministic serialization of the message of type `ty` made of `parts`, in memory:
/// one pass (where [`encode`] makes two over large messages, to stream them), with long runs
/// of message elements (a graph's nodes) encoded on as many threads as the machine has.
/// Memory: the output, and a copy of the runs encoded on other threads while they are
/// appended.
pub fn encode_to_vec(schema: &Schema, ty: TypeId, parts: &[&[u8]]) -> Result<Vec<u8>> {
    encode_to_vec_with(schema, ty, parts, false)
}

/// [`encode_to_vec`], refusing what protobuf C++ refuses when it parses: a `string` that is
/// not UTF-8 ([`CanonicalError::NotUtf8`]) in any occurrence, also one the canonical form
/// leaves out (a value overridden by a later one, a oneof member replaced, a map entry
/// replaced by a later one of its key), and nesting past [`MAX_DEPTH`] counting each map
/// entry as a level (C++ parses an entry as a message of its own), besides the malformed
/// bytes [`encode_to_vec`] refuses. What it returns is then the canonical form of a message
/// protobuf C++ parses, and that form parses too: a caller needs no second check of either
/// (issue 29: checking the canonical form made was a sixth of the CPU of a split of a
/// non-canonical model). The checks cost little next to the encoding: every string is read
/// anyway, and only the occurrences left out are read a second time.
pub fn encode_to_vec_validated(schema: &Schema, ty: TypeId, parts: &[&[u8]]) -> Result<Vec<u8>> {
    encode_to_vec_with(schema, ty, parts, true)
}

/// [`encode_to_vec`], validating when `validate` ([`encode_to_vec_validated`]).
fn encode_to_vec_with(
    schema: &Schema,
    ty: TypeId,
    parts: &[&[u8]],
    validate: bool,
) -> Result<Vec<u8>> {
    let mut sink = Count::default();
    let mut encoder = Encoder::new(schema, &mut sink);
    encoder.validate = validate;
    encoder.threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    encoder.tmp.reserve(parts.iter().map(|p| p.len()).sum());
    encoder.fast_budget = parts.iter().map(|p| p.len()).sum();
    encoder.message::<BUFFER>(parts, ty, 0, true)?;
    Ok(encoder.tmp)
}

/// The deterministic serialization of `elements`, serialized messages each an element of the
/// repeated message field `number` of a message of type `ty` (at nesting depth 0), written as
/// those elements are written in the canonical form of such a message: each as field `number`
/// in canonical form, in order, on as many threads as the machine has. For a reader that
/// takes a message's elements a batch at a time (a graph's nodes a chunk at a time) and so
/// never holds the whole message. A field that is not a repeated message field (a map is
/// not) is refused ([`CanonicalError::NotRepeatedMessage`]).
pub fn encode_elements_to_vec(
    schema: &Schema,
    ty: TypeId,
    number: u32,
    elements: &[&[u8]],
) -> Result<Vec<u8>> {
    let t = schema.get(ty);
    let field = t
        .index(number)
        .map(|i| (i, &t.fields[i as usize]))
        .filter(|(_, f)| f.class == Class::Message && f.list && f.map.is_none());
    let Some((
        index,
        Field {
            child: Some(child), ..
        },
    )) = field
    else {
        return Err(CanonicalError::NotRepeatedMessage {
            type_name: t.name.clone(),
            number,
        });
    };
    let mut sink = Count::default();
    let mut encoder = Encoder::new(schema, &mut sink);
    encoder.threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let input: usize = elements.iter().map(|e| e.len()).sum();
    encoder.tmp.reserve(input);
    encoder.fast_budget = input;
    let run: Vec<Occ<'_>> = elements
        .iter()
        .enumerate()
        .map(|(seq, data)| Occ {
            field: index,
            number,
            wire: 2,
            seq,
            value: 0,
            data,
        })
        .collect();
    if encoder.threads > 1 && run.len() >= 2 * encoder.threads && input >= PARALLEL_BATCH {
        encoder.run_in_parallel(number, &run, *child, 0)?;
    } else {
        for o in &run {
            encoder.buffered(number, o.data.len(), |enc| {
                enc.message::<BUFFER>(&[o.data], *child, 1, true)
                    .map(|_| ())
            })?;
        }
    }
    Ok(encoder.tmp)
}

/// Whether `parts` (one serialized message of type `ty`) is in canonical form already: its
/// deterministic serialization is its bytes. Reads it once, writes nothing.
pub fn is_canonical(schema: &Schema, ty: TypeId, bytes: &[u8]) -> Result<bool> {
    let mut sink = crate::sink::Count::default();
    let mut encoder = Encoder::new(schema, &mut sink);
    Ok(encoder.message::<SIZE>(&[bytes], ty, 0, true)?.as_is)
}

struct Encoder<'s, 'a, 'o, S: Sink> {
    schema: &'s Schema,
    levels: Vec<Level<'a>>,
    /// Sizes of the [`BIG`] messages, in the order the walks meet them (first pass: pushed;
    /// second: read at `cursor`).
    sizes: Vec<u64>,
    cursor: usize,
    /// Messages read from at least this many bytes are streamed ([`BIG`] but in tests).
    big: usize,
    /// Output not yet handed to the sink (streaming).
    out: Vec<u8>,
    /// Buffered encodings of small messages.
    tmp: Vec<u8>,
    /// Whether buffered messages are written as read on the guess that their fields are in
    /// order ([`Encoder::fields`]).
    guess: bool,
    /// Bytes of messages the fast walk ([`fast`]) may give up on before it is no longer
    /// tried: what it wrote of them is thrown away and they are walked again, so this bounds
    /// the wasted work to about one more reading of the input, however the input is nested.
    fast_budget: usize,
    /// Threads a long run of message elements may be encoded on.
    threads: usize,
    /// Buffers the workers of a [`pipeline`] encoded batches into, for the next batches.
    spares: Vec<Vec<u8>>,
    /// Where the fast walk puts a message's runs back in field order ([`fast`]).
    reorder: Vec<u8>,
    /// Whether what protobuf C++ checks when it parses is checked too
    /// ([`encode_to_vec_validated`]).
    validate: bool,
    sink: &'o mut S,
}

impl<'s, 'a, 'o, S: Sink> Encoder<'s, 'a, 'o, S> {
    fn new(schema: &'s Schema, sink: &'o mut S) -> Self {
        Encoder {
            schema,
            levels: Vec::new(),
            sizes: Vec::new(),
            cursor: 0,
            big: BIG,
            out: Vec::new(),
            tmp: Vec::new(),
            guess: true,
            fast_budget: 0,
            threads: 1,
            spares: Vec::new(),
            reorder: Vec::new(),
            validate: false,
            sink,
        }
    }

    fn flush(&mut self) {
        if !self.out.is_empty() {
            self.sink.write(&self.out);
            self.out.clear();
        }
    }

    #[inline]
    fn put_slice<const MODE: u8>(&mut self, bytes: &[u8]) {
        match MODE {
            STREAM => {
                if bytes.len() >= DIRECT {
                    self.flush();
                    self.sink.write(bytes);
                } else {
                    self.out.extend_from_slice(bytes);
                    if self.out.len() >= FLUSH_AT {
                        self.flush();
                    }
                }
            }
            BUFFER => self.tmp.extend_from_slice(bytes),
            _ => {}
        }
    }

    /// Writes `v` as a varint; returns its length.
    #[inline]
    fn put_varint<const MODE: u8>(&mut self, mut v: u64) -> u64 {
        if MODE == SIZE {
            return varint_len(v);
        }
        if MODE == BUFFER {
            // Byte by byte: most are one or two bytes, which a slice copy would send
            // through `memmove`.
            let n = varint_len(v);
            while v >= 0x80 {
                self.tmp.push((v as u8) | 0x80);
                v >>= 7;
            }
            self.tmp.push(v as u8);
            return n;
        }
        let mut buf = [0u8; 10];
        let mut n = 0;
        while v >= 0x80 {
            buf[n] = (v as u8) | 0x80;
            v >>= 7;
            n += 1;
        }
        buf[n] = v as u8;
        self.put_slice::<MODE>(&buf[..=n]);
        n as u64 + 1
    }

    #[inline]
    fn put_key<const MODE: u8>(&mut self, number: u32, wire: u8) -> u64 {
        self.put_varint::<MODE>((u64::from(number) << 3) | u64::from(wire))
    }

    /// Writes a value of `class` (not a message or bytes); returns its length.
    #[inline]
    fn put_value<const MODE: u8>(&mut self, class: Class, v: u64) -> u64 {
        match class {
            Class::Fixed32 => {
                self.put_slice::<MODE>(&(v as u32).to_le_bytes());
                4
            }
            Class::Fixed64 => {
                self.put_slice::<MODE>(&v.to_le_bytes());
                8
            }
            _ => self.put_varint::<MODE>(v),
        }
    }

    /// Writes length-delimited field `number` holding `bytes`; returns its length.
    #[inline]
    fn put_len_field<const MODE: u8>(&mut self, number: u32, bytes: &[u8]) -> u64 {
        let head = self.put_key::<MODE>(number, 2) + self.put_varint::<MODE>(bytes.len() as u64);
        self.put_slice::<MODE>(bytes);
        head + bytes.len() as u64
    }

    /// Walks the message of type `ty` made of `parts` at nesting `depth`: sizes it, streams
    /// it or buffers it (by `MODE`). Returns its size, whether it is in canonical form
    /// already (size pass only) and whether its fields came in order (see
    /// [`Encoder::fields_in_order`]). Streaming, `in_order` is what the size pass found.
    fn message<const MODE: u8>(
        &mut self,
        parts: &[&'a [u8]],
        ty: TypeId,
        depth: usize,
        in_order: bool,
    ) -> Result<Walked> {
        let schema = self.schema;
        let t = schema.get(ty);
        if depth > MAX_DEPTH {
            return Err(CanonicalError::TooDeep {
                type_name: t.name.clone(),
                limit: MAX_DEPTH,
            });
        }
        if self.levels.len() <= depth {
            self.levels.resize_with(depth + 1, Level::default);
        }
        let mut level = std::mem::take(&mut self.levels[depth]);
        let result = self.fields::<MODE>(&mut level, parts, t, depth, in_order);
        self.levels[depth] = level;
        result
    }

    fn fields<const MODE: u8>(
        &mut self,
        level: &mut Level<'a>,
        parts: &[&'a [u8]],
        t: &'s MessageType,
        depth: usize,
        in_order: bool,
    ) -> Result<Walked> {
        // Buffering a small message, its fields are written as read on the guess that they
        // come in order, and undone when they do not: the message is then collected, and
        // below it every message is scanned for order first, so no message is walked more
        // than twice (nested guesses undone at every level would cost a power of the depth).
        // A large one is scanned for order first: undoing it would cost too much.
        if MODE == BUFFER && self.guess && parts.iter().map(|p| p.len()).sum::<usize>() < BIG {
            let at = self.tmp.len();
            if self.fast_budget > 0 {
                // Most small messages: written as read ([`fast`]).
                if self.fast(level, parts, t, depth)? {
                    return Ok(Walked {
                        size: (self.tmp.len() - at) as u64,
                        as_is: false,
                        in_order: true,
                    });
                }
                // Collected instead; the messages below it are tried fast again while the
                // budget lasts.
                self.tmp.truncate(at);
                let read = parts.iter().map(|p| p.len()).sum::<usize>();
                self.fast_budget = self.fast_budget.saturating_sub(read.max(1));
                let size = self.fields_collected::<MODE>(level, parts, t, depth)?;
                return Ok(Walked {
                    size,
                    as_is: false,
                    in_order: false,
                });
            }
            if let Some((size, as_is)) =
                self.fields_in_order::<MODE>(level, parts, t, depth, true)?
            {
                return Ok(Walked {
                    size,
                    as_is,
                    in_order: true,
                });
            }
            self.tmp.truncate(at);
            self.guess = false;
            let size = self.fields_collected::<MODE>(level, parts, t, depth);
            self.guess = true;
            return Ok(Walked {
                size: size?,
                as_is: false,
                in_order: false,
            });
        }
        // Streaming, the size pass has found out already.
        let in_order = if MODE == STREAM {
            in_order
        } else {
            fields_in_order(parts, t)?
        };
        if in_order {
            let (size, as_is) = self
                .fields_in_order::<MODE>(level, parts, t, depth, false)?
                .expect("fields found in order are written in order");
            return Ok(Walked {
                size,
                as_is,
                in_order: true,
            });
        }
        let size = self.fields_collected::<MODE>(level, parts, t, depth)?;
        Ok(Walked {
            size,
            as_is: false,
            in_order: false,
        })
    }

    /// The fields of a message whose known fields come in field order (unknown ones may come
    /// anywhere: they are written last in any case) and whose oneofs are set once, written as
    /// they are read: each element of a repeated message field as it is met (while its bytes
    /// are in the cache; a graph's millions of nodes are never listed), the occurrences of
    /// other fields once the next field starts. With `check`, `None` (some of it written)
    /// when that is not so; without, the caller knows it is ([`fields_in_order`]).
    ///
    /// The elements of a long run of a repeated message field in a large buffered message (a
    /// graph's nodes) are encoded on worker threads a batch at a time while this thread reads
    /// on ([`pipeline`]).
    fn fields_in_order<const MODE: u8>(
        &mut self,
        level: &mut Level<'a>,
        parts: &[&'a [u8]],
        t: &'s MessageType,
        depth: usize,
        check: bool,
    ) -> Result<Option<(u64, bool)>> {
        let parallel = MODE == BUFFER
            && self.threads > 1
            && parts.iter().map(|p| p.len()).sum::<usize>() >= PARALLEL_AT;
        if !parallel {
            return self.fields_in_order_with::<MODE>(level, parts, t, depth, check, None);
        }
        let (schema, workers, validate) = (self.schema, self.threads, self.validate);
        std::thread::scope(|s| {
            let mut pipeline = Pipeline::start(s, schema, workers, validate);
            self.fields_in_order_with::<MODE>(level, parts, t, depth, check, Some(&mut pipeline))
        })
    }

    /// [`Encoder::fields_in_order`], the elements of runs of repeated message fields handed
    /// to `pipeline` a batch at a time when there is one.
    fn fields_in_order_with<const MODE: u8>(
        &mut self,
        level: &mut Level<'a>,
        parts: &[&'a [u8]],
        t: &'s MessageType,
        depth: usize,
        check: bool,
        mut pipeline: Option<&mut Pipeline<'a>>,
    ) -> Result<Option<(u64, bool)>> {
        let Level {
            occs: unknown,
            group,
            oneofs,
            scratch,
            ..
        } = level;
        unknown.clear();
        group.clear();
        if check {
            oneofs.clear();
            oneofs.resize(t.oneofs, None);
        }
        let mut as_is = parts.len() <= 1;
        let mut size = 0;
        let mut current = UNKNOWN;
        let mut reader = Reader::new(parts, t);
        while let Some(o) = reader.next::<MODE>(&mut as_is)? {
            if o.field == UNKNOWN {
                unknown.push(o);
                continue;
            }
            as_is &= unknown.is_empty();
            if o.field != current {
                if check && current != UNKNOWN && o.field < current {
                    return Ok(None);
                }
                if let Some(pipeline) = pipeline.as_deref_mut() {
                    size += pipeline.end_run(self)?;
                }
                if !group.is_empty() {
                    let f = &t.fields[current as usize];
                    size += self.group::<MODE>(f, group, t, depth, scratch, &mut as_is)?;
                    group.clear();
                }
                current = o.field;
                if check {
                    if let Some(i) = t.fields[o.field as usize].oneof {
                        if oneofs[i as usize].is_some() {
                            return Ok(None);
                        }
                        oneofs[i as usize] = Some((o.field, o.seq));
                    }
                }
            }
            let f = &t.fields[o.field as usize];
            if f.class == Class::Message && f.list && f.map.is_none() {
                let child = f.child.expect("a message field has a type");
                size += match pipeline.as_deref_mut() {
                    // Handed to the workers a batch at a time, while this thread reads on.
                    Some(pipeline) => pipeline.add(self, f.number, child, depth, o)?,
                    None => self.child::<MODE>(f.number, &[o.data], child, depth, &mut as_is)?,
                };
            } else {
                group.push(o);
            }
        }
        if let Some(pipeline) = pipeline {
            size += pipeline.end_run(self)?;
        }
        if !group.is_empty() {
            let f = &t.fields[current as usize];
            size += self.group::<MODE>(f, group, t, depth, scratch, &mut as_is)?;
        }
        for o in unknown.iter() {
            size += self.unknown::<MODE>(o, &mut as_is);
        }
        Ok(Some((size, as_is)))
    }

    /// [`Encoder::field`], but a long run of message elements in parallel.
    fn group<const MODE: u8>(
        &mut self,
        f: &Field,
        group: &[Occ<'a>],
        t: &MessageType,
        depth: usize,
        scratch: &mut Scratch<'a>,
        as_is: &mut bool,
    ) -> Result<u64> {
        if MODE == BUFFER
            && f.class == Class::Message
            && f.list
            && f.map.is_none()
            && group.len() >= 2 * self.threads
            && group.iter().map(|o| o.data.len()).sum::<usize>() >= PARALLEL_BATCH
        {
            let child = f.child.expect("a message field has a type");
            return self.run_in_parallel(f.number, group, child, depth);
        }
        self.field::<MODE>(f, group, t, depth, scratch, as_is)
    }

    /// Buffers the elements `run` of repeated message field `number` (type `ty`) below a
    /// message at `depth`: handed to worker threads in batches of about [`PARALLEL_BATCH`]
    /// bytes, their encodings appended in order ([`pipeline`]).
    fn run_in_parallel(
        &mut self,
        number: u32,
        run: &[Occ<'a>],
        ty: TypeId,
        depth: usize,
    ) -> Result<u64> {
        let (schema, workers, validate) = (self.schema, self.threads, self.validate);
        std::thread::scope(|s| {
            let mut pipeline = Pipeline::start(s, schema, workers, validate);
            let mut size = 0;
            for o in run {
                size += pipeline.add(self, number, ty, depth, *o)?;
            }
            Ok(size + pipeline.end_run(self)?)
        })
    }

    /// The fields of any message: every occurrence listed, sorted by field, and written
    /// field by field.
    fn fields_collected<const MODE: u8>(
        &mut self,
        level: &mut Level<'a>,
        parts: &[&'a [u8]],
        t: &'s MessageType,
        depth: usize,
    ) -> Result<u64> {
        let Level {
            occs,
            oneofs,
            scratch,
            ..
        } = level;
        occs.clear();
        oneofs.clear();
        oneofs.resize(t.oneofs, None);
        let mut as_is = false;
        let mut reader = Reader::new(parts, t);
        while let Some(o) = reader.next::<MODE>(&mut as_is)? {
            if o.field != UNKNOWN {
                if let Some(i) = t.fields[o.field as usize].oneof {
                    let state = &mut oneofs[i as usize];
                    if state.is_none_or(|(member, _)| member != o.field) {
                        *state = Some((o.field, o.seq));
                    }
                }
            }
            occs.push(o);
        }
        occs.sort_by_key(|o| o.field);
        let mut size = 0;
        let mut i = 0;
        while i < occs.len() {
            let field = occs[i].field;
            let n = occs[i..].iter().take_while(|o| o.field == field).count();
            let group = &occs[i..i + n];
            i += n;
            if field == UNKNOWN {
                for o in group {
                    size += self.unknown::<MODE>(o, &mut as_is);
                }
                continue;
            }
            let f = &t.fields[field as usize];
            let from = match f.oneof {
                None => 0,
                Some(o) => match oneofs[o as usize] {
                    Some((member, from)) if member == field => from,
                    _ => usize::MAX,
                },
            };
            let skip = group.iter().take_while(|o| o.seq < from).count();
            // Left out (a oneof member replaced by another), but parsed by protobuf C++.
            self.check_left_out(f, &group[..skip], t, depth)?;
            let group = &group[skip..];
            if group.is_empty() {
                continue;
            }
            size += self.group::<MODE>(f, group, t, depth, scratch, &mut as_is)?;
        }
        Ok(size)
    }

    /// Validating, `Ok` unless `string` is set and `data` is not UTF-8 (field `number` of `t`).
    #[inline]
    fn check_utf8(&self, string: bool, t: &MessageType, number: u32, data: &[u8]) -> Result<()> {
        if self.validate {
            validate::utf8(string, t, number, data)
        } else {
            Ok(())
        }
    }

    /// Validating, checks the occurrences `left` of field `f` of a message of type `t` at
    /// `depth` that the canonical form leaves out, as protobuf C++ parses them.
    fn check_left_out(
        &self,
        f: &Field,
        left: &[Occ<'a>],
        t: &MessageType,
        depth: usize,
    ) -> Result<()> {
        if !self.validate {
            return Ok(());
        }
        for o in left.iter().filter(|o| o.wire == 2) {
            validate::occurrence(self.schema, t, f, o.data, depth)?;
        }
        Ok(())
    }

    /// Writes the occurrences `group` (at least one) of known field `f`.
    fn field<const MODE: u8>(
        &mut self,
        f: &Field,
        group: &[Occ<'a>],
        t: &MessageType,
        depth: usize,
        scratch: &mut Scratch<'a>,
        as_is: &mut bool,
    ) -> Result<u64> {
        if f.map.is_some() {
            return self.map::<MODE>(f, group, t, depth, scratch, as_is);
        }
        let last = group[group.len() - 1];
        let mut size = 0;
        match f.class {
            Class::Message => {
                let child = f.child.expect("a message field has a type");
                if f.list {
                    for o in group {
                        size += self.child::<MODE>(f.number, &[o.data], child, depth, as_is)?;
                    }
                } else if let [one] = group {
                    size += self.child::<MODE>(f.number, &[one.data], child, depth, as_is)?;
                } else {
                    *as_is = false;
                    let parts = &mut scratch.parts;
                    parts.clear();
                    parts.extend(group.iter().map(|o| o.data));
                    size += self.child::<MODE>(f.number, parts, child, depth, as_is)?;
                }
            }
            Class::Bytes if f.list => {
                for o in group {
                    self.check_utf8(f.utf8, t, f.number, o.data)?;
                    size += self.put_len_field::<MODE>(f.number, o.data);
                }
            }
            Class::Bytes => {
                if self.validate && f.utf8 {
                    // Every occurrence: the earlier ones are parsed too.
                    for o in group {
                        validate::utf8(true, t, f.number, o.data)?;
                    }
                }
                *as_is &= group.len() == 1;
                if f.presence || !last.data.is_empty() {
                    size += self.put_len_field::<MODE>(f.number, last.data);
                } else {
                    *as_is = false;
                }
            }
            Class::Varint(_) | Class::Fixed32 | Class::Fixed64 if f.list => {
                size += self.repeated_numbers::<MODE>(f, group, t, as_is)?;
            }
            class @ (Class::Varint(_) | Class::Fixed32 | Class::Fixed64) => {
                *as_is &= group.len() == 1;
                let v = normalize(class, last.value);
                *as_is &= v == last.value;
                if f.presence || v != 0 {
                    size += self.put_key::<MODE>(f.number, last.wire);
                    size += self.put_value::<MODE>(class, v);
                } else {
                    *as_is = false;
                }
            }
            Class::Group => unreachable!("a group is never taken as a known field"),
        }
        Ok(size)
    }

    /// Writes message field `number` made of `parts` (type `ty`) below a message at `depth`.
    fn child<const MODE: u8>(
        &mut self,
        number: u32,
        parts: &[&'a [u8]],
        ty: TypeId,
        depth: usize,
        as_is: &mut bool,
    ) -> Result<u64> {
        if MODE == BUFFER {
            let guess = parts.iter().map(|p| p.len()).sum();
            return self.buffered(number, guess, |enc| {
                enc.message::<BUFFER>(parts, ty, depth + 1, true)
                    .map(|_| ())
            });
        }
        let body = self.body::<MODE>(parts, ty, depth, as_is)?;
        let key = self.put_key::<MODE>(number, 2);
        let len = self.put_varint::<MODE>(body.len());
        self.body_out::<MODE>(body, parts, ty, depth)?;
        Ok(key + len + body.len())
    }

    /// The first half of writing a nested message: its size, known before its length is
    /// written. In the size pass the message is walked (and its slot pushed when it is big);
    /// streaming, a big one's size is read from its slot and a small one is buffered.
    fn body<const MODE: u8>(
        &mut self,
        parts: &[&'a [u8]],
        ty: TypeId,
        depth: usize,
        as_is: &mut bool,
    ) -> Result<Body> {
        let big = parts.iter().map(|p| p.len()).sum::<usize>() >= self.big;
        match MODE {
            SIZE => {
                let slot = self.sizes.len();
                if big {
                    self.sizes.push(0);
                }
                let walked = self.message::<SIZE>(parts, ty, depth + 1, true)?;
                *as_is &= walked.as_is;
                if big {
                    if walked.as_is {
                        // Copied as it is: what is below it is not walked again.
                        self.sizes.truncate(slot + 1);
                    }
                    self.sizes[slot] = walked.size
                        | if walked.as_is { AS_IS } else { 0 }
                        | if walked.in_order { 0 } else { OUT_OF_ORDER };
                }
                Ok(Body::Sized(walked.size))
            }
            STREAM if big => {
                let slot = self.sizes[self.cursor];
                self.cursor += 1;
                let size = slot & !(AS_IS | OUT_OF_ORDER);
                Ok(if slot & AS_IS != 0 {
                    Body::AsIs(size)
                } else {
                    Body::Streamed(size, slot & OUT_OF_ORDER == 0)
                })
            }
            STREAM => {
                // A small message below a streamed one: buffered whole, then copied out.
                debug_assert!(self.tmp.is_empty());
                self.message::<BUFFER>(parts, ty, depth + 1, true)?;
                Ok(Body::Buffered(self.tmp.len() as u64))
            }
            _ => unreachable!("a buffered message writes its children in place"),
        }
    }

    /// The second half: the message's bytes, after its length.
    fn body_out<const MODE: u8>(
        &mut self,
        body: Body,
        parts: &[&'a [u8]],
        ty: TypeId,
        depth: usize,
    ) -> Result<()> {
        match body {
            Body::Sized(_) => {}
            Body::AsIs(_) => {
                if let [part] = parts {
                    self.put_slice::<MODE>(part);
                }
            }
            Body::Streamed(_, in_order) => {
                self.message::<STREAM>(parts, ty, depth + 1, in_order)?;
            }
            Body::Buffered(_) => {
                let tmp = std::mem::take(&mut self.tmp);
                self.put_slice::<MODE>(&tmp);
                self.tmp = tmp;
                self.tmp.clear();
            }
        }
        Ok(())
    }

    /// [`Encoder::child`] and map entries in the buffer: the length is reserved as wide as
    /// the length of the input `guess` would be (encodings are mostly about as long as what
    /// they are read from), and the body moved when the length turns out wider or narrower.
    fn buffered(
        &mut self,
        number: u32,
        guess: usize,
        write: impl FnOnce(&mut Self) -> Result<()>,
    ) -> Result<u64> {
        let key = self.put_key::<BUFFER>(number, 2);
        let at = self.tmp.len();
        let reserved = varint_len(guess as u64) as usize;
        self.tmp.resize(at + reserved, 0);
        write(self)?;
        let end = self.tmp.len();
        let len = (end - at - reserved) as u64;
        let width = varint_len(len) as usize;
        if width != reserved {
            if width > reserved {
                self.tmp.resize(end + width - reserved, 0);
            }
            self.tmp.copy_within(at + reserved..end, at + width);
            self.tmp.truncate(at + width + len as usize);
        }
        let mut v = len;
        for byte in &mut self.tmp[at..at + width] {
            *byte = (v as u8 & 0x7f) | if v >= 0x80 { 0x80 } else { 0 };
            v >>= 7;
        }
        Ok(key + width as u64 + len)
    }

    /// Writes the occurrences of a repeated numeric field: packed when the schema says so,
    /// one key per value otherwise, however they were read.
    fn repeated_numbers<const MODE: u8>(
        &mut self,
        f: &Field,
        group: &[Occ<'a>],
        t: &MessageType,
        as_is: &mut bool,
    ) -> Result<u64> {
        let class = f.class;
        let width = match class {
            Class::Fixed32 => 4,
            Class::Fixed64 => 8,
            _ => 0,
        };
        let malformed = |fault: &str| CanonicalError::Malformed {
            type_name: t.name.clone(),
            error: DecodeError::new(0, format!("packed field {}: {fault}", f.number)),
        };
        if !f.packed {
            let mut size = 0;
            for o in group {
                if o.wire != 2 {
                    let v = normalize(class, o.value);
                    *as_is &= v == o.value;
                    size +=
                        self.put_key::<MODE>(f.number, o.wire) + self.put_value::<MODE>(class, v);
                    continue;
                }
                *as_is = false;
                let wire = scalar_wire(class);
                if width > 0 {
                    if o.data.len() % width != 0 {
                        return Err(malformed("run is not a whole number of values"));
                    }
                    for c in o.data.chunks_exact(width) {
                        let v = fixed(c);
                        size +=
                            self.put_key::<MODE>(f.number, wire) + self.put_value::<MODE>(class, v);
                    }
                } else {
                    let mut pos = 0;
                    while pos < o.data.len() {
                        let raw = read_varint(o.data, &mut pos).map_err(|e| malformed(&e.fault))?;
                        let v = normalize(class, raw);
                        size +=
                            self.put_key::<MODE>(f.number, wire) + self.put_value::<MODE>(class, v);
                    }
                }
            }
            return Ok(size);
        }
        // Packed: the run's length first.
        *as_is &= group.len() == 1 && group[0].wire == 2;
        let mut body = 0u64;
        for o in group {
            if o.wire != 2 {
                body += if width > 0 {
                    width as u64
                } else {
                    varint_len(normalize(class, o.value))
                };
            } else if width > 0 {
                if o.data.len() % width != 0 {
                    return Err(malformed("run is not a whole number of values"));
                }
                body += o.data.len() as u64;
            } else {
                let mut pos = 0;
                while pos < o.data.len() {
                    let at = pos;
                    let raw = read_varint(o.data, &mut pos).map_err(|e| malformed(&e.fault))?;
                    let v = normalize(class, raw);
                    *as_is &= v == raw && (pos - at) as u64 == varint_len(raw);
                    body += varint_len(v);
                }
            }
        }
        if body == 0 {
            *as_is = false;
            return Ok(0);
        }
        let size = self.put_key::<MODE>(f.number, 2) + self.put_varint::<MODE>(body) + body;
        if MODE == SIZE {
            return Ok(size);
        }
        for o in group {
            if o.wire != 2 {
                self.put_value::<MODE>(class, normalize(class, o.value));
            } else if width > 0 {
                self.put_slice::<MODE>(o.data);
            } else {
                let mut pos = 0;
                while pos < o.data.len() {
                    let raw = read_varint(o.data, &mut pos).map_err(|e| malformed(&e.fault))?;
                    self.put_varint::<MODE>(normalize(class, raw));
                }
            }
        }
        Ok(size)
    }

    /// An unknown field, as C++'s `UnknownFieldSet` writes it.
    fn unknown<const MODE: u8>(&mut self, o: &Occ<'a>, as_is: &mut bool) -> u64 {
        match o.wire {
            0 => self.put_key::<MODE>(o.number, 0) + self.put_varint::<MODE>(o.value),
            1 | 5 => {
                let key = self.put_key::<MODE>(o.number, o.wire);
                self.put_slice::<MODE>(o.data);
                key + o.data.len() as u64
            }
            2 => self.put_len_field::<MODE>(o.number, o.data),
            _ => {
                *as_is = false;
                let start = self.put_key::<MODE>(o.number, 3);
                self.put_slice::<MODE>(o.data);
                start + o.data.len() as u64 + self.put_key::<MODE>(o.number, 4)
            }
        }
    }

    /// Writes map field `f`'s entries: the last of each key, sorted by key, each with both
    /// its key and its value (defaults included), unknown fields in entries dropped.
    fn map<const MODE: u8>(
        &mut self,
        f: &Field,
        group: &[Occ<'a>],
        t: &MessageType,
        depth: usize,
        scratch: &mut Scratch<'a>,
        as_is: &mut bool,
    ) -> Result<u64> {
        let map = f.map.as_ref().expect("a map field");
        if self.validate && depth + 1 > MAX_DEPTH {
            // Each entry is a message of its own to protobuf C++.
            return Err(validate::too_deep(t));
        }
        let Scratch {
            parts: part_list,
            entries,
        } = scratch;
        entries.clear();
        part_list.clear();
        let mut in_order = true;
        for o in group {
            let entry = read_entry(o, map, t, part_list, as_is, self.validate)?;
            if let Some(prev) = entries.last() {
                in_order &= key_cmp(map.key_order, prev, &entry).is_lt();
            }
            entries.push(entry);
        }
        if !in_order {
            *as_is = false;
            entries.sort_by(|a, b| key_cmp(map.key_order, a, b).then(a.seq.cmp(&b.seq)));
            // The last entry of a key wins.
            let mut kept = 0;
            for i in 0..entries.len() {
                let last_of_key = i + 1 == entries.len()
                    || key_cmp(map.key_order, &entries[i], &entries[i + 1]).is_ne();
                if last_of_key {
                    entries[kept] = entries[i];
                    kept += 1;
                } else if self.validate && map.value == Class::Message {
                    // Replaced, but its value was parsed by protobuf C++ (its key and a
                    // string value were checked as read).
                    let e = &entries[i];
                    let child = f.child.expect("a message-valued map has a value type");
                    for part in &part_list[e.parts_start..e.parts_start + e.parts_count] {
                        validate::message(self.schema, child, part, depth + 2)?;
                    }
                }
            }
            entries.truncate(kept);
        }
        let mut size = 0;
        for e in entries.iter() {
            let value_parts = &part_list[e.parts_start..e.parts_start + e.parts_count];
            size += self.entry::<MODE>(f, map, e, value_parts, depth, as_is)?;
        }
        Ok(size)
    }

    /// Writes one map entry of field `f`.
    fn entry<const MODE: u8>(
        &mut self,
        f: &Field,
        map: &crate::schema::MapField,
        e: &Entry<'a>,
        value_parts: &[&'a [u8]],
        depth: usize,
        as_is: &mut bool,
    ) -> Result<u64> {
        // Validating, the entry is a level of nesting of its own (as protobuf C++ parses it),
        // and its value message one below it.
        let depth = depth + usize::from(self.validate);
        let key_len = match map.key {
            Class::Bytes => 1 + varint_len(e.key_bytes.len() as u64) + e.key_bytes.len() as u64,
            Class::Fixed32 => 5,
            Class::Fixed64 => 9,
            _ => 1 + varint_len(e.key_wire),
        };
        if MODE == BUFFER {
            return self.buffered(f.number, e_len(e, value_parts), |enc| {
                enc.put_key_field::<BUFFER>(map, e);
                enc.put_value_field::<BUFFER>(f, map, e, value_parts, depth, as_is)
                    .map(|_| ())
            });
        }
        match map.value {
            Class::Message => {
                let ty = f.child.expect("a message-valued map has a value type");
                let body = self.body::<MODE>(value_parts, ty, depth, as_is)?;
                let value_len = 1 + varint_len(body.len()) + body.len();
                let entry_len = key_len + value_len;
                let head = self.put_key::<MODE>(f.number, 2) + self.put_varint::<MODE>(entry_len);
                self.put_key_field::<MODE>(map, e);
                self.put_key::<MODE>(2, 2);
                self.put_varint::<MODE>(body.len());
                self.body_out::<MODE>(body, value_parts, ty, depth)?;
                Ok(head + entry_len)
            }
            Class::Bytes => {
                let value_len =
                    1 + varint_len(e.value_bytes.len() as u64) + e.value_bytes.len() as u64;
                let entry_len = key_len + value_len;
                let head = self.put_key::<MODE>(f.number, 2) + self.put_varint::<MODE>(entry_len);
                self.put_key_field::<MODE>(map, e);
                self.put_len_field::<MODE>(2, e.value_bytes);
                Ok(head + entry_len)
            }
            class => {
                let value_len = 1 + match class {
                    Class::Fixed32 => 4,
                    Class::Fixed64 => 8,
                    _ => varint_len(e.value),
                };
                let entry_len = key_len + value_len;
                let head = self.put_key::<MODE>(f.number, 2) + self.put_varint::<MODE>(entry_len);
                self.put_key_field::<MODE>(map, e);
                self.put_key::<MODE>(2, scalar_wire(class));
                self.put_value::<MODE>(class, e.value);
                Ok(head + entry_len)
            }
        }
    }

    fn put_key_field<const MODE: u8>(&mut self, map: &crate::schema::MapField, e: &Entry<'a>) {
        match map.key {
            Class::Bytes => {
                self.put_len_field::<MODE>(1, e.key_bytes);
            }
            class => {
                self.put_key::<MODE>(1, scalar_wire(class));
                self.put_value::<MODE>(class, e.key_wire);
            }
        }
    }

    /// A map entry's value field, buffered (see [`Encoder::entry`]; `depth` counts the entry
    /// when validating).
    fn put_value_field<const MODE: u8>(
        &mut self,
        f: &Field,
        map: &crate::schema::MapField,
        e: &Entry<'a>,
        value_parts: &[&'a [u8]],
        depth: usize,
        as_is: &mut bool,
    ) -> Result<u64> {
        Ok(match map.value {
            Class::Message => {
                let ty = f.child.expect("a message-valued map has a value type");
                self.child::<MODE>(2, value_parts, ty, depth, as_is)?
            }
            Class::Bytes => self.put_len_field::<MODE>(2, e.value_bytes),
            class => {
                self.put_key::<MODE>(2, scalar_wire(class)) + self.put_value::<MODE>(class, e.value)
            }
        })
    }
}

/// How a nested message's bytes get written, decided by [`Encoder::body`].
#[derive(Clone, Copy)]
enum Body {
    /// Size pass: nothing is written.
    Sized(u64),
    /// Canonical already: its bytes as they are.
    AsIs(u64),
    /// Walked again, streaming (in order, or collected: as the size pass found it).
    Streamed(u64, bool),
    /// In the encoder's buffer.
    Buffered(u64),
}

impl Body {
    fn len(self) -> u64 {
        match self {
            Body::Sized(n) | Body::AsIs(n) | Body::Streamed(n, _) | Body::Buffered(n) => n,
        }
    }
}

/// Whether the known fields of the message made of `parts` come in field order (unknown
/// fields anywhere) and each oneof is set by one member only: then it can be written as it
/// is read. A scan of its keys only, nothing below it.
fn fields_in_order(parts: &[&[u8]], t: &MessageType) -> Result<bool> {
    let mut current = None;
    let mut oneofs_set = 0u64;
    for part in parts {
        let mut pos = 0;
        while pos < part.len() {
            let raw = read_field(part, &mut pos).map_err(|error| CanonicalError::Malformed {
                type_name: t.name.clone(),
                error,
            })?;
            let Some(i) = t.index(raw.number) else {
                continue;
            };
            let f = &t.fields[i as usize];
            if !f.class.takes(raw.wire_type.bits() as u8, f.list) || current == Some(i) {
                continue;
            }
            if current.is_some_and(|c| i < c) {
                return Ok(false);
            }
            current = Some(i);
            if let Some(o) = f.oneof {
                // A second member of a oneof (beyond 64 oneofs: collect).
                let bit = 1u64.checked_shl(u32::from(o)).unwrap_or(0);
                if bit == 0 || oneofs_set & bit != 0 {
                    return Ok(false);
                }
                oneofs_set |= bit;
            }
        }
    }
    Ok(true)
}

/// Reads the field occurrences of a message made of parts, in order.
struct Reader<'a, 'p, 't> {
    parts: &'p [&'a [u8]],
    t: &'t MessageType,
    part: usize,
    pos: usize,
    seq: usize,
}

impl<'a, 'p, 't> Reader<'a, 'p, 't> {
    fn new(parts: &'p [&'a [u8]], t: &'t MessageType) -> Self {
        Reader {
            parts,
            t,
            part: 0,
            pos: 0,
            seq: 0,
        }
    }

    /// The next occurrence (unknown fields and known numbers of another wire type as
    /// [`UNKNOWN`]); clears `as_is` when its key, length or varint is not in its shortest
    /// form.
    #[inline]
    fn next<const MODE: u8>(&mut self, as_is: &mut bool) -> Result<Option<Occ<'a>>> {
        let part = loop {
            let part = match self.parts.get(self.part) {
                Some(part) => *part,
                None => return Ok(None),
            };
            if self.pos < part.len() {
                break part;
            }
            self.part += 1;
            self.pos = 0;
        };
        let t = self.t;
        let at = self.pos;
        let raw = read_field(part, &mut self.pos).map_err(|error| CanonicalError::Malformed {
            type_name: t.name.clone(),
            error,
        })?;
        self.seq += 1;
        let wire = raw.wire_type.bits() as u8;
        let data = &part[raw.start..raw.end];
        // Only the size pass finds messages in canonical form.
        if MODE == SIZE {
            let key_len = if raw.number < 16 {
                1
            } else {
                varint_len((u64::from(raw.number) << 3) | u64::from(wire)) as usize
            };
            let shortest = match raw.wire_type {
                WireType::Varint => {
                    raw.start == at + key_len && data.len() as u64 == varint_len(raw.varint)
                }
                WireType::Fixed64 | WireType::Fixed32 => raw.start == at + key_len,
                WireType::Len => raw.start == at + key_len + varint_len(data.len() as u64) as usize,
                WireType::StartGroup | WireType::EndGroup => false,
            };
            *as_is &= shortest;
        }
        let value = match raw.wire_type {
            WireType::Varint => raw.varint,
            WireType::Fixed64 | WireType::Fixed32 => fixed(data),
            _ => 0,
        };
        let field = match t.index(raw.number) {
            Some(i)
                if t.fields[i as usize]
                    .class
                    .takes(wire, t.fields[i as usize].list) =>
            {
                i
            }
            _ => UNKNOWN,
        };
        Ok(Some(Occ {
            field,
            number: raw.number,
            wire,
            seq: self.seq,
            value,
            data,
        }))
    }
}

/// Reads one map entry: its key (the last one that fits; the default when none), its value
/// (a message's occurrences merged; a scalar's last). Clears `as_is` unless the entry is
/// exactly a canonical key then a canonical value. With `validate`, a string key or value
/// that is not UTF-8 is refused, in any occurrence.
fn read_entry<'a>(
    o: &Occ<'a>,
    map: &crate::schema::MapField,
    t: &MessageType,
    part_list: &mut Vec<&'a [u8]>,
    as_is: &mut bool,
    validate: bool,
) -> Result<Entry<'a>> {
    let mut e = Entry {
        seq: o.seq,
        key_bytes: &[],
        key_wire: 0,
        key_order: 0,
        value: 0,
        value_bytes: &[],
        parts_start: part_list.len(),
        parts_count: 0,
    };
    let mut pos = 0;
    let mut count = 0;
    let mut canonical = true;
    let data = o.data;
    while pos < data.len() {
        let at = pos;
        let raw = read_field(data, &mut pos).map_err(|error| CanonicalError::Malformed {
            type_name: format!("{} map entry", t.name),
            error,
        })?;
        count += 1;
        let wire = raw.wire_type.bits() as u8;
        let value_bytes = &data[raw.start..raw.end];
        let head = raw.start - at;
        match raw.number {
            1 if map.key.takes(wire, false) => {
                canonical &= count == 1;
                match map.key {
                    Class::Bytes => {
                        if validate {
                            validate::utf8(map.key_utf8, t, o.number, value_bytes)?;
                        }
                        e.key_bytes = value_bytes;
                        canonical &= head == 1 + varint_len(value_bytes.len() as u64) as usize;
                    }
                    class => {
                        let (value, shortest) = entry_scalar(class, &raw, value_bytes, head);
                        e.key_wire = value;
                        canonical &= shortest;
                    }
                }
            }
            2 if map.value.takes(wire, false) => {
                canonical &= count == 2;
                match map.value {
                    Class::Message => {
                        canonical &= e.parts_count == 0
                            && head == 1 + varint_len(value_bytes.len() as u64) as usize;
                        part_list.push(value_bytes);
                        e.parts_count += 1;
                    }
                    Class::Bytes => {
                        if validate {
                            validate::utf8(map.value_utf8, t, o.number, value_bytes)?;
                        }
                        e.value_bytes = value_bytes;
                        canonical &= head == 1 + varint_len(value_bytes.len() as u64) as usize;
                    }
                    class => {
                        let (value, shortest) = entry_scalar(class, &raw, value_bytes, head);
                        e.value = value;
                        canonical &= shortest;
                    }
                }
            }
            _ => canonical = false,
        }
    }
    canonical &= count == 2;
    *as_is &= canonical;
    e.key_order = match map.key_order {
        KeyOrder::Bytes => 0,
        KeyOrder::Bool | KeyOrder::Unsigned => i128::from(e.key_wire),
        KeyOrder::Signed32 => i128::from(e.key_wire as u32 as i32),
        KeyOrder::Zigzag32 => {
            let v = e.key_wire as u32;
            i128::from(((v >> 1) as i32) ^ -((v & 1) as i32))
        }
        KeyOrder::Signed64 => i128::from(e.key_wire as i64),
        KeyOrder::Zigzag64 => {
            let v = e.key_wire;
            i128::from(((v >> 1) as i64) ^ -((v & 1) as i64))
        }
    };
    Ok(e)
}

/// The bytes an entry was read from, about: its key and value (for [`Encoder::buffered`]).
fn e_len(e: &Entry<'_>, value_parts: &[&[u8]]) -> usize {
    4 + e.key_bytes.len() + e.value_bytes.len() + value_parts.iter().map(|p| p.len()).sum::<usize>()
}

/// A map entry's scalar key or value of `class` (read as `raw`, its bytes `bytes`, `head`
/// bytes of key before them): the value C++ holds, and whether it was written as C++ writes
/// it (one-byte key, shortest varint, already normalized).
fn entry_scalar(class: Class, raw: &RawField, bytes: &[u8], head: usize) -> (u64, bool) {
    let read = if raw.wire_type == WireType::Varint {
        raw.varint
    } else {
        fixed(bytes)
    };
    let value = normalize(class, read);
    let shortest = raw.wire_type != WireType::Varint || bytes.len() as u64 == varint_len(read);
    (value, head == 1 && value == read && shortest)
}

fn key_cmp(order: KeyOrder, a: &Entry<'_>, b: &Entry<'_>) -> std::cmp::Ordering {
    match order {
        KeyOrder::Bytes => a.key_bytes.cmp(b.key_bytes),
        _ => a.key_order.cmp(&b.key_order),
    }
}

/// The value C++ holds after reading `v` for a field of `class`.
#[inline]
fn normalize(class: Class, v: u64) -> u64 {
    match class {
        Class::Varint(kind) => kind.normalize(v),
        _ => v,
    }
}

/// The wire type of a single value of `class`.
fn scalar_wire(class: Class) -> u8 {
    match class {
        Class::Fixed32 => 5,
        Class::Fixed64 => 1,
        _ => 0,
    }
}

/// The little-endian value of a fixed-width field's bytes.
#[inline]
fn fixed(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    buf[..bytes.len().min(8)].copy_from_slice(&bytes[..bytes.len().min(8)]);
    u64::from_le_bytes(buf)
}

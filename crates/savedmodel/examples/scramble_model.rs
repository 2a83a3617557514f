//! Rewrites a SavedModel's `saved_model.pb` in non-canonical wire form (issue 29): the bytes
//! differ from what a canonical writer emits, but protobuf parses them to the same message,
//! apart from the unknown fields some classes add on purpose.
//!
//! ```text
//! cargo run --release -p unbound-savedmodel --example scramble_model -- IN_DIR OUT_DIR \
//!     [--classes all|CLASS,CLASS...] [--seed N] [--no-entry-unknowns] [--split-at BYTES]
//! ```
//!
//! `OUT_DIR` (created; it must not exist or be empty) becomes a copy of `IN_DIR` (variables,
//! assets, everything) with a scrambled `saved_model.pb` and without `fingerprint.pb` (the old
//! one describes the old bytes). With `--split-at`, the scrambled model is instead written
//! split at that size as it is read (`write::write_model_dir`): a `saved_model.cpb` whose
//! chunks keep the scrambled encoding, as another writer's `.cpb` may (`unbound split` splits
//! a model mostly not canonical from its canonical form), with its fingerprint. One JSON line of statistics goes to stdout: how many times
//! each class was applied, and `unknown_kept`, the number of unknown fields a parser keeps
//! (those added outside map entries: protobuf drops unknown fields inside map entries).
//!
//! The message is walked by schema (`tensorflow.SavedModel`'s descriptor) at every depth.
//! Each message gets its own pseudo-random generator, seeded from `--seed` and the message's
//! offset in the input, so the output is a function of the input and the seed alone. The
//! classes (`all` is every one of them):
//!
//! - `reorder`: fields out of field-number order, as whole blocks in another order (a
//!   `FunctionDef`'s `node_def` after its `ret`, a `GraphDef`'s `versions` before its nodes) or
//!   interleaved; map entries shuffled. Occurrences of one field, or of the members of one
//!   oneof, keep their relative order (protobuf's "last one wins" and merge order).
//! - `defaults`: map entries without their key or value when it is the default (as
//!   TensorFlow's Python writes them), entries with the value before the key, and implicit-
//!   presence scalars written explicitly with their default value.
//! - `unknown`: unknown fields (varint, fixed32, fixed64, length-delimited) in messages at
//!   every depth, map entries included, with field numbers the schema does not use (the
//!   lowest free one, 1000+, 100000+ and the largest field number).
//!
//!   Inside a map entry, protobuf C++ (TensorFlow's parser, and its fingerprint) drops unknown
//!   fields and keeps the entry, but upb (Python's protobuf) moves the whole entry into the
//!   parent's unknown fields. `--no-entry-unknowns` leaves out the unknown fields (of every
//!   class) that would go inside map entries, and changes nothing else: the same seed gives the
//!   same bytes otherwise, so protobuf C++ parses both variants to the same message (equal
//!   `saved_model_checksum`s in TensorFlow's fingerprint), and Python can check the second.
//! - `split`: a singular message field sent in two parts (protobuf merges them), packed
//!   repeated scalars sent as several packed runs or unpacked, and a singular scalar sent
//!   twice with another value first (the last one wins).
//! - `empty`: empty length-delimited unknown fields, empty packed runs of repeated scalars
//!   (present or not), empty extra occurrences of singular message fields that are present.
//! - `wrongtype`: a known field number with a wire type its field does not accept (protobuf
//!   keeps it as an unknown field), e.g. `0a 00` in a `SavedModel` (field 1 is an int64).
//! - `varint`: non-minimal varints (padded with `0x80` continuation bytes) for lengths (up to
//!   5 bytes, protobuf C++'s limit for sizes) and varint values (up to 10 bytes).
//!
//! The output is built in memory (about the input's size plus what the classes add) and
//! written once: a length prefix is reserved before its message is written and moved into
//! place after, so nothing is serialized twice. A 3M-node model takes seconds.

use std::error::Error;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use prost_reflect::{Kind, MessageDescriptor};
use unbound_test_support::data::XorShift;
use unbound_wire::codec::{read_field, read_varint, varint_len, WireType};

type AnyResult<T> = Result<T, Box<dyn Error>>;

/// Deepest nesting walked (protobuf's own recursion limit).
const MAX_DEPTH: usize = 100;
/// Largest field number protobuf allows.
const MAX_FIELD_NUMBER: u32 = (1 << 29) - 1;

fn main() {
    if let Err(e) = run() {
        eprintln!("scramble_model: error: {e}");
        std::process::exit(1);
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: scramble_model IN_DIR OUT_DIR [--classes all|reorder,defaults,unknown,split,empty,wrongtype,varint] [--seed N] [--no-entry-unknowns] [--split-at BYTES]"
    );
    std::process::exit(2);
}

fn run() -> AnyResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut dirs = Vec::new();
    let mut classes = Classes::ALL;
    let mut seed = 1u64;
    let mut entry_unknowns = true;
    let mut split_at = None;
    let mut i = 0;
    while i < args.len() {
        let value = |i: usize| args.get(i + 1).cloned().unwrap_or_else(|| usage());
        match args[i].as_str() {
            "--classes" => classes = Classes::parse(&value(i))?,
            "--seed" => seed = value(i).parse()?,
            "--split-at" => split_at = Some(value(i).parse::<u64>()?),
            "--no-entry-unknowns" => {
                entry_unknowns = false;
                i += 1;
                continue;
            }
            s if !s.starts_with('-') => {
                dirs.push(PathBuf::from(s));
                i += 1;
                continue;
            }
            _ => usage(),
        }
        i += 2;
    }
    let [input, output] = <[PathBuf; 2]>::try_from(dirs).unwrap_or_else(|_| usage());
    let pb = input.join("saved_model.pb");
    let t0 = Instant::now();
    let bytes = fs::read(&pb).map_err(|e| format!("{}: {e}", pb.display()))?;
    let root = unbound_proto::descriptor_pool()
        .get_message_by_name("tensorflow.SavedModel")
        .ok_or("tensorflow.SavedModel is not in the descriptor pool")?;
    let schema = Schema::new(&root);
    let mut scrambler = Scrambler::new(&bytes, &schema, classes, seed);
    scrambler.entry_unknowns = entry_unknowns;
    scrambler.message(0, 0, bytes.len(), 0, Range::Whole, true)?;
    let t_scramble = t0.elapsed();

    if output.exists() && fs::read_dir(&output)?.next().is_some() {
        return Err(format!("{} exists and is not empty", output.display()).into());
    }
    if let Some(max_size) = split_at {
        // Split as read: the chunks keep the scrambled encoding (the `.cpb` another writer
        // would leave), where `unbound split` would split the model's canonical form.
        let model = unbound_wire::WireMessage::parse(
            &bytes::Bytes::from(scrambler.out.clone()),
            Some(root.clone()),
        )?;
        if output.exists() {
            fs::remove_dir(&output)?;
        }
        let options = unbound_savedmodel::write::WriteOptions::default().with_max_size(max_size);
        unbound_savedmodel::write::write_model_dir(&input, &output, model, &options)?;
    } else {
        copy_dir(&input, &output, true)?;
        fs::write(output.join("saved_model.pb"), &scrambler.out)?;
    }
    eprintln!(
        "scramble_model: {} -> {} bytes in {:.2}s (scrambled in {:.2}s)",
        bytes.len(),
        scrambler.out.len(),
        t0.elapsed().as_secs_f64(),
        t_scramble.as_secs_f64()
    );
    println!("{}", scrambler.stats.json(bytes.len(), scrambler.out.len()));
    Ok(())
}

/// Copies `from` into `to` recursively, without the model file and the fingerprint at the top.
fn copy_dir(from: &Path, to: &Path, top: bool) -> AnyResult<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if top && (name == "saved_model.pb" || name == "fingerprint.pb") {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type()?.is_dir() {
            copy_dir(&src, &dst, false)?;
        } else {
            fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// Which kinds of non-canonical encoding to apply.
#[derive(Clone, Copy, Debug)]
struct Classes {
    reorder: bool,
    defaults: bool,
    unknown: bool,
    split: bool,
    empty: bool,
    wrongtype: bool,
    varint: bool,
}

impl Classes {
    const ALL: Classes = Classes {
        reorder: true,
        defaults: true,
        unknown: true,
        split: true,
        empty: true,
        wrongtype: true,
        varint: true,
    };

    /// Parses `all` or a comma-separated list of class names.
    fn parse(list: &str) -> AnyResult<Classes> {
        if list == "all" {
            return Ok(Classes::ALL);
        }
        let mut c = Classes {
            reorder: false,
            defaults: false,
            unknown: false,
            split: false,
            empty: false,
            wrongtype: false,
            varint: false,
        };
        for name in list.split(',') {
            match name {
                "reorder" => c.reorder = true,
                "defaults" => c.defaults = true,
                "unknown" => c.unknown = true,
                "split" => c.split = true,
                "empty" => c.empty = true,
                "wrongtype" => c.wrongtype = true,
                "varint" => c.varint = true,
                _ => return Err(format!("unknown class {name:?}").into()),
            }
        }
        Ok(c)
    }
}

/// How a field's value travels on the wire, as far as scrambling is concerned.
#[derive(Clone, Copy, Debug, PartialEq)]
enum ValueKind {
    Varint,
    Fixed32,
    Fixed64,
    /// `string` (must stay UTF-8) or `bytes`.
    Str,
    /// A message, by index into [`Schema::messages`].
    Message(usize),
}

impl ValueKind {
    /// The wire type of one value of this kind.
    fn wire(self) -> WireType {
        match self {
            ValueKind::Varint => WireType::Varint,
            ValueKind::Fixed32 => WireType::Fixed32,
            ValueKind::Fixed64 => WireType::Fixed64,
            ValueKind::Str | ValueKind::Message(_) => WireType::Len,
        }
    }

    /// Whether repeated fields of this kind may be packed.
    fn packable(self) -> bool {
        matches!(
            self,
            ValueKind::Varint | ValueKind::Fixed32 | ValueKind::Fixed64
        )
    }
}

/// What the scrambler needs of one field of the schema.
#[derive(Clone, Debug)]
struct FieldInfo {
    number: u32,
    kind: ValueKind,
    repeated: bool,
    map: bool,
    /// The (non-synthetic) oneof the field belongs to, named by its lowest field number.
    oneof: Option<u32>,
    /// Whether an explicit default value is the same as no value (proto3 implicit presence).
    implicit: bool,
}

impl FieldInfo {
    /// Whether wire type `wire` is one the field's parser accepts.
    fn accepts(&self, wire: WireType) -> bool {
        wire == self.kind.wire() || (self.repeated && self.kind.packable() && wire == WireType::Len)
    }
}

/// One message type.
#[derive(Clone, Debug, Default)]
struct MsgInfo {
    /// Fields by increasing number.
    fields: Vec<FieldInfo>,
    map_entry: bool,
    /// The lowest field number the message does not use.
    free_low: u32,
}

impl MsgInfo {
    fn field(&self, number: u32) -> Option<usize> {
        self.fields.binary_search_by_key(&number, |f| f.number).ok()
    }
}

/// Every message type reachable from the root, indexed.
struct Schema {
    messages: Vec<MsgInfo>,
}

impl Schema {
    /// Indexes `root` (index 0) and every message type reachable from it.
    fn new(root: &MessageDescriptor) -> Schema {
        let mut names = std::collections::HashMap::new();
        let mut descs = vec![root.clone()];
        names.insert(root.full_name().to_string(), 0);
        let mut messages = Vec::new();
        let mut next = 0;
        while next < descs.len() {
            let desc = descs[next].clone();
            next += 1;
            let mut fields: Vec<FieldInfo> = desc
                .fields()
                .map(|fd| {
                    let kind = match fd.kind() {
                        Kind::Double | Kind::Fixed64 | Kind::Sfixed64 => ValueKind::Fixed64,
                        Kind::Float | Kind::Fixed32 | Kind::Sfixed32 => ValueKind::Fixed32,
                        Kind::String | Kind::Bytes => ValueKind::Str,
                        Kind::Message(m) => {
                            let index =
                                *names.entry(m.full_name().to_string()).or_insert_with(|| {
                                    descs.push(m.clone());
                                    descs.len() - 1
                                });
                            ValueKind::Message(index)
                        }
                        _ => ValueKind::Varint,
                    };
                    let oneof = fd
                        .containing_oneof()
                        .filter(|o| !o.is_synthetic())
                        .and_then(|o| o.fields().map(|f| f.number()).min());
                    FieldInfo {
                        number: fd.number(),
                        kind,
                        repeated: fd.is_list() || fd.is_map(),
                        map: fd.is_map(),
                        oneof,
                        implicit: !fd.supports_presence()
                            && !fd.is_list()
                            && !fd.is_map()
                            && !matches!(kind, ValueKind::Message(_)),
                    }
                })
                .collect();
            fields.sort_by_key(|f| f.number);
            let mut free_low = 1;
            while fields.iter().any(|f| f.number == free_low) {
                free_low += 1;
            }
            messages.push(MsgInfo {
                fields,
                map_entry: desc.is_map_entry(),
                free_low,
            });
        }
        Schema { messages }
    }
}

/// The test data generator ([`XorShift`]), seeded per message so that each is scrambled the
/// same way whatever was scrambled before it.
struct Rng(XorShift);

impl Rng {
    fn new(seed: u64, offset: usize, depth: usize) -> Rng {
        Rng(XorShift::new(
            seed ^ (offset as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ depth as u64,
        ))
    }

    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        (((self.next() >> 32) * n as u64) >> 32) as usize
    }

    /// True with probability `num` / `den`.
    fn chance(&mut self, num: usize, den: usize) -> bool {
        self.below(den) < num
    }
}

/// What one message's plan writes, in order.
#[derive(Clone, Copy, Debug)]
enum Item {
    /// Input bytes copied as they are: a field the schema does not know (or not with that
    /// wire type), key included.
    Raw { start: usize, end: usize },
    /// A known field as read: `field` indexes the message's fields, `start..end` is the value
    /// (for a varint, its bytes; for a length-delimited field, the payload).
    Known {
        field: u16,
        wire: WireType,
        value: u64,
        start: usize,
        end: usize,
    },
    /// One of the two occurrences a singular message field is split into.
    Part {
        field: u16,
        start: usize,
        end: usize,
        second: bool,
        cut: u32,
    },
    /// A value of singular scalar field `field` other than its real one, which follows.
    Decoy {
        field: u16,
        wire: WireType,
        value: u64,
        start: usize,
        end: usize,
    },
    /// A packed run of elements `start..end` of packed repeated field `field`.
    Run {
        field: u16,
        start: usize,
        end: usize,
    },
    /// One element (`start..end`) of a packed field written unpacked.
    Single {
        field: u16,
        start: usize,
        end: usize,
    },
    /// A length-delimited field of length 0.
    Empty { number: u32, unknown: bool },
    /// An added field: unknown, wrong wire type or an explicit default.
    Extra {
        number: u32,
        wire: WireType,
        value: u64,
        len: u8,
        bytes: [u8; 12],
        unknown: bool,
    },
}

/// Which of a message's planned items to write.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Range {
    Whole,
    /// The first or second part of a split: items before / from `cut % (items + 1)`.
    Part {
        second: bool,
        cut: u32,
    },
}

/// Counts of what was applied, printed as JSON.
#[derive(Default, Debug)]
struct Stats {
    messages: u64,
    reordered: u64,
    maps_shuffled: u64,
    entry_defaults_dropped: u64,
    entries_reversed: u64,
    explicit_defaults: u64,
    unknown_kept: u64,
    unknown_in_map_entries: u64,
    wrongtype: u64,
    split_messages: u64,
    decoys: u64,
    packed_runs_split: u64,
    unpacked: u64,
    empty_fields: u64,
    padded_varints: u64,
}

impl Stats {
    fn json(&self, input: usize, output: usize) -> String {
        format!(
            concat!(
                "{{\"input_bytes\": {}, \"output_bytes\": {}, \"messages\": {}, \"reordered\": {}, ",
                "\"maps_shuffled\": {}, \"entry_defaults_dropped\": {}, \"entries_reversed\": {}, ",
                "\"explicit_defaults\": {}, \"unknown_kept\": {}, \"unknown_in_map_entries\": {}, ",
                "\"wrongtype\": {}, \"split_messages\": {}, \"decoys\": {}, \"packed_runs_split\": {}, ",
                "\"unpacked\": {}, \"empty_fields\": {}, \"padded_varints\": {}}}"
            ),
            input,
            output,
            self.messages,
            self.reordered,
            self.maps_shuffled,
            self.entry_defaults_dropped,
            self.entries_reversed,
            self.explicit_defaults,
            self.unknown_kept,
            self.unknown_in_map_entries,
            self.wrongtype,
            self.split_messages,
            self.decoys,
            self.packed_runs_split,
            self.unpacked,
            self.empty_fields,
            self.padded_varints,
        )
    }
}

/// Per-depth buffers of the plan, reused from message to message.
#[derive(Default)]
struct Scratch {
    items: Vec<Item>,
    /// Group of each item of `items` (see [`Scrambler::group_key`]).
    keys: Vec<u64>,
    order: Vec<u32>,
    groups: Vec<(u64, Vec<u32>)>,
    present: Vec<bool>,
}

/// The walk: input, schema, options, and the output being written.
struct Scrambler<'a> {
    input: &'a [u8],
    schema: &'a Schema,
    classes: Classes,
    seed: u64,
    out: Vec<u8>,
    pool: Vec<Scratch>,
    stats: Stats,
    /// Whether unknown fields go inside map entries too (see `--no-entry-unknowns`).
    entry_unknowns: bool,
}

/// Writes `value` as a varint of exactly `buf.len()` bytes (at least its minimal length).
fn put_padded(buf: &mut [u8], mut value: u64) {
    let last = buf.len() - 1;
    for b in &mut buf[..last] {
        *b = (value as u8 & 0x7F) | 0x80;
        value >>= 7;
    }
    debug_assert!(value < 0x80);
    buf[last] = value as u8;
}

impl<'a> Scrambler<'a> {
    fn new(input: &'a [u8], schema: &'a Schema, classes: Classes, seed: u64) -> Self {
        Scrambler {
            input,
            schema,
            classes,
            seed,
            out: Vec::with_capacity(input.len() + input.len() / 2 + 1024),
            pool: Vec::new(),
            stats: Stats::default(),
            entry_unknowns: true,
        }
    }

    /// Extra bytes to pad the next varint with (0 unless the `varint` class draws it).
    fn pad(&mut self, rng: &mut Rng) -> usize {
        if self.classes.varint && rng.chance(1, 4) {
            self.stats.padded_varints += 1;
            1 + rng.below(3)
        } else {
            0
        }
    }

    /// Appends `value` as a varint padded by `extra` bytes (at most 10 in all).
    fn varint(&mut self, value: u64, extra: usize) {
        let width = (varint_len(value) as usize + extra).min(10);
        let at = self.out.len();
        self.out.resize(at + width, 0);
        put_padded(&mut self.out[at..], value);
    }

    fn key(&mut self, number: u32, wire: WireType) {
        self.varint((u64::from(number) << 3) | wire.bits(), 0);
    }

    /// Reserves room for a length prefix guessed from `guess`; returns where it starts and its
    /// width, for [`Self::end_len`].
    fn begin_len(&mut self, guess: usize) -> (usize, usize) {
        let at = self.out.len();
        let width = varint_len(guess as u64) as usize;
        self.out.resize(at + width, 0);
        (at, width)
    }

    /// Writes the length of what followed [`Self::begin_len`] in its place, padded by `extra`
    /// bytes (5 at most: protobuf C++ reads no longer sizes), moving the value if the width
    /// differs from the reserved one.
    fn end_len(&mut self, (at, reserved): (usize, usize), extra: usize) {
        let len = self.out.len() - at - reserved;
        let minimal = varint_len(len as u64) as usize;
        let width = (minimal + extra).min(5).max(minimal);
        if width != reserved {
            let end = self.out.len();
            if width > reserved {
                self.out.resize(end + width - reserved, 0);
            }
            self.out.copy_within(at + reserved..end, at + width);
            self.out.truncate(at + width + len);
        }
        put_padded(&mut self.out[at..at + width], len as u64);
    }

    /// The group an item belongs to when reordering: occurrences of one field, or of the
    /// members of one oneof, keep their relative order. Extras get `u64::MAX` (placed apart).
    fn group_key(info: &MsgInfo, item: &Item) -> u64 {
        let known = |field: u16| {
            let f = &info.fields[field as usize];
            match f.oneof {
                Some(o) => (1 << 32) | u64::from(o),
                None => u64::from(f.number),
            }
        };
        match *item {
            Item::Raw { .. } => 2 << 32,
            Item::Known { field, .. }
            | Item::Part { field, .. }
            | Item::Decoy { field, .. }
            | Item::Run { field, .. }
            | Item::Single { field, .. } => known(field),
            // An empty occurrence of a singular message field stays beside the field (in a
            // oneof it would select its member); empty unknown fields and empty packed runs
            // go anywhere.
            Item::Empty { number, unknown } => match info.field(number) {
                Some(i)
                    if !unknown
                        && !info.fields[i].repeated
                        && matches!(info.fields[i].kind, ValueKind::Message(_)) =>
                {
                    known(i as u16)
                }
                _ => u64::MAX,
            },
            Item::Extra { .. } => u64::MAX,
        }
    }

    /// Writes the message of type `msg` found at `start..end` of the input (its fields, not its
    /// key or length), scrambled; `range` selects a part of a split. `count` says whether this
    /// call counts the message's statistics (the first part of a split does, the second not).
    fn message(
        &mut self,
        msg: usize,
        start: usize,
        end: usize,
        depth: usize,
        range: Range,
        count: bool,
    ) -> AnyResult<()> {
        if depth > MAX_DEPTH {
            return Err(format!("messages nested deeper than {MAX_DEPTH} at byte {start}").into());
        }
        if self.pool.len() <= depth {
            self.pool.resize_with(depth + 1, Scratch::default);
        }
        let mut s = std::mem::take(&mut self.pool[depth]);
        let mut rng = Rng::new(self.seed, start, depth);
        let result = self
            .plan(msg, start, end, &mut rng, &mut s, count)
            .and_then(|()| {
                let n = s.order.len();
                let (from, to) = match range {
                    Range::Whole => (0, n),
                    Range::Part { second, cut } => {
                        let cut = cut as usize % (n + 1);
                        if second {
                            (cut, n)
                        } else {
                            (0, cut)
                        }
                    }
                };
                for i in from..to {
                    let item = s.items[s.order[i] as usize];
                    self.item(msg, item, depth, &mut rng)?;
                }
                Ok(())
            });
        self.pool[depth] = s;
        result
    }

    /// Reads the message at `start..end` and decides what to write, in which order: fills
    /// `s.items` and `s.order`.
    fn plan(
        &mut self,
        msg: usize,
        start: usize,
        end: usize,
        rng: &mut Rng,
        s: &mut Scratch,
        count: bool,
    ) -> AnyResult<()> {
        let schema = self.schema;
        let input = self.input;
        let info = &schema.messages[msg];
        let c = self.classes;
        s.items.clear();
        s.present.clear();
        s.present.resize(info.fields.len(), false);
        if count {
            self.stats.messages += 1;
        }
        let buf = &input[..end];
        let mut pos = start;
        while pos < end {
            let at = pos;
            let f = read_field(buf, &mut pos)
                .map_err(|e| format!("at byte {}: {}", e.offset, e.fault))?;
            let Some(index) = info
                .field(f.number)
                .filter(|&i| info.fields[i].accepts(f.wire_type))
            else {
                s.items.push(Item::Raw {
                    start: at,
                    end: pos,
                });
                continue;
            };
            let fi = &info.fields[index];
            let field = index as u16;
            s.present[index] = true;
            let known = Item::Known {
                field,
                wire: f.wire_type,
                value: f.varint,
                start: f.start,
                end: f.end,
            };
            match fi.kind {
                ValueKind::Message(_) if !fi.repeated => {
                    let empty = c.empty && rng.chance(1, 8);
                    let empty_item = Item::Empty {
                        number: fi.number,
                        unknown: false,
                    };
                    let before = rng.chance(1, 2);
                    if empty && before {
                        s.items.push(empty_item);
                    }
                    if c.split && rng.chance(1, 4) {
                        let cut = rng.next() as u32;
                        for second in [false, true] {
                            s.items.push(Item::Part {
                                field,
                                start: f.start,
                                end: f.end,
                                second,
                                cut,
                            });
                        }
                    } else {
                        s.items.push(known);
                    }
                    if empty && !before {
                        s.items.push(empty_item);
                    }
                }
                ValueKind::Message(_) => s.items.push(known),
                kind if fi.repeated && kind.packable() && f.wire_type == WireType::Len => {
                    self.plan_packed(kind, field, f.start..f.end, rng, &mut s.items, count)?
                }
                _ => {
                    if c.split && !fi.repeated && !info.map_entry && rng.chance(1, 8) {
                        s.items.push(Item::Decoy {
                            field,
                            wire: f.wire_type,
                            value: f.varint,
                            start: f.start,
                            end: f.end,
                        });
                    }
                    s.items.push(known);
                }
            }
        }
        if info.map_entry && c.defaults {
            self.entry_defaults(info, rng, s, count);
        }
        self.extras(info, rng, s);

        // The order: input order, or (reorder) the groups' blocks permuted or interleaved.
        s.order.clear();
        let reorder = c.reorder && s.items.len() > 1 && rng.chance(1, 2);
        if !reorder {
            let n = s
                .items
                .iter()
                .take_while(|i| Self::group_key(info, i) != u64::MAX)
                .count();
            s.order.extend(0..n as u32);
            self.insert_extras(info, rng, s, n);
            return Ok(());
        }
        s.keys.clear();
        s.keys
            .extend(s.items.iter().map(|i| Self::group_key(info, i)));
        for g in &mut s.groups {
            g.1.clear();
        }
        let mut used = 0;
        let mut last = usize::MAX;
        for (i, &key) in s.keys.iter().enumerate() {
            if key == u64::MAX {
                continue;
            }
            if last == usize::MAX || s.groups[last].0 != key {
                last = match s.groups[..used].iter().position(|g| g.0 == key) {
                    Some(g) => g,
                    None => {
                        if used == s.groups.len() {
                            s.groups.push((key, Vec::new()));
                        }
                        s.groups[used].0 = key;
                        used += 1;
                        used - 1
                    }
                };
            }
            s.groups[last].1.push(i as u32);
        }
        let groups = &mut s.groups[..used];
        // Map entries in another order, when their keys are distinct (for equal keys the last
        // one wins, so their order matters).
        for g in groups.iter_mut() {
            let Some(&first) = g.1.first() else { continue };
            let is_map = match s.items[first as usize] {
                Item::Known { field, .. } => info.fields[field as usize].map,
                _ => false,
            };
            if is_map && g.1.len() > 1 && distinct_keys(self.input, &s.items, &g.1) {
                for i in (1..g.1.len()).rev() {
                    g.1.swap(i, rng.below(i + 1));
                }
                if count {
                    self.stats.maps_shuffled += 1;
                }
            }
        }
        if rng.chance(1, 2) {
            // Blocks: every group whole, the groups in a random order.
            for i in (1..groups.len()).rev() {
                groups.swap(i, rng.below(i + 1));
            }
            for g in groups.iter() {
                s.order.extend_from_slice(&g.1);
            }
        } else {
            // Interleaved: each next item from a group drawn in proportion to what it has left.
            let mut next = vec![0usize; groups.len()];
            let mut left: usize = groups.iter().map(|g| g.1.len()).sum();
            while left > 0 {
                let mut r = rng.below(left);
                for (g, n) in groups.iter().zip(next.iter_mut()) {
                    let remaining = g.1.len() - *n;
                    if r < remaining {
                        s.order.push(g.1[*n]);
                        *n += 1;
                        break;
                    }
                    r -= remaining;
                }
                left -= 1;
            }
        }
        if count && s.order.iter().enumerate().any(|(i, &o)| o as usize != i) {
            self.stats.reordered += 1;
        }
        let n = s.order.len();
        self.insert_extras(info, rng, s, n);
        Ok(())
    }

    /// Adds to `s.order` the extras (items from `first` on that belong to no group), each at a
    /// random position.
    fn insert_extras(&mut self, info: &MsgInfo, rng: &mut Rng, s: &mut Scratch, first: usize) {
        for i in first..s.items.len() {
            debug_assert_eq!(Self::group_key(info, &s.items[i]), u64::MAX);
            let at = rng.below(s.order.len() + 1);
            s.order.insert(at, i as u32);
        }
    }

    /// A packed run of a repeated scalar: whole, cut in runs, or unpacked.
    fn plan_packed(
        &mut self,
        kind: ValueKind,
        field: u16,
        payload: std::ops::Range<usize>,
        rng: &mut Rng,
        items: &mut Vec<Item>,
        count: bool,
    ) -> AnyResult<()> {
        let std::ops::Range { start, end } = payload;
        let whole = Item::Run { field, start, end };
        if !self.classes.split || start == end || !rng.chance(1, 3) {
            items.push(whole);
            return Ok(());
        }
        // Element boundaries (only as many as needed: up to 64 for unpacking, else a sample).
        let width = match kind {
            ValueKind::Fixed32 => 4,
            ValueKind::Fixed64 => 8,
            _ => 0,
        };
        let mut bounds = Vec::new();
        if width > 0 {
            if (end - start) % width != 0 {
                return Err(
                    format!("packed run at byte {start} is not a multiple of {width}").into(),
                );
            }
            let n = (end - start) / width;
            if n <= 64 {
                bounds.extend((0..=n).map(|i| start + i * width));
            } else {
                let mut cuts: Vec<usize> = (0..3).map(|_| rng.below(n + 1)).collect();
                cuts.extend([0, n]);
                cuts.sort_unstable();
                bounds.extend(cuts.iter().map(|i| start + i * width));
            }
        } else {
            let mut pos = start;
            bounds.push(pos);
            while pos < end {
                read_varint(&self.input[..end], &mut pos)
                    .map_err(|e| format!("at byte {}: {}", e.offset, e.fault))?;
                bounds.push(pos);
            }
        }
        let elements = bounds.len() - 1;
        if elements <= 64 && rng.chance(1, 2) {
            self.stats.unpacked += u64::from(count);
            for w in bounds.windows(2) {
                items.push(Item::Single {
                    field,
                    start: w[0],
                    end: w[1],
                });
            }
        } else {
            // 2 to 4 runs at random element boundaries (some may be empty).
            self.stats.packed_runs_split += u64::from(count);
            let runs = 2 + rng.below(3);
            let mut cuts: Vec<usize> = (1..runs).map(|_| bounds[rng.below(bounds.len())]).collect();
            cuts.sort_unstable();
            let mut from = start;
            for cut in cuts.into_iter().chain([end]) {
                items.push(Item::Run {
                    field,
                    start: from,
                    end: cut,
                });
                from = cut;
            }
        }
        Ok(())
    }

    /// A map entry's defaults: key or value left out when they are the default, or the value
    /// before the key.
    fn entry_defaults(&mut self, info: &MsgInfo, rng: &mut Rng, s: &mut Scratch, count: bool) {
        let is_default = |item: &Item, input: &[u8]| match *item {
            Item::Known {
                wire: WireType::Varint,
                value,
                ..
            } => value == 0,
            Item::Known { start, end, .. } => input[start..end].iter().all(|&b| b == 0),
            _ => false,
        };
        let position = |s: &Scratch, number: u32| {
            let hits: Vec<usize> = (0..s.items.len())
                .filter(|&i| match s.items[i] {
                    Item::Known { field, .. } | Item::Part { field, .. } => {
                        info.fields[field as usize].number == number
                    }
                    Item::Raw { .. } => false,
                    _ => true,
                })
                .collect();
            if hits.len() == 1 {
                Some(hits[0])
            } else {
                None
            }
        };
        let (Some(k), Some(v)) = (position(s, 1), position(s, 2)) else {
            return;
        };
        let drop_key = is_default(&s.items[k], self.input) && rng.chance(1, 2);
        let drop_value = is_default(&s.items[v], self.input) && rng.chance(1, 2);
        if drop_key || drop_value {
            let mut i = 0;
            s.items.retain(|_| {
                i += 1;
                !((drop_key && i - 1 == k) || (drop_value && i - 1 == v))
            });
            if count {
                self.stats.entry_defaults_dropped += u64::from(drop_key) + u64::from(drop_value);
            }
        } else if k < v && rng.chance(1, 2) {
            s.items.swap(k, v);
            if count {
                self.stats.entries_reversed += 1;
            }
        }
    }

    /// Fields added to the message: unknown ones, known numbers with a wrong wire type, empty
    /// length-delimited ones, explicit defaults. Appended to `s.items`, placed later.
    fn extras(&mut self, info: &MsgInfo, rng: &mut Rng, s: &mut Scratch) {
        let c = self.classes;
        let unused = |rng: &mut Rng| loop {
            let number = match rng.below(5) {
                0 => info.free_low,
                1 | 2 => 1000 + rng.below(1000) as u32,
                3 => 100_000 + rng.below(100_000) as u32,
                _ => MAX_FIELD_NUMBER,
            };
            if info.field(number).is_none() {
                break number;
            }
        };
        if c.unknown && rng.chance(1, 3) {
            for _ in 0..1 + rng.below(2) {
                let number = unused(rng);
                let wire = [
                    WireType::Varint,
                    WireType::Fixed32,
                    WireType::Fixed64,
                    WireType::Len,
                ][rng.below(4)];
                s.items.push(random_extra(number, wire, rng, true));
            }
        }
        if c.wrongtype && !info.fields.is_empty() && rng.chance(1, 4) {
            let f = &info.fields[rng.below(info.fields.len())];
            let wrong: Vec<WireType> = [
                WireType::Varint,
                WireType::Fixed32,
                WireType::Fixed64,
                WireType::Len,
            ]
            .into_iter()
            .filter(|&w| !f.accepts(w))
            .collect();
            let wire = wrong[rng.below(wrong.len())];
            let mut extra = random_extra(f.number, wire, rng, true);
            if wire == WireType::Len && rng.chance(1, 2) {
                // `0a 00` and the like: empty.
                if let Item::Extra { len, .. } = &mut extra {
                    *len = 0;
                }
            }
            s.items.push(extra);
        }
        if c.empty && rng.chance(1, 4) {
            let number = unused(rng);
            s.items.push(Item::Empty {
                number,
                unknown: true,
            });
        }
        // Empty packed runs of repeated scalars, present or not; explicit defaults of absent
        // implicit-presence scalars.
        if c.empty && !info.fields.is_empty() && rng.chance(1, 4) {
            let f = &info.fields[rng.below(info.fields.len())];
            if f.repeated && f.kind.packable() {
                s.items.push(Item::Empty {
                    number: f.number,
                    unknown: false,
                });
            }
        }
        if c.defaults && !info.map_entry && !info.fields.is_empty() && rng.chance(1, 3) {
            let i = rng.below(info.fields.len());
            let f = &info.fields[i];
            if f.implicit && f.oneof.is_none() && !s.present[i] {
                s.items.push(Item::Extra {
                    number: f.number,
                    wire: f.kind.wire(),
                    value: 0,
                    len: 0,
                    bytes: [0; 12],
                    unknown: false,
                });
            }
        }
    }

    /// Writes one planned item of a message of type `msg`.
    fn item(&mut self, msg: usize, item: Item, depth: usize, rng: &mut Rng) -> AnyResult<()> {
        let schema = self.schema;
        let info = &schema.messages[msg];
        let unknown = matches!(
            item,
            Item::Empty { unknown: true, .. } | Item::Extra { unknown: true, .. }
        );
        if unknown && info.map_entry && !self.entry_unknowns {
            // Written (drawing from `rng` as ever) and taken back, so that nothing else changes.
            let (at, stats) = (self.out.len(), std::mem::take(&mut self.stats));
            let result = self.write_item(info, item, depth, rng);
            self.out.truncate(at);
            self.stats = stats;
            return result;
        }
        self.write_item(info, item, depth, rng)
    }

    /// [`Self::item`]'s writing.
    fn write_item(
        &mut self,
        info: &MsgInfo,
        item: Item,
        depth: usize,
        rng: &mut Rng,
    ) -> AnyResult<()> {
        let input = self.input;
        match item {
            Item::Raw { start, end } => self.out.extend_from_slice(&input[start..end]),
            Item::Known {
                field,
                wire,
                value,
                start,
                end,
            } => {
                let f = &info.fields[field as usize];
                match (f.kind, wire) {
                    (ValueKind::Message(child), _) => {
                        self.key(f.number, WireType::Len);
                        let len = self.begin_len(end - start);
                        self.message(child, start, end, depth + 1, Range::Whole, true)?;
                        let extra = self.pad(rng);
                        self.end_len(len, extra);
                    }
                    (kind, WireType::Len) if kind.packable() => {
                        self.run(f.number, kind, start, end, rng)?;
                    }
                    (_, WireType::Varint) => {
                        self.key(f.number, wire);
                        let extra = self.pad(rng);
                        self.varint(value, extra);
                    }
                    (_, WireType::Len) => {
                        self.key(f.number, wire);
                        let extra = self.pad(rng);
                        let len = self.begin_len(end - start);
                        self.out.extend_from_slice(&input[start..end]);
                        self.end_len(len, extra);
                    }
                    _ => {
                        self.key(f.number, wire);
                        self.out.extend_from_slice(&input[start..end]);
                    }
                }
            }
            Item::Part {
                field,
                start,
                end,
                second,
                cut,
            } => {
                let f = &info.fields[field as usize];
                let ValueKind::Message(child) = f.kind else {
                    unreachable!("parts are messages")
                };
                if !second {
                    self.stats.split_messages += 1;
                }
                self.key(f.number, WireType::Len);
                let len = self.begin_len(end - start);
                self.message(
                    child,
                    start,
                    end,
                    depth + 1,
                    Range::Part { second, cut },
                    !second,
                )?;
                let extra = self.pad(rng);
                self.end_len(len, extra);
            }
            Item::Decoy {
                field,
                wire,
                value,
                start,
                end,
            } => {
                self.stats.decoys += 1;
                let number = info.fields[field as usize].number;
                self.key(number, wire);
                match wire {
                    WireType::Varint => self.varint(value ^ 1, 0),
                    WireType::Len => {
                        let decoy: &[u8] = if start == end { b"d" } else { b"" };
                        self.varint(decoy.len() as u64, 0);
                        self.out.extend_from_slice(decoy);
                    }
                    _ => {
                        let at = self.out.len();
                        self.out.extend_from_slice(&input[start..end]);
                        self.out[at] ^= 1;
                    }
                }
            }
            Item::Run { field, start, end } => {
                let f = &info.fields[field as usize];
                self.run(f.number, f.kind, start, end, rng)?;
            }
            Item::Single { field, start, end } => {
                let f = &info.fields[field as usize];
                self.key(f.number, f.kind.wire());
                self.element(f.kind, start, end, rng)?;
            }
            Item::Empty { number, unknown } => {
                self.stats.empty_fields += 1;
                if unknown {
                    self.count_unknown(info);
                }
                self.key(number, WireType::Len);
                let extra = self.pad(rng);
                self.varint(0, extra);
            }
            Item::Extra {
                number,
                wire,
                value,
                len,
                bytes,
                unknown,
            } => {
                if unknown {
                    self.count_unknown(info);
                    if info.field(number).is_some() {
                        self.stats.wrongtype += 1;
                    }
                } else {
                    self.stats.explicit_defaults += 1;
                }
                self.key(number, wire);
                match wire {
                    WireType::Varint => {
                        let extra = self.pad(rng);
                        self.varint(value, extra);
                    }
                    WireType::Fixed32 => self.out.extend_from_slice(&(value as u32).to_le_bytes()),
                    WireType::Fixed64 => self.out.extend_from_slice(&value.to_le_bytes()),
                    _ => {
                        let extra = self.pad(rng);
                        self.varint(u64::from(len), extra);
                        self.out.extend_from_slice(&bytes[..len as usize]);
                    }
                }
            }
        }
        Ok(())
    }

    fn count_unknown(&mut self, info: &MsgInfo) {
        if info.map_entry {
            self.stats.unknown_in_map_entries += 1;
        } else {
            self.stats.unknown_kept += 1;
        }
    }

    /// Writes elements `start..end` of a packed field as one packed run.
    fn run(
        &mut self,
        number: u32,
        kind: ValueKind,
        start: usize,
        end: usize,
        rng: &mut Rng,
    ) -> AnyResult<()> {
        self.key(number, WireType::Len);
        let extra = self.pad(rng);
        let len = self.begin_len(end - start);
        if kind == ValueKind::Varint && self.classes.varint && rng.chance(1, 4) {
            let mut pos = start;
            while pos < end {
                let from = pos;
                read_varint(&self.input[..end], &mut pos)
                    .map_err(|e| format!("at byte {}: {}", e.offset, e.fault))?;
                self.element(kind, from, pos, rng)?;
            }
        } else {
            self.out.extend_from_slice(&self.input[start..end]);
        }
        self.end_len(len, extra);
        Ok(())
    }

    /// Writes one scalar element found at `start..end` (a varint possibly padded).
    fn element(
        &mut self,
        kind: ValueKind,
        start: usize,
        end: usize,
        rng: &mut Rng,
    ) -> AnyResult<()> {
        if kind == ValueKind::Varint {
            let mut pos = start;
            let value = read_varint(&self.input[..end], &mut pos)
                .map_err(|e| format!("at byte {}: {}", e.offset, e.fault))?;
            let extra = self.pad(rng);
            self.varint(value, extra);
        } else {
            self.out.extend_from_slice(&self.input[start..end]);
        }
        Ok(())
    }
}

/// An added field with a random value of wire type `wire`.
fn random_extra(number: u32, wire: WireType, rng: &mut Rng, unknown: bool) -> Item {
    let value = match rng.below(3) {
        0 => rng.below(128) as u64,
        1 => rng.next() >> (rng.below(64) as u32),
        _ => u64::MAX - rng.below(3) as u64,
    };
    let mut bytes = [0u8; 12];
    let len = rng.below(13) as u8;
    for b in &mut bytes[..len as usize] {
        *b = rng.next() as u8;
    }
    Item::Extra {
        number,
        wire,
        value,
        len,
        bytes,
        unknown,
    }
}

/// Whether the map entries `entries` (items of `items`) have pairwise distinct keys.
fn distinct_keys(input: &[u8], items: &[Item], entries: &[u32]) -> bool {
    let mut keys: Vec<(u64, &[u8])> = Vec::with_capacity(entries.len());
    for &e in entries {
        let Item::Known { start, end, .. } = items[e as usize] else {
            return false;
        };
        let mut key = (0, &input[0..0]);
        let mut pos = start;
        while pos < end {
            let Ok(f) = read_field(&input[..end], &mut pos) else {
                return false;
            };
            if f.number == 1 {
                key = if f.wire_type == WireType::Varint {
                    (f.varint, &input[0..0])
                } else {
                    (0, &input[f.start..f.end])
                };
            }
        }
        keys.push(key);
    }
    keys.sort_unstable();
    keys.windows(2).all(|w| w[0] != w[1])
}

//! `lie_metadata IN.cpb OUT.cpb SEED`: rewrites a `.cpb` with chunk metadata that lies, every
//! Riegeli hash still valid (the project's own records writer frames it), for
//! `scripts/hostile_campaign.py`. SEED picks one lie: a shifted, swapped, dropped or
//! duplicated chunk offset; a wrong size or chunk type; a chunk index out of range; a changed
//! or added field tag; a record no chunk names; no chunks at all (the metadata alone); several
//! records per Riegeli chunk. Prints the lie's name.

use std::process::ExitCode;

use bytes::Bytes;
use prost::Message;
use unbound_proto::tensorflow::proto_splitter::{ChunkMetadata, ChunkedMessage};
use unbound_records::{Compression, RecordReader};
use unbound_test_support::chunks::{chunked_field_at, field_tag, write_cpb_with};

/// A small deterministic generator (xorshift64*), so a seed names the same mutant forever.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// How many `ChunkedMessage`s the tree holds.
fn count(m: &ChunkedMessage) -> usize {
    1 + m
        .chunked_fields
        .iter()
        .filter_map(|f| f.message.as_ref())
        .map(count)
        .sum::<usize>()
}

/// The `k`-th `ChunkedMessage` of the tree, depth first (the root when `k` is past the end).
fn nth(m: &mut ChunkedMessage, k: usize) -> &mut ChunkedMessage {
    if k == 0 {
        return m;
    }
    let mut k = k - 1;
    let mut target = None;
    for (i, f) in m.chunked_fields.iter().enumerate() {
        if let Some(child) = &f.message {
            let c = count(child);
            if k < c {
                target = Some((i, k));
                break;
            }
            k -= c;
        }
    }
    match target {
        Some((i, k)) if m.chunked_fields[i].message.is_some() => nth(
            m.chunked_fields[i]
                .message
                .get_or_insert_with(Default::default),
            k,
        ),
        _ => m,
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, input, output, seed] = args.as_slice() else {
        eprintln!("usage: lie_metadata IN.cpb OUT.cpb SEED");
        return ExitCode::from(2);
    };
    let Ok(seed) = seed.parse::<u64>() else {
        eprintln!("SEED must be a number");
        return ExitCode::from(2);
    };
    let reader = match RecordReader::open(std::path::Path::new(input)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let mut records: Vec<Bytes> = match reader.records().map(|r| r.map(|(_, b)| b)).collect() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let Some(last) = records.pop() else {
        eprintln!("{input}: no records");
        return ExitCode::from(1);
    };
    let Ok(metadata) = ChunkMetadata::decode(last) else {
        eprintln!("{input}: the last record is not a ChunkMetadata");
        return ExitCode::from(1);
    };
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let n = metadata.chunks.len() as u64;
    let lie = rng.below(12);
    let pick = rng.below(n.max(1)) as usize;
    let other = rng.below(n.max(1)) as usize;
    let delta = 1 + rng.below(3);
    let chunk_size = if lie == 11 { 2 + rng.below(4) } else { 1 };
    let extra = rng.next();
    let mut name = String::new();
    if lie == 9 {
        records.push(Bytes::from_static(b"a record no chunk names"));
    }
    if lie == 10 {
        records.clear();
    }
    let bytes = write_cpb_with(
        &records,
        metadata,
        Compression::None,
        chunk_size,
        |m: &mut ChunkMetadata| {
            let n = m.chunks.len();
            name = match lie {
                0 if n > 0 => {
                    m.chunks[pick].offset = m.chunks[pick].offset.wrapping_add(delta);
                    format!("offset of chunk {pick} + {delta}")
                }
                1 if n > 0 => {
                    let o = m.chunks[pick].offset;
                    m.chunks[pick].offset = m.chunks[other].offset;
                    m.chunks[other].offset = o;
                    format!("offsets of chunks {pick} and {other} swapped")
                }
                2 if n > 0 => {
                    m.chunks.remove(pick);
                    format!("chunk {pick} dropped")
                }
                3 if n > 0 => {
                    let c = m.chunks[pick];
                    m.chunks.insert(pick, c);
                    format!("chunk {pick} duplicated")
                }
                4 if n > 0 => {
                    let s = m.chunks[pick].size;
                    m.chunks[pick].size = if extra % 2 == 0 {
                        s.wrapping_add(delta)
                    } else {
                        s.saturating_sub(delta)
                    };
                    format!("size of chunk {pick} changed")
                }
                5 if n > 0 => {
                    m.chunks[pick].r#type = (extra % 4) as i32;
                    format!("type of chunk {pick} set to {}", extra % 4)
                }
                6 => {
                    let root = m.message.get_or_insert_with(Default::default);
                    let k = (extra as usize) % count(root);
                    let index = (n as u64).saturating_add(extra % 3);
                    nth(root, k).chunk_index = Some(index);
                    format!("a chunk index set to {index}")
                }
                7 => {
                    let root = m.message.get_or_insert_with(Default::default);
                    let k = (extra as usize) % count(root);
                    let node = nth(root, k);
                    let field = 1 + (extra >> 8) as u32 % 20;
                    match node.chunked_fields.first_mut() {
                        Some(f) if !f.field_tag.is_empty() => {
                            f.field_tag[0] = field_tag(field);
                            format!("a field tag changed to {field}")
                        }
                        _ => {
                            node.chunked_fields
                                .push(chunked_field_at(vec![field_tag(field)], pick as u64));
                            format!("a chunked field {field} added")
                        }
                    }
                }
                8 => {
                    let root = m.message.get_or_insert_with(Default::default);
                    let field = 1 + extra as u32 % 20;
                    root.chunked_fields
                        .push(chunked_field_at(vec![field_tag(field)], pick as u64));
                    format!("a chunked field {field} pointing at chunk {pick} added")
                }
                9 => "a record no chunk names".into(),
                10 => {
                    m.chunks.clear();
                    m.message = None;
                    "the metadata alone".into()
                }
                11 => format!("{chunk_size} records per Riegeli chunk (no lie)"),
                _ => "no chunks to lie about".into(),
            };
        },
    );
    if let Err(e) = std::fs::write(output, bytes) {
        eprintln!("{output}: {e}");
        return ExitCode::from(1);
    }
    println!("{name}");
    ExitCode::SUCCESS
}

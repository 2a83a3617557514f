//! `write_record_parts` writes the records `write_record` of the concatenation writes: the very
//! same file when chunks are stored, the same records and positions otherwise (a compressor fed
//! in pieces may cut its blocks differently).

use unbound_records::{Compression, RecordReader, RecordWriter, WriterOptions};

fn write(options: &WriterOptions, records: &[Vec<Vec<u8>>], parts: bool) -> (Vec<u8>, Vec<u64>) {
    let mut w = RecordWriter::new(Vec::new(), *options).unwrap();
    let mut positions = Vec::new();
    for r in records {
        let pos = if parts {
            let refs: Vec<&[u8]> = r.iter().map(Vec::as_slice).collect();
            w.write_record_parts(&refs).unwrap()
        } else {
            w.write_record(&r.concat()).unwrap()
        };
        positions.push(pos);
    }
    (w.finish().unwrap(), positions)
}

fn pseudo_random(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn parts_and_whole_records_give_the_same_file() {
    let big_random: Vec<Vec<u8>> = vec![
        b"head".to_vec(),
        pseudo_random(3 << 20, 7),
        vec![],
        pseudo_random(70_000, 9),
    ];
    let big_text: Vec<Vec<u8>> = vec![b"abc".repeat(500_000), b"xyz".repeat(200_000)];
    let small: Vec<Vec<u8>> = vec![b"small ".to_vec(), b"record".to_vec()];
    let records = vec![small.clone(), big_random, small.clone(), big_text, small];
    for compression in [
        Compression::None,
        Compression::Brotli { level: 1 },
        Compression::Zstd { level: 3 },
        Compression::Snappy,
    ] {
        for store_incompressible in [false, true] {
            let options = WriterOptions {
                compression,
                store_incompressible,
                ..WriterOptions::default()
            };
            let (whole, whole_pos) = write(&options, &records, false);
            let (parts, parts_pos) = write(&options, &records, true);
            let stored = compression == Compression::None;
            if stored {
                assert_eq!(
                    whole_pos, parts_pos,
                    "{compression:?} {store_incompressible}"
                );
                assert!(
                    whole == parts,
                    "{compression:?} {store_incompressible}: files differ"
                );
            }
            let whole_reader = RecordReader::from_bytes(whole.into(), "whole").unwrap();
            for (r, pos) in records.iter().zip(&whole_pos) {
                assert_eq!(whole_reader.read_record_at(*pos).unwrap().1, r.concat());
            }
            let reader = RecordReader::from_bytes(parts.into(), "parts").unwrap();
            for (r, pos) in records.iter().zip(&parts_pos) {
                assert_eq!(reader.read_record_at(*pos).unwrap().1, r.concat());
            }
        }
    }
}

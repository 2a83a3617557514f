//! Measures how fast the records of a `.cpb` decode with unbound's Riegeli reader, on one
//! thread or spread over several: the evidence behind BENCHMARKS.md's note on merging
//! Brotli-compressed files (where decoding, not I/O, bounds `unbound merge`).
//!
//! ```text
//! cargo run --release -p unbound-savedmodel --example decode_probe -- FILE.cpb [--threads N]
//! ```
//!
//! Every chunk listed in the file's metadata is read in full (`ChunkSource::bytes`: decompressed
//! and hash-checked) and dropped; chunk `i` goes to thread `i % N`. Prints the wall time and the
//! decoded bytes per second.

use std::path::PathBuf;
use std::time::Instant;

use unbound_chunked::{ChunkSource, FileChunks};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut path: Option<PathBuf> = None;
    let mut threads = 1usize;
    let mut i = 0;
    while i < args.len() {
        if args[i] == "--threads" {
            threads = args
                .get(i + 1)
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| usage());
            i += 2;
        } else if path.is_none() && !args[i].starts_with('-') {
            path = Some(PathBuf::from(&args[i]));
            i += 1;
        } else {
            usage();
        }
    }
    let Some(path) = path else { usage() };
    let (chunks, _) = FileChunks::open(&path).unwrap_or_else(|e| {
        eprintln!("decode_probe: {e}");
        std::process::exit(1);
    });
    let t0 = Instant::now();
    let total: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.max(1))
            .map(|t| {
                let chunks = &chunks;
                s.spawn(move || {
                    let mut n = 0u64;
                    for i in (t..chunks.len()).step_by(threads.max(1)) {
                        match chunks.bytes(i as u64) {
                            Ok(b) => n += b.len() as u64,
                            Err(e) => {
                                eprintln!("decode_probe: chunk {i}: {e}");
                                std::process::exit(1);
                            }
                        }
                    }
                    n
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).sum()
    });
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "decode_probe: {} chunks, {} bytes decoded in {:.2} s on {} thread(s): {:.0} MB/s",
        chunks.len(),
        total,
        secs,
        threads,
        total as f64 / secs / 1e6
    );
}

fn usage() -> ! {
    eprintln!("usage: decode_probe FILE.cpb [--threads N]");
    std::process::exit(2);
}

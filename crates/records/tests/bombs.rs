//! Decompression bombs: hash-valid files whose chunks truthfully declare (and hold) 1 GiB or
//! 16 GiB of zeros, written by our own writer. Reading them must not make the reader hold what
//! they declare: whole-chunk decoding is refused by the `DecodeLimits` before allocating,
//! streaming reads and checks stay within one decoder buffer. This test binary counts the
//! bytes allocated and alive at once (its peak).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use bytes::Bytes;
use unbound_records::{
    Compression, DecodeLimitKind, DecodeLimits, RecordReader, RecordWriter, RecordsError,
    WriterOptions,
};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            let now = CURRENT.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size
                - layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        } else {
            CURRENT.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The tests of this binary measure one process-wide peak: they run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs `f` and returns its result with the most bytes alive at once above what was alive
/// before.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let value = f();
    (value, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

/// Most bytes a streaming read or check may hold at once: a few decoder buffers.
const STREAMING: usize = 16 << 20;

const MIB: usize = 1 << 20;

/// A Zstd file of: a small record, one record of 1 GiB of zeros (a chunk of its own), a
/// small last record. Returns the file and the positions of the three records. Never holds
/// the zeros: they are fed to the writer as parts of one MiB.
fn bomb_file() -> (Vec<u8>, [u64; 3]) {
    let zeros = vec![0u8; MIB];
    let parts: Vec<&[u8]> = vec![&zeros[..]; 1024];
    let options = WriterOptions {
        compression: Compression::Zstd { level: 1 },
        chunk_size: None,
        store_incompressible: false,
    };
    let mut w = RecordWriter::new(Vec::new(), options).unwrap();
    let a = w.write_record(b"first").unwrap();
    let big = w.write_record_parts(&parts).unwrap();
    let c = w.write_record(b"last").unwrap();
    (w.finish().unwrap(), [a, big, c])
}

/// A Zstd file whose one chunk holds `n` records of one MiB of zeros each, then a small
/// record in a chunk of its own.
fn many_record_bomb(n: usize) -> (Vec<u8>, Vec<u64>) {
    let zeros = vec![0u8; MIB];
    let options = WriterOptions {
        compression: Compression::Zstd { level: 1 },
        chunk_size: Some(u64::MAX / 2),
        store_incompressible: false,
    };
    let mut w = RecordWriter::new(Vec::new(), options).unwrap();
    let positions: Vec<u64> = (0..n).map(|_| w.write_record(&zeros).unwrap()).collect();
    (w.finish().unwrap(), positions)
}

/// The process's resident-memory high-water mark stays below 256 MB, which also covers what
/// the C decoders allocate behind the Rust allocator (Linux only; true elsewhere).
fn high_water_mark_ok() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return true;
    };
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    assert!(kb < 256_000, "resident memory reached {kb} kB");
    true
}

/// A writer that counts the bytes it is given and checks a sample of them (zeros) without
/// keeping them.
#[derive(Default)]
struct ZeroCounter(u64);

impl Write for ZeroCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        assert!(buf.iter().take(64).all(|&b| b == 0));
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A memory budget of 256 MiB: a 1 GiB bomb is past it (the default follows the machine).
const BUDGET_256_MIB: DecodeLimits = DecodeLimits {
    max_chunk: DecodeLimits::DEFAULT_MAX_CHUNK,
    budget: 256 << 20,
};

fn is_limit(e: &RecordsError, kind: DecodeLimitKind) -> bool {
    matches!(e, RecordsError::DecodeLimit { reason, .. } if *reason == kind)
}

#[test]
fn one_gib_of_zeros_is_streamed_never_held() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (file, [first, big, last]) = bomb_file();
    assert!(file.len() < 256 << 10, "the bomb is {} bytes", file.len());
    let mut reader = RecordReader::from_bytes(Bytes::from(file), "bomb.cpb").unwrap();
    reader.set_decode_limits(BUDGET_256_MIB);
    let gib = 1u64 << 30;

    // What a merge needs to refuse early, from the headers alone.
    let declared = reader.declared_record_bytes().unwrap();
    assert_eq!(declared, gib + 9);

    // Asking for the bytes is refused before anything is allocated, naming file and chunk.
    let (result, peak) = peak_of(|| reader.read_record_at(big));
    let e = result.unwrap_err();
    assert!(is_limit(&e, DecodeLimitKind::Held), "{e}");
    assert_eq!(e.file(), "bomb.cpb");
    assert!(
        e.to_string().contains("declares 1073741824 decoded bytes"),
        "{e}"
    );
    assert!(peak < STREAMING, "read_record_at held {peak} bytes");
    let (result, peak) = peak_of(|| reader.records().collect::<Result<Vec<_>, _>>());
    assert!(is_limit(&result.unwrap_err(), DecodeLimitKind::Held));
    assert!(peak < STREAMING, "records() held {peak} bytes");

    // The records around it read normally; the sizes come from the sizes table.
    assert_eq!(&reader.read_record_at(first).unwrap().1[..], b"first");
    assert_eq!(
        reader.last_record().unwrap(),
        (last, Bytes::from_static(b"last"))
    );
    assert_eq!(reader.record_len_at(big).unwrap(), gib);

    // Streaming the record, and checking its chunk, hold one decoder buffer.
    let (result, peak) = peak_of(|| {
        let mut out = ZeroCounter::default();
        reader.copy_record_to(big, &mut out).map(|n| (n, out.0))
    });
    assert_eq!(result.unwrap(), (gib, gib));
    assert!(peak < STREAMING, "copy_record_to held {peak} bytes");
    let begin = reader
        .chunks()
        .map(Result::unwrap)
        .find(|c| c.decoded_data_size == gib)
        .unwrap()
        .begin;
    assert_eq!(begin, big);
    let (result, peak) = peak_of(|| reader.check_chunk(begin));
    assert_eq!(result.unwrap(), vec![gib]);
    assert!(peak < STREAMING, "check_chunk held {peak} bytes");
    // Only the cached last chunk ("last") is held.
    assert_eq!(reader.decoded_bytes_held(), 4);
    assert!(high_water_mark_ok());
}

/// A file whose one simple chunk holds one record of 16 GiB of zeros: a truthful Zstd stream
/// of sixteen frames of 1 GiB each (584 KB). Writing 16 GiB through the writer's compressor
/// takes half a minute in a debug build; one frame made once and repeated takes two seconds.
fn sixteen_gib_file() -> (Vec<u8>, u64) {
    let total = 16u64 << 30;
    let zeros = vec![0u8; MIB];
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    for _ in 0..1024 {
        enc.write_all(&zeros).unwrap();
    }
    let frame = enc.finish().unwrap();
    let mut sizes_plain = Vec::new();
    common::varint(total, &mut sizes_plain);
    let mut sizes = Vec::new();
    common::varint(sizes_plain.len() as u64, &mut sizes);
    sizes.extend_from_slice(&zstd::bulk::compress(&sizes_plain, 1).unwrap());
    let mut data = vec![b'z'];
    common::varint(sizes.len() as u64, &mut data);
    data.extend_from_slice(&sizes);
    common::varint(total, &mut data);
    for _ in 0..16 {
        data.extend_from_slice(&frame);
    }
    let mut file = common::signature();
    common::append_chunk(&mut file, &data, b'r', 1, total);
    (file, total)
}

#[test]
fn sixteen_gib_is_refused_before_decoding() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (file, total) = sixteen_gib_file();
    assert!(file.len() < 1 << 20, "the bomb is {} bytes", file.len());
    let mut reader = RecordReader::from_bytes(Bytes::from(file), "bomb16.cpb").unwrap();
    assert_eq!(reader.declared_record_bytes().unwrap(), total);
    assert_eq!(reader.record_len_at(64).unwrap(), total);
    let (result, peak) = peak_of(|| reader.read_record_at(64));
    let e = result.unwrap_err();
    assert!(is_limit(&e, DecodeLimitKind::Chunk), "{e}");
    assert!(peak < STREAMING, "held {peak} bytes");
    let (result, peak) = peak_of(|| reader.last_record());
    assert!(is_limit(&result.unwrap_err(), DecodeLimitKind::Chunk));
    assert!(peak < STREAMING, "held {peak} bytes");
    // Even a caller that raised the budget for all held data cannot pass the chunk limit
    // without raising it too.
    reader.set_decode_limits(DecodeLimits {
        budget: u64::MAX,
        ..DecodeLimits::default()
    });
    let (result, peak) = peak_of(|| reader.read_record_at(64));
    assert!(is_limit(&result.unwrap_err(), DecodeLimitKind::Chunk));
    assert!(peak < STREAMING, "held {peak} bytes");
    assert!(high_water_mark_ok());
}

#[test]
fn a_record_of_a_chunk_of_many_is_streamed() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 1 GiB in 1024 records of one chunk.
    let (file, positions) = many_record_bomb(1024);
    let mut reader = RecordReader::from_bytes(Bytes::from(file), "many.cpb").unwrap();
    reader.set_decode_limits(BUDGET_256_MIB);
    assert!(is_limit(
        &reader.read_record_at(positions[3]).unwrap_err(),
        DecodeLimitKind::Held
    ));
    for &pos in [positions[0], positions[700], positions[1023]].iter() {
        let (result, peak) = peak_of(|| {
            let mut out = ZeroCounter::default();
            reader.copy_record_to(pos, &mut out).map(|n| (n, out.0))
        });
        assert_eq!(result.unwrap(), (MIB as u64, MIB as u64));
        assert!(peak < STREAMING, "copy_record_to held {peak} bytes");
    }
    let (result, peak) = peak_of(|| reader.check_chunk(positions[0]));
    assert_eq!(result.unwrap(), vec![MIB as u64; 1024]);
    assert!(peak < STREAMING + 1024 * 8, "check_chunk held {peak} bytes");
}

#[test]
fn held_data_is_bounded_and_limits_can_be_raised() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Eight chunks of 4 MiB each (one record of zeros per chunk), a file of a few KB.
    let zeros = vec![0u8; 4 * MIB];
    let options = WriterOptions {
        compression: Compression::Zstd { level: 1 },
        chunk_size: None,
        store_incompressible: false,
    };
    let mut w = RecordWriter::new(Vec::new(), options).unwrap();
    let positions: Vec<u64> = (0..8).map(|_| w.write_record(&zeros).unwrap()).collect();
    let file = Bytes::from(w.finish().unwrap());
    let tight = DecodeLimits {
        max_chunk: 8 * MIB as u64,
        budget: 10 * MIB as u64,
    };
    let mut reader = RecordReader::from_bytes(file.clone(), "held.cpb").unwrap();
    reader.set_decode_limits(tight);
    // Records handed out keep their decoded chunk alive: two fit in 10 MiB, a third does not.
    let a = reader.read_record_at(positions[0]).unwrap().1;
    let b = reader.read_record_at(positions[1]).unwrap().1;
    assert_eq!(reader.decoded_bytes_held(), 8 * MIB as u64);
    let e = reader.read_record_at(positions[2]).unwrap_err();
    assert!(is_limit(&e, DecodeLimitKind::Held), "{e}");
    // Letting go of one makes room again.
    drop(a);
    assert_eq!(
        reader.read_record_at(positions[2]).unwrap().1.len(),
        4 * MIB
    );
    drop(b);
    // The cache alone never blocks reading the next chunk.
    for &p in &positions {
        assert_eq!(reader.read_record_at(p).unwrap().1.len(), 4 * MIB);
    }
    // A caller that knows what it needs raises the limits.
    let mut reader = RecordReader::from_bytes(file, "held.cpb").unwrap();
    reader.set_decode_limits(DecodeLimits::unlimited());
    let all: Vec<Bytes> = positions
        .iter()
        .map(|&p| reader.read_record_at(p).unwrap().1)
        .collect();
    assert_eq!(reader.decoded_bytes_held(), 32 * MIB as u64);
    drop(all);
    // The cache still holds the last chunk read.
    assert_eq!(reader.decoded_bytes_held(), 4 * MIB as u64);
}

/// A simple chunk whose (Zstd) sizes buffer truthfully holds 256 MiB of zeros for one record:
/// refused from its declared size, before it is decompressed.
#[test]
fn a_bomb_in_the_sizes_buffer_is_refused_unopened() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let zeros = vec![0u8; MIB];
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    for _ in 0..256 {
        enc.write_all(&zeros).unwrap();
    }
    let compressed = enc.finish().unwrap();
    let mut sizes = Vec::new();
    common::varint(256 * MIB as u64, &mut sizes);
    sizes.extend_from_slice(&compressed);
    let mut data = vec![b'z'];
    common::varint(sizes.len() as u64, &mut data);
    data.extend_from_slice(&sizes);
    common::varint(0, &mut data); // values: 0 bytes declared
    data.extend_from_slice(&zstd::bulk::compress(&[], 1).unwrap());
    assert!(data.len() < 60_000);
    let file = common::file_with_chunk(&data, b'r', 1, 0, None);
    let reader = RecordReader::from_bytes(Bytes::from(file), "sizes.cpb").unwrap();
    let (results, peak) = peak_of(|| {
        [
            reader.read_record_at(64).map(|_| ()),
            reader.record_len_at(64).map(|_| ()),
            reader.copy_record_to(64, &mut std::io::sink()).map(|_| ()),
            reader.check_chunk(64).map(|_| ()),
        ]
    });
    for r in results {
        let e = r.unwrap_err();
        assert!(
            e.to_string().contains("more than 1 record sizes can take"),
            "{e}"
        );
    }
    assert!(peak < STREAMING, "held {peak} bytes");
}

//! Files claiming absurd sizes must not make the reader allocate them: this
//! test binary counts the largest single allocation.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use common::*;
use unbound_records::RecordReader;

struct Tracking;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Tracking = Tracking;

/// Simple chunk data compressed with `ct` whose values buffer declares
/// `declared` bytes but holds only a few.
fn lying_chunk(ct: u8, declared: u64) -> Vec<u8> {
    let mut d = vec![ct];
    let mut sizes = Vec::new();
    varint(10, &mut sizes); // sizes buffer: 10 bytes decompressed
    sizes.extend_from_slice(&noise(3, 12));
    varint(sizes.len() as u64, &mut d);
    d.extend_from_slice(&sizes);
    varint(declared, &mut d);
    d.extend_from_slice(&noise(4, 200));
    d
}

#[test]
fn absurd_sizes_do_not_allocate() {
    let mut files = Vec::new();
    for ct in [b'b', b'z', b's'] {
        files.push(file_with_chunk(
            &lying_chunk(ct, 1 << 40),
            b'r',
            1,
            1 << 40,
            None,
        ));
    }
    files.push(file_with_chunk(
        &simple_uncompressed(&[1 << 50], b"x"),
        b'r',
        1,
        1 << 50,
        None,
    ));
    files.push(file_with_chunk(b"abc", b'r', 1, 3, Some(1 << 45)));
    // Transposed chunk with huge bucket/buffer counts and decoded size.
    let mut header = Vec::new();
    varint(3, &mut header);
    varint(1 << 30, &mut header);
    let mut t = vec![0u8];
    varint(header.len() as u64, &mut t);
    t.extend_from_slice(&header);
    files.push(file_with_chunk(&t, b't', 5, 1 << 40, None));
    // Brotli stream with a 16 MiB window but tiny content is fine; a
    // large-window stream is refused.
    let mut lw = vec![b'b'];
    varint(1, &mut lw);
    lw.push(0);
    varint(1 << 30, &mut lw);
    lw.extend_from_slice(&[0x11, 0x3e, 0x00, 0x00, 0x00, 0x00]);
    files.push(file_with_chunk(&lw, b'r', 1, 1 << 30, None));

    LARGEST.store(0, Ordering::Relaxed);
    for f in files {
        let r = RecordReader::from_bytes(Bytes::from(f), "huge").expect("signature");
        assert!(r.read_record_at(64).is_err());
        assert!(r.copy_record_to(64, &mut std::io::sink()).is_err());
        let _ = r.record_len_at(64);
        let _ = r.last_record();
    }
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(largest < 8 << 20, "largest allocation {largest} bytes");
}

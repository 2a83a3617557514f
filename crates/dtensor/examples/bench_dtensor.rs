//! Times unpack, pack and relayout of a float32 array on an 8-device mesh against one
//! `memcpy` of the same size, in the same run.
//!
//! ```text
//! cargo run --release -p unbound-dtensor --example bench_dtensor -- [MiB]   (default 1024)
//! ```
//!
//! Prints one JSON object per line: `{"op": ..., "seconds": ..., "gib_per_s": ...,
//! "vs_memcpy": ...}` (best of five runs each). Operations that allocate their output are
//! compared with a memcpy into a fresh allocation (both pay the page faults); the `into
//! reused buffers` variants with a memcpy into an already-touched buffer.

use std::time::Instant;

use unbound_dtensor::{
    pack, pack_into, relayout, relayout_into, unpack, unpack_into, ByteBuffer, Chunking, HostArray,
    Layout, Sharding,
};

fn best<T>(runs: usize, mut f: impl FnMut() -> T) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..runs {
        let t = Instant::now();
        let out = f();
        best = best.min(t.elapsed().as_secs_f64());
        drop(out);
    }
    best
}

fn report(op: &str, seconds: f64, bytes: usize, memcpy: f64) {
    println!(
        "{{\"op\": \"{op}\", \"seconds\": {seconds:.4}, \"gib_per_s\": {:.2}, \"vs_memcpy\": {:.2}}}",
        bytes as f64 / seconds / (1u64 << 30) as f64,
        seconds / memcpy
    );
}

fn main() {
    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1024);
    let bytes = mib << 20;
    let side = ((bytes / 4) as f64).sqrt() as i64;
    let side = side - side % 8;
    let shape = vec![side, (bytes / 4) as i64 / side];
    let n = (shape[0] * shape[1]) as usize * 4;
    let data: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
    let global = HostArray::from_bytes(shape.clone(), 4, data).expect("shape fits");
    let mesh = "|x=2,y=4|*CPU";
    let layout = |specs: &str| {
        let l = Layout::parse(&format!("sharding_specs:{specs} mesh:{mesh}")).expect("layout");
        Sharding::from_layout(&l, Chunking::Even).expect("sharding")
    };
    let (xy, yx, x_) = (layout("x,y,"), layout("y,x,"), layout("x,unsharded,"));
    let src = global.bytes().expect("fixed-size");

    // One memcpy of the whole array into a fresh allocation (page faults included, as in
    // every allocating operation below; the buffer is mapped with huge pages advised, as the
    // operations' outputs are), into a plain fresh heap vector, and into an already-touched
    // buffer (pure bandwidth, the baseline of the `into reused buffers` variants).
    let memcpy = best(5, || {
        let mut dst = ByteBuffer::zeroed(n);
        dst.copy_from_slice(src);
        dst
    });
    let memcpy_vec = best(5, || {
        let mut dst = vec![0u8; n];
        dst.copy_from_slice(src);
        dst
    });
    let mut warm = vec![1u8; n];
    let memcpy_warm = best(5, || warm.copy_from_slice(src));
    eprintln!("array {shape:?} float32 ({} MiB) on mesh x=2,y=4", n >> 20);
    report("memcpy", memcpy, n, memcpy);
    report("memcpy_heap_vec", memcpy_vec, n, memcpy);
    report("memcpy_prefaulted", memcpy_warm, n, memcpy);

    report(
        "unpack x,y",
        best(5, || unpack(&global, &xy).expect("unpack")),
        n,
        memcpy,
    );
    report(
        "unpack x,unsharded (4 replicas per shard)",
        best(5, || unpack(&global, &x_).expect("unpack")),
        4 * n,
        memcpy,
    );
    let comps = unpack(&global, &xy).expect("unpack");
    report(
        "pack x,y",
        best(5, || pack(&comps, &xy, &shape).expect("pack")),
        n,
        memcpy,
    );
    report(
        "relayout x,y -> y,x",
        best(5, || relayout(&comps, &xy, &yx, &shape).expect("relayout")),
        n,
        memcpy,
    );
    // The same into outputs allocated (and touched) once, as a caller reusing buffers does.
    let mut parts = unpack(&global, &xy).expect("unpack");
    report(
        "unpack x,y into reused buffers",
        best(5, || unpack_into(&global, &xy, &mut parts).expect("unpack")),
        n,
        memcpy_warm,
    );
    let mut whole = global.clone();
    report(
        "pack x,y into a reused buffer",
        best(5, || pack_into(&comps, &xy, &mut whole).expect("pack")),
        n,
        memcpy_warm,
    );
    let mut moved = relayout(&comps, &xy, &yx, &shape).expect("relayout");
    report(
        "relayout x,y -> y,x into reused buffers",
        best(5, || {
            relayout_into(&comps, &xy, &yx, &shape, &mut moved).expect("relayout")
        }),
        n,
        memcpy_warm,
    );
    assert_eq!(
        pack(
            &relayout(&comps, &xy, &yx, &shape).expect("relayout"),
            &yx,
            &shape
        )
        .expect("pack"),
        global
    );
}

//! Times the encoder on a serialized message file: `encode_file FILE [TYPE]` (default type
//! `tensorflow.SavedModel`; with `ENCODE_TO_VEC_ONLY` set, only `encode_to_vec`, or with `VALIDATED` set too `encode_to_vec_validated`) prints the time of the first pass alone (the canonical check),
//! of a whole encoding to a counter, of one buffered whole (one pass), and of a whole encoding hashed, and the hash.

use std::time::Instant;

use unbound_canonical::sink::Count;
use unbound_canonical::{encode, encode_to_vec, fingerprint64, is_canonical, Schema};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(file), name) = (args.next(), args.next()) else {
        eprintln!("usage: encode_file FILE [TYPE]");
        std::process::exit(2);
    };
    let name = name.unwrap_or_else(|| "tensorflow.SavedModel".to_string());
    let bytes = std::fs::read(&file).expect("readable file");
    let desc = unbound_proto::descriptor_pool()
        .get_message_by_name(&name)
        .expect("a known type");
    let schema = Schema::new(&desc);
    let root = schema.root();
    if std::env::var_os("ENCODE_TO_VEC_ONLY").is_some() {
        let t = Instant::now();
        let validated = std::env::var_os("VALIDATED").is_some();
        let out = if validated {
            unbound_canonical::encode_to_vec_validated(&schema, root, &[&bytes])
        } else {
            encode_to_vec(&schema, root, &[&bytes])
        }
        .expect("encodes");
        println!(
            "encode_to_vec (validated: {validated}): {:.3} s ({} bytes, fingerprint64 {})",
            t.elapsed().as_secs_f64(),
            out.len(),
            unbound_canonical::farmhash::fingerprint64(&out)
        );
        return;
    }
    let t = Instant::now();
    let canonical = is_canonical(&schema, root, &bytes).expect("encodes");
    println!(
        "check: {:.3} s (canonical: {canonical})",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let mut count = Count::default();
    encode(&schema, root, &[&bytes], &mut count).expect("encodes");
    println!(
        "encode: {:.3} s ({} bytes)",
        t.elapsed().as_secs_f64(),
        count.0
    );
    let t = Instant::now();
    let out = encode_to_vec(&schema, root, &[&bytes]).expect("encodes");
    println!(
        "encode_to_vec: {:.3} s ({} bytes)",
        t.elapsed().as_secs_f64(),
        out.len()
    );
    drop(out);
    let t = Instant::now();
    let hash = fingerprint64(&schema, root, &[&bytes]).expect("encodes");
    println!("fingerprint64: {:.3} s ({hash})", t.elapsed().as_secs_f64());
}

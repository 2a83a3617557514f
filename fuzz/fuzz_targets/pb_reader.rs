//! Arbitrary bytes as a `saved_model.pb`, read the way the library reads one: parsed one level
//! deep as a `tensorflow.SavedModel` wire message (`unbound_chunked::read_pb` without the
//! file), then navigated: every field the schema says is a message is expanded, recursively,
//! down to the nesting limit, as `show`, `fingerprint` and the graph rewrites do when they
//! look inside; then serialized. Must never panic, hang or allocate beyond what the input can
//! hold; errors are fine. What parses must serialize to exactly `encoded_len` bytes, and
//! serializing is a fixed point: the bytes written parse and serialize to themselves.
//!
//! `show` and `verify` (its compiled schema check, the fingerprint's canonical fast path on a
//! second thread) also read it from a file (errors are fine, panics are not); a model verify
//! passes must fingerprint.
//!
//! Seed it with `testdata/models/*/saved_model.pb`.

#![no_main]

use std::sync::OnceLock;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use prost_reflect::{Kind, MessageDescriptor};
use unbound_chunked::merger::MAX_NESTING;
use unbound_wire::{WireMessage, WireValue};

fn saved_model() -> &'static MessageDescriptor {
    static DESC: OnceLock<MessageDescriptor> = OnceLock::new();
    DESC.get_or_init(|| {
        unbound_proto::descriptor_pool()
            .get_message_by_name("tensorflow.SavedModel")
            .unwrap()
    })
}

/// Expands every message-typed field of `m` (of type `desc`), recursively; stops at the first
/// field that does not parse (as a reader would report it) or past the nesting limit.
fn expand(m: &mut WireMessage, desc: &MessageDescriptor, depth: usize, budget: &mut u32) {
    if depth > MAX_NESTING {
        return;
    }
    for pos in 0..m.fields.len() {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        let number = m.fields[pos].number;
        let Some(fd) = desc.get_field(number) else {
            continue;
        };
        let Kind::Message(sub) = fd.kind() else {
            continue;
        };
        if !matches!(m.fields[pos].value, WireValue::Bytes(_) | WireValue::Message(_)) {
            continue;
        }
        match m.expand_at(pos, &sub) {
            Ok(child) => expand(child, &sub, depth + 1, budget),
            Err(_) => return,
        }
    }
}

/// A directory holding the input as `saved_model.pb`, for `show` (which maps the file and
/// scans its GraphDefs in place, releasing the pages it passes).
fn show_dir() -> &'static std::path::Path {
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("unbound-fuzz-show-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    std::fs::write(show_dir().join("saved_model.pb"), data).unwrap();
    let _ = unbound_savedmodel::show::show(show_dir());
    let verified = unbound_savedmodel::verify::verify_dir(show_dir());
    // Verify skips the hashes of a canonical model with no fingerprint.pb to compare: what it
    // passes, `fingerprint` must compute.
    if verified.faults.is_empty() {
        if let Err(e) = unbound_savedmodel::fingerprint::fingerprint_dir(show_dir()) {
            panic!("verify passes a model fingerprint refuses: {e}");
        }
    }
    let bytes = Bytes::copy_from_slice(data);
    let Ok(mut message) = WireMessage::parse(&bytes, Some(saved_model().clone())) else {
        return;
    };
    let mut budget = 100_000;
    expand(&mut message, saved_model(), 0, &mut budget);
    let Ok(written) = message.to_vec() else {
        return;
    };
    assert_eq!(written.len() as u64, message.encoded_len(), "encoded_len is exact");
    let again = WireMessage::parse(&Bytes::from(written.clone()), Some(saved_model().clone()))
        .expect("what was written parses");
    assert_eq!(again.to_vec().expect("serializes"), written, "a fixed point");
});

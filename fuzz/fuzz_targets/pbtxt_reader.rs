//! Arbitrary bytes as a `saved_model.pbtxt`, read as the library reads one
//! (`unbound_savedmodel::dir::read_text`: nesting bounded before prost-reflect's recursive
//! text parser runs, then parsed and re-read as a wire message). Must never panic or
//! overflow the stack, however deep the braces nest; errors are fine.
//!
//! Seed it with `unbound proto` text of the test models, and with deeply nested text.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use prost_reflect::MessageDescriptor;

fn saved_model() -> &'static MessageDescriptor {
    static DESC: OnceLock<MessageDescriptor> = OnceLock::new();
    DESC.get_or_init(|| {
        unbound_proto::descriptor_pool()
            .get_message_by_name("tensorflow.SavedModel")
            .unwrap()
    })
}

fn file() -> &'static std::path::Path {
    static FILE: OnceLock<std::path::PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        std::env::temp_dir().join(format!("unbound-fuzz-pbtxt-{}.pbtxt", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    std::fs::write(file(), data).unwrap();
    let _ = unbound_savedmodel::dir::read_text(file(), saved_model());
});

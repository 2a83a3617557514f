//! Arbitrary bytes as a graph-optimizer plugin file, checked the way `optimize --plugin`
//! checks one before the dynamic loader sees it (`unbound_grappler::elf`): the ELF header, the
//! program and section header tables and every segment and section must lie inside the file.
//! Must never panic, hang or read outside the input; a refusal is fine. What the check accepts
//! must still be accepted with bytes appended (a longer file only holds more).
//!
//! Seed it with shared objects: the example plugins
//! (`target/release/libunbound_plugin_*.so`) and a few system libraries.

#![no_main]

use libfuzzer_sys::fuzz_target;
use unbound_grappler::elf::check_shared_object_bytes;

fuzz_target!(|data: &[u8]| {
    if check_shared_object_bytes(data).is_ok() {
        let mut longer = data.to_vec();
        longer.extend_from_slice(&[0; 64]);
        assert!(
            check_shared_object_bytes(&longer).is_ok(),
            "accepted, but refused with bytes appended"
        );
    }
});

//! Arbitrary text as XLA HLO sharding text, read as `layout from-op-sharding` reads it
//! (`unbound_dtensor::parse_hlo_text`, whose tuples nest at most `MAX_SHARDING_DEPTH` deep,
//! refused while parsing), then converted to layouts on an invented mesh with a small rank
//! from the first byte. Must never panic, overflow the stack, hang or allocate beyond what
//! the input holds. What parses prints as text that parses to the same printing.
//!
//! Seed it with the shardings of `testdata/dtensor/op_sharding.json`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use unbound_dtensor::{op_sharding_to_layouts, parse_hlo_text, to_hlo_text};

fuzz_target!(|data: &[u8]| {
    let Some((&rank, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let Ok(sharding) = parse_hlo_text(text) else {
        return;
    };
    let printed = to_hlo_text(&sharding);
    let again = parse_hlo_text(&printed).expect("what is printed parses");
    assert_eq!(to_hlo_text(&again), printed, "printing is a fixed point");
    let _ = op_sharding_to_layouts(&sharding, None, Some(usize::from(rank % 8)));
});

//! Arbitrary bytes streamed into `unbound_wire::FieldsApart` in pieces cut where the input's
//! first bytes say: it must never panic, and must set apart exactly what a whole read with
//! `read_field` keeps (every field but length-delimited field 1), or give up exactly where
//! that read fails or meets a group.

#![no_main]

use libfuzzer_sys::fuzz_target;
use unbound_wire::{fields_apart_of, FieldsApart};

fuzz_target!(|data: &[u8]| {
    let Some((&cuts, message)) = data.split_first() else {
        return;
    };
    let mut apart = FieldsApart::new(1, usize::MAX);
    let mut rest = message;
    let step = usize::from(cuts % 17) + 1;
    while !rest.is_empty() {
        let n = step.min(rest.len());
        apart.update(&rest[..n]);
        rest = &rest[n..];
    }
    assert_eq!(apart.finish(), fields_apart_of(message, 1));
});

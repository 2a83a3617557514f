//! Arbitrary bytes as a `.npy` file's header, read as `layout unpack` and `pack` read one
//! (`unbound_bundle::npy::parse_npy_header`: the dictionary parsed as NumPy's
//! `ast.literal_eval` would, or refused). Must never panic, hang or recurse; what is read
//! must be what the writer writes again: the header `unbound_bundle::npy::header` makes of
//! the descriptor and shape read parses to the same descriptor and shape.
//!
//! Seed it with headers NumPy writes (`np.save` of a few arrays) and with ones that repeat
//! `shape` or `descr`.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use unbound_bundle::npy::{header, parse_npy_header};

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.npy");
    let Ok((descr, shape, start)) = parse_npy_header(data, path) else {
        return;
    };
    assert!(start <= data.len());
    assert!(shape.iter().all(|&d| d >= 0));
    let Ok(again) = header(&descr, &shape) else {
        return;
    };
    let (d2, s2, _) = parse_npy_header(&again, path).expect("what the writer writes is read");
    assert_eq!((d2, s2), (descr, shape), "the header read is the header written");
});

//! The util C API is reachable by name from code loaded into a host process, as a plugin's
//! undefined `TF_*` references need it to be.

use std::ffi::CString;

#[test]
fn every_exported_function_resolves_by_name_to_our_definition() {
    let table = unbound_grappler::exports::exported_symbols();
    assert!(table.len() >= 18);
    for (name, address) in table {
        let c_name = CString::new(name).unwrap();
        // SAFETY: dlsym with RTLD_DEFAULT and a valid C string.
        let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c_name.as_ptr()) };
        assert_eq!(
            found as usize, address,
            "{name} is not exported from the executable"
        );
    }
}

//! Puts the util C API that `unbound-grappler` implements (every `TF_*` function) into the
//! `unbound` executable's dynamic symbol table, so graph-optimizer plugins loaded by
//! `unbound optimize` resolve their `TF_*` references to it.

fn main() {
    println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic-symbol=TF_*");
}

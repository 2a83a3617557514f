//! Exports the fake `TF_*` functions of `testing` from this package's test executables, so the
//! SDK finds them with `dlsym(RTLD_DEFAULT, ...)` as it finds a host's.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-arg-tests=-Wl,--export-dynamic-symbol=TF_*");
}

//! Exports the fake host's `TF_*` functions (`unbound_grappler_sdk::testing`) from this
//! package's test executables, where the plugin loaded with `libloading` finds them.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-arg-tests=-Wl,--export-dynamic-symbol=TF_*");
}

//! Builds the shim libraries (see `shim/shim.c`): one empty shared object per TensorFlow
//! library soname a plugin may name as needed, embedded into the crate with `include_bytes!`.
//! Also exports the util C API from this package's test executables (the `unbound` binary does
//! the same in its own build script).

use std::path::PathBuf;
use std::process::Command;

/// The sonames plugins built against TensorFlow 2.x are linked with.
const SONAMES: [&str; 5] = [
    "libtensorflow_framework.so.2",
    "libtensorflow_cc.so.2",
    "_pywrap_tensorflow_internal.so",
    "libtensorflow.so.2",
    "lib_pywrap_tensorflow_common.so",
];

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let source = PathBuf::from("shim/shim.c");
    let map = PathBuf::from("shim/shim.map");
    println!("cargo:rerun-if-changed=shim/shim.c");
    println!("cargo:rerun-if-changed=shim/shim.map");
    let compiler = cc::Build::new().get_compiler();
    let mut list = String::new();
    for (i, soname) in SONAMES.iter().enumerate() {
        let file = out.join(format!("shim{i}.so"));
        let status = Command::new(compiler.path())
            .args(["-shared", "-fPIC", "-O2", "-nostdlib"])
            .arg(format!("-Wl,-soname,{soname}"))
            .arg(format!("-Wl,--version-script={}", map.display()))
            .arg("-o")
            .arg(&file)
            .arg(&source)
            .status()
            .expect("running the C compiler for the TensorFlow shim libraries");
        assert!(
            status.success(),
            "building the shim library {soname} failed"
        );
        list.push_str(&format!(
            "({soname:?}, include_bytes!({:?})),\n",
            file.display().to_string()
        ));
    }
    std::fs::write(out.join("shims.rs"), format!("[\n{list}]\n")).expect("writing shims.rs");
    println!("cargo:rustc-link-arg-tests=-Wl,--export-dynamic-symbol=TF_*");
    println!("cargo:rustc-link-arg-examples=-Wl,--export-dynamic-symbol=TF_*");
}

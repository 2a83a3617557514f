//! Builds the C test plugins in `tests/plugins/` (graph optimizer plugins for
//! `unbound optimize`) with the system C compiler: `$CC`, or `cc`
//! ([`unbound_test_support::cc`]).

use std::path::{Path, PathBuf};

use unbound_test_support::cc::{cached, compile_shared};

/// The directory holding the plugin sources and their headers.
pub fn plugin_source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins")
}

fn out_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-plugins");
    std::fs::create_dir_all(dir.join("tf-stubs")).expect("create the plugin output directory");
    dir
}

/// Compiles `tests/plugins/<source>.c` into the shared object `out` with `extra` arguments
/// (after the source, so libraries link).
fn compile(source: &str, out: &Path, extra: &[&str]) {
    let src_dir = plugin_source_dir();
    compile_shared(&src_dir.join(format!("{source}.c")), &src_dir, out, extra);
}

/// Compiles `tests/plugins/<name>.c` into `<name>.so` and returns its path. The plugin has no
/// needed libraries: its TF_* symbols resolve to the `unbound` executable's exports.
pub fn build_plugin(name: &str) -> PathBuf {
    cached(name, || {
        let out = out_dir().join(format!("{name}.so"));
        compile(name, &out, &[]);
        out
    })
}

/// Compiles `tests/plugins/tf_linked.c` the way plugins built against TensorFlow are linked:
/// against stand-ins for libtensorflow_framework.so.2 and libtensorflow_cc.so.2 (whose util
/// symbols carry the version "tensorflow"), without an rpath, so the stand-ins are not found
/// at run time and the host's shims have to take their place.
pub fn build_tf_linked_plugin() -> PathBuf {
    cached("tf_linked", || {
        let stubs = out_dir().join("tf-stubs");
        let stubs_arg = format!("-L{}", stubs.display());
        let framework = "libtensorflow_framework.so.2";
        let cc_lib = "libtensorflow_cc.so.2";
        let soname = |name: &str| format!("-Wl,-soname,{name}");
        let map = plugin_source_dir().join("tf_stub.map");
        let version_script = format!("-Wl,--version-script={}", map.display());
        compile(
            "tf_stub",
            &stubs.join(framework),
            &["-DTF_STUB_FRAMEWORK", &soname(framework)],
        );
        compile(
            "tf_stub",
            &stubs.join(cc_lib),
            &[&soname(cc_lib), &version_script],
        );
        let out = out_dir().join("tf_linked.so");
        let needed = [format!("-l:{framework}"), format!("-l:{cc_lib}")];
        compile("tf_linked", &out, &[&stubs_arg, &needed[0], &needed[1]]);
        out
    })
}

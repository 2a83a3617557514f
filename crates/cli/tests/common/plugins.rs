//! Builds the C test plugins in `tests/plugins/` (graph optimizer plugins for
//! `unbound optimize`) with the system C compiler: `$CC`, or `cc`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The directory holding the plugin sources and their headers.
pub fn plugin_source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins")
}

/// Compiles `tests/plugins/<name>.c` into `<name>.so` and returns its path. Each plugin is
/// compiled once per test process; concurrent test processes do not see half-written files
/// (each compiles to a private name, then renames).
pub fn build_plugin(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(path) = built.get(name) {
        return path.clone();
    }
    let src_dir = plugin_source_dir();
    let source = src_dir.join(format!("{name}.c"));
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-plugins");
    std::fs::create_dir_all(&out_dir).expect("create the plugin output directory");
    let out = out_dir.join(format!("{name}.so"));
    let tmp = out_dir.join(format!("{name}.so.{}.tmp", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let result = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O1", "-Wall", "-Wextra"])
        .arg("-I")
        .arg(&src_dir)
        .arg("-o")
        .arg(&tmp)
        .arg(&source)
        .output()
        .unwrap_or_else(|e| panic!("running the C compiler `{cc}`: {e}"));
    assert!(
        result.status.success(),
        "compiling {}: {}\n{}",
        source.display(),
        result.status,
        String::from_utf8_lossy(&result.stderr)
    );
    std::fs::rename(&tmp, &out).expect("move the built plugin into place");
    built.insert(name.to_string(), out.clone());
    out
}

//! Compiling C sources (test graph-optimizer plugins and stand-in libraries) into shared
//! objects with the system C compiler: `$CC`, or `cc`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// Returns the path `build` made for `key`, running `build` once per process.
pub fn cached(key: &str, build: impl FnOnce() -> PathBuf) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    built.entry(key.to_string()).or_insert_with(build).clone()
}

/// Compiles `source` into the shared object `out` (`-shared -fPIC -O1 -Wall -Wextra`, headers
/// from `include_dir`) with `extra` arguments after the source, so libraries link. Concurrent
/// processes do not see half-written files: each compiles to a private name, then renames.
/// Panics when the compiler cannot run or fails.
pub fn compile_shared(source: &Path, include_dir: &Path, out: &Path, extra: &[&str]) {
    let tmp = out.with_extension(format!("{}.tmp", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let result = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O1", "-Wall", "-Wextra"])
        .arg("-I")
        .arg(include_dir)
        .arg("-o")
        .arg(&tmp)
        .arg(source)
        .args(extra)
        .output()
        .unwrap_or_else(|e| panic!("running the C compiler `{cc}`: {e}"));
    assert!(
        result.status.success(),
        "compiling {}: {}\n{}",
        source.display(),
        result.status,
        String::from_utf8_lossy(&result.stderr)
    );
    std::fs::rename(&tmp, out).expect("move the built plugin into place");
}

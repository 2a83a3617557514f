//! Stand-ins for TensorFlow's libraries, so plugins linked against them load unmodified.
//!
//! A plugin built against TensorFlow usually names `libtensorflow_framework.so.2` (and perhaps
//! `libtensorflow_cc.so.2` or `_pywrap_tensorflow_internal.so`) as needed libraries. The
//! dynamic linker satisfies a needed library by soname from the libraries already loaded, so
//! before the first plugin is loaded the host loads one empty shim per soname (built from
//! `shim/shim.c`). The plugin's `TF_*` references then resolve to the host's own exports.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// (soname, shared object bytes) of every shim.
const SHIMS: &[(&str, &[u8])] = &include!(concat!(env!("OUT_DIR"), "/shims.rs"));

/// Why the shims could not be loaded (the host warns and goes on: a plugin that needs no
/// TensorFlow library loads without them). The causes are shared, so that the one error of a
/// process can be returned by every call.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ShimError {
    /// The private directory for the shim files could not be created.
    #[error("creating {}: {source}", dir.display())]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: Arc<std::io::Error>,
    },
    /// A shim file could not be written.
    #[error("writing the shim {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Arc<std::io::Error>,
    },
    /// The dynamic linker refused a shim.
    #[error("loading the shim {soname}: {source}")]
    Load {
        /// The shim's soname.
        soname: &'static str,
        /// Why.
        source: Arc<libloading::Error>,
    },
}

/// Loads the shims once per process. Errors are returned (and repeated on later calls) rather
/// than fatal: a plugin that needs no TensorFlow library loads without them.
pub fn ensure_loaded() -> Result<(), ShimError> {
    static LOADED: OnceLock<Result<(), ShimError>> = OnceLock::new();
    LOADED.get_or_init(load_all).clone()
}

/// Writes every shim to a private directory and loads it, then removes the directory.
fn load_all() -> Result<(), ShimError> {
    let dir = private_dir()?;
    let result = (|| {
        for (soname, bytes) in SHIMS {
            let path = dir.join(soname);
            std::fs::write(&path, bytes).map_err(|e| ShimError::Write {
                path: path.clone(),
                source: Arc::new(e),
            })?;
            // SAFETY: the shim has no initializers and defines one data symbol.
            let library =
                unsafe { libloading::os::unix::Library::open(Some(&path), libc::RTLD_NOW) }
                    .map_err(|e| ShimError::Load {
                        soname,
                        source: Arc::new(e),
                    })?;
            // Kept loaded for the life of the process: its soname must stay registered.
            std::mem::forget(library);
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// A new directory only this process writes to, for the shim files (removed once loaded).
fn private_dir() -> Result<PathBuf, ShimError> {
    let base = std::env::temp_dir();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = base.join(format!(".unbound-shims-{}-{nanos}", std::process::id()));
    std::fs::create_dir(&dir).map_err(|e| ShimError::CreateDir {
        dir: dir.clone(),
        source: Arc::new(e),
    })?;
    Ok(dir)
}

//! Atomic file output: write to a temporary name beside the target, sync, then rename, so an
//! interrupted run never leaves a partial file under the final name.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{ChunkedError, Result};

/// Temporary paths being written right now, so an interrupted process can remove them
/// ([`remove_temporaries`], called from the CLI's signal handler).
static IN_PROGRESS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Marks `path` as a temporary output being written.
pub fn register_temporary(path: &Path) {
    if let Ok(mut list) = IN_PROGRESS.lock() {
        list.push(path.to_path_buf());
    }
}

/// Unmarks `path` (renamed into place or removed).
pub fn unregister_temporary(path: &Path) {
    if let Ok(mut list) = IN_PROGRESS.lock() {
        list.retain(|p| p != path);
    }
}

/// Removes every temporary output still being written: for a signal handler, before exiting.
pub fn remove_temporaries() {
    if let Ok(list) = IN_PROGRESS.lock() {
        for p in list.iter() {
            if p.is_dir() {
                let _ = fs::remove_dir_all(p);
            } else {
                let _ = fs::remove_file(p);
            }
        }
    }
}

/// A temporary path in the same directory as `path` (so the final rename stays on one
/// filesystem), unique to this process and moment.
pub fn temp_path_for(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    path.with_file_name(format!(
        ".{name}.unbound-tmp-{}-{nanos}",
        std::process::id()
    ))
}

/// Writes `path` atomically: `write` fills a buffered temporary file, which is then flushed,
/// synced and renamed over `path`. On any error the temporary file is removed and `path` is
/// left as it was.
pub fn write_atomically<T>(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> Result<T>,
) -> Result<T> {
    let tmp = temp_path_for(path);
    register_temporary(&tmp);
    let result = (|| {
        let file = File::create(&tmp).map_err(|e| ChunkedError::io(&tmp, e))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let value = write(&mut out)?;
        let file = out
            .into_inner()
            .map_err(|e| ChunkedError::io(&tmp, e.into_error()))?;
        file.sync_all().map_err(|e| ChunkedError::io(&tmp, e))?;
        drop(file);
        fs::rename(&tmp, path).map_err(|e| ChunkedError::io(path, e))?;
        sync_parent(path);
        Ok(value)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    unregister_temporary(&tmp);
    result
}

/// Syncs the directory holding `path` so a rename is durable. Best effort: some filesystems
/// refuse to sync directories, which does not make the write less atomic.
pub fn sync_parent(path: &Path) {
    if let Some(dir) = path.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
}

/// Adapts a writer so errors name `path`.
pub fn io_err(path: &Path) -> impl Fn(std::io::Error) -> ChunkedError + '_ {
    move |e| ChunkedError::io(path, e)
}

/// Flushes a writer, naming `path` on failure.
pub fn flush(out: &mut dyn Write, path: &Path) -> Result<()> {
    out.flush().map_err(io_err(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_write_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.pb");
        fs::write(&target, b"old").unwrap();
        let err = write_atomically(&target, |w| {
            w.write_all(b"partial").unwrap();
            Err::<(), _>(ChunkedError::metadata("test", "interrupted"))
        });
        assert!(err.is_err());
        assert_eq!(fs::read(&target).unwrap(), b"old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn successful_write_replaces_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.pb");
        write_atomically(&target, |w| w.write_all(b"new").map_err(io_err(&target))).unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"new");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}

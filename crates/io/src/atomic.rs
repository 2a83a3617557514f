//! Atomic output: write to a temporary name beside the target, sync, then rename, so an
//! interrupted run never leaves a partial file or directory under the final name.

use std::fs::{self, File};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::IoError;

/// Size of the write buffer [`write_atomically`] puts in front of its temporary file.
pub const BUFFER_SIZE: usize = 1 << 20;

/// Temporary paths being written right now, so an interrupted process can remove them
/// ([`remove_temporaries`], called from the CLI's signal handler).
static IN_PROGRESS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn register(path: &Path) {
    let mut list = IN_PROGRESS.lock().unwrap_or_else(|e| e.into_inner());
    list.push(path.to_path_buf());
}

fn unregister(path: &Path) {
    let mut list = IN_PROGRESS.lock().unwrap_or_else(|e| e.into_inner());
    list.retain(|p| p != path);
}

fn remove_path(path: &Path) {
    if path.is_dir() {
        let _ = fs::remove_dir_all(path);
    } else {
        let _ = fs::remove_file(path);
    }
}

/// Removes every temporary output still being written: for a signal handler, before exiting.
pub fn remove_temporaries() {
    // Called from a handler thread (the CLI's `ctrlc` handler), not from inside a signal, so
    // waiting for a writer that holds the lock for a moment is safe.
    let list = IN_PROGRESS.lock().unwrap_or_else(|e| e.into_inner());
    list.iter().for_each(|p| remove_path(p));
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

/// A temporary file or directory that becomes `target` only when [`TempPath::persist`] is
/// called. Until then it is registered for [`remove_temporaries`]; dropped without persisting
/// (an error, a panic), it is removed. Use it when the output is a directory or is written by
/// several writers; [`write_atomically`] covers the common one-file case.
#[derive(Debug)]
pub struct TempPath {
    tmp: PathBuf,
    target: PathBuf,
    persisted: bool,
}

impl TempPath {
    /// Reserves a temporary name beside `target` (nothing is created yet).
    pub fn new(target: &Path) -> Self {
        let tmp = temp_path_for(target);
        register(&tmp);
        Self {
            tmp,
            target: target.to_path_buf(),
            persisted: false,
        }
    }

    /// Where to write.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// The final name.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Renames the temporary over the target and syncs the parent directory. The caller syncs
    /// the temporary's contents first (files: `File::sync_all`).
    pub fn persist(mut self) -> Result<(), IoError> {
        fs::rename(&self.tmp, &self.target).map_err(|e| IoError::os(&self.target, e))?;
        self.persisted = true;
        sync_parent(&self.target);
        Ok(())
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        if !self.persisted {
            remove_path(&self.tmp);
        }
        unregister(&self.tmp);
    }
}

/// Writes `path` atomically: `write` fills a buffered temporary file, which is then flushed,
/// synced and renamed over `path`. On any error the temporary file is removed and `path` is
/// left as it was. Generic over the caller's error type, which must wrap [`IoError`].
pub fn write_atomically<T, E: From<IoError>>(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> Result<T, E>,
) -> Result<T, E> {
    let tmp = TempPath::new(path);
    let file = File::create(tmp.path()).map_err(|e| IoError::os(tmp.path(), e))?;
    let mut out = BufWriter::with_capacity(BUFFER_SIZE, file);
    let value = write(&mut out)?;
    let file = out
        .into_inner()
        .map_err(|e| IoError::os(tmp.path(), e.into_error()))?;
    file.sync_all().map_err(|e| IoError::os(tmp.path(), e))?;
    drop(file);
    tmp.persist()?;
    Ok(value)
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

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::io_err;

    #[test]
    fn failed_write_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.pb");
        fs::write(&target, b"old").unwrap();
        let err = write_atomically(&target, |w| {
            w.write_all(b"partial").unwrap();
            Err::<(), _>(IoError::os("test", std::io::Error::other("interrupted")))
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

    #[test]
    fn temp_dir_is_removed_unless_persisted() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        {
            let tmp = TempPath::new(&target);
            fs::create_dir(tmp.path()).unwrap();
            fs::write(tmp.path().join("f"), b"x").unwrap();
        }
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        let tmp = TempPath::new(&target);
        fs::create_dir(tmp.path()).unwrap();
        tmp.persist().unwrap();
        assert!(target.is_dir());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn remove_temporaries_removes_what_is_in_progress() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = TempPath::new(&dir.path().join("x"));
        fs::write(tmp.path(), b"partial").unwrap();
        remove_temporaries();
        assert!(!tmp.path().exists());
    }
}

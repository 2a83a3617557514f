//! Read-only memory maps of input files.

use std::fs::File;
use std::path::Path;

use bytes::Bytes;

use crate::error::IoError;

/// The length of the regular file at `path` (symbolic links followed), or an error naming it
/// when it is missing or not a regular file. Looked up before opening, because opening a FIFO
/// for reading blocks until a writer appears.
pub fn regular_file_len(path: &Path) -> Result<u64, IoError> {
    let meta = std::fs::metadata(path).map_err(|e| IoError::os(path, e))?;
    let file_type = meta.file_type();
    if file_type.is_file() {
        return Ok(meta.len());
    }
    let kind = if file_type.is_dir() {
        "directory"
    } else if is_fifo(&file_type) {
        "FIFO"
    } else {
        "device or socket"
    };
    Err(IoError::NotRegularFile {
        path: path.to_path_buf(),
        kind,
    })
}

#[cfg(unix)]
fn is_fifo(file_type: &std::fs::FileType) -> bool {
    std::os::unix::fs::FileTypeExt::is_fifo(file_type)
}

#[cfg(not(unix))]
fn is_fifo(_: &std::fs::FileType) -> bool {
    false
}

/// Maps the whole regular file at `path` read-only as [`Bytes`]; slices of it are zero-copy
/// views that keep the map alive. An empty file gives empty bytes (nothing to map). Special
/// files are refused ([`regular_file_len`]).
pub fn map_file(path: &Path) -> Result<Bytes, IoError> {
    regular_file_len(path)?;
    let file = File::open(path).map_err(|e| IoError::os(path, e))?;
    let len = file.metadata().map_err(|e| IoError::os(path, e))?.len();
    if len == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: the mapping is read-only. As with every tool that maps its input, the file must
    // not be truncated by another process while the map (or a slice of it) is alive; unbound
    // never writes to a file it has mapped (outputs go to fresh temporaries).
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| IoError::os(path, e))?;
    Ok(Bytes::from_owner(map))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_a_file_and_an_empty_one() {
        let dir = tempfile::tempdir().unwrap();
        let full = dir.path().join("full");
        std::fs::write(&full, b"abc").unwrap();
        assert_eq!(&map_file(&full).unwrap()[..], b"abc");
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        assert!(map_file(&empty).unwrap().is_empty());
    }

    #[test]
    fn refuses_special_files_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let err = map_file(dir.path()).unwrap_err();
        assert!(
            matches!(
                err,
                IoError::NotRegularFile {
                    kind: "directory",
                    ..
                }
            ),
            "{err}"
        );
        let err = map_file(Path::new("/dev/zero")).unwrap_err();
        assert!(
            err.to_string().contains("/dev/zero: not a regular file"),
            "{err}"
        );
        let missing = dir.path().join("missing");
        let err = map_file(&missing).unwrap_err();
        assert!(
            err.to_string().starts_with(&missing.display().to_string()),
            "{err}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn refuses_a_fifo_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let status = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !status.is_ok_and(|s| s.success()) {
            return; // no mkfifo on this system: nothing to test
        }
        let err = map_file(&fifo).unwrap_err();
        assert!(
            matches!(err, IoError::NotRegularFile { kind: "FIFO", .. }),
            "{err}"
        );
    }
}

//! Opening input files by the one rule every command follows: a path names a regular file
//! once symbolic links are followed, checked before the file is opened (opening a FIFO for
//! reading blocks until a writer appears) and again on the opened handle (the path may have
//! been replaced in between); its size is known before anything is read, and nothing past it
//! is read.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::error::IoError;

/// The length of the regular file at `path` (symbolic links followed), or an error naming it
/// when it is missing or not a regular file. Looked up before opening, because opening a FIFO
/// for reading blocks until a writer appears.
pub fn regular_file_len(path: &Path) -> Result<u64, IoError> {
    let meta = std::fs::metadata(path).map_err(|e| IoError::os(path, e))?;
    check_regular(path, &meta)
}

/// Opens the regular file at `path` for reading (symbolic links followed) and returns it with
/// its length. A FIFO, device, socket or directory is refused by name before it is opened
/// ([`regular_file_len`]), and the opened file is checked again.
pub fn open_regular(path: &Path) -> Result<(File, u64), IoError> {
    regular_file_len(path)?;
    let file = File::open(path).map_err(|e| IoError::os(path, e))?;
    let meta = file.metadata().map_err(|e| IoError::os(path, e))?;
    let len = check_regular(path, &meta)?;
    Ok((file, len))
}

/// Reads the whole regular file at `path` ([`open_regular`]), refusing one larger than `max`
/// bytes before reading anything ([`IoError::TooLarge`]): for small inputs that are read,
/// not mapped (a serialized option, a header). Reads no more than the length it found, even
/// if the file grows meanwhile.
pub fn read_file(path: &Path, max: u64) -> Result<Vec<u8>, IoError> {
    let (file, len) = open_regular(path)?;
    if len > max {
        return Err(IoError::TooLarge {
            path: path.to_path_buf(),
            len,
            max,
        });
    }
    // Reserved, not allocated blindly: a sparse file of a terabyte is an error naming it, not
    // an abort on a failed allocation.
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(usize::try_from(len).unwrap_or(usize::MAX))
        .map_err(|_| {
            let fault = format!("{len} bytes do not fit in memory");
            IoError::os(
                path,
                std::io::Error::new(std::io::ErrorKind::OutOfMemory, fault),
            )
        })?;
    file.take(len)
        .read_to_end(&mut bytes)
        .map_err(|e| IoError::os(path, e))?;
    Ok(bytes)
}

/// `Ok(len)` when `meta` is a regular file's, else the error naming `path` and what it is.
fn check_regular(path: &Path, meta: &std::fs::Metadata) -> Result<u64, IoError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_small_file_and_refuses_a_large_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"hello").unwrap();
        assert_eq!(read_file(&path, 5).unwrap(), b"hello");
        let err = read_file(&path, 4).unwrap_err();
        assert!(
            matches!(err, IoError::TooLarge { len: 5, max: 4, .. }),
            "{err}"
        );
        assert!(err.to_string().starts_with(&path.display().to_string()));
    }

    #[test]
    fn follows_symlinks_to_regular_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, b"abc").unwrap();
        let link = dir.path().join("link");
        let zero = dir.path().join("zero");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&target, &link).unwrap();
            std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
            assert_eq!(open_regular(&link).unwrap().1, 3);
            let err = read_file(&zero, u64::MAX).unwrap_err();
            assert!(matches!(err, IoError::NotRegularFile { .. }), "{err}");
            assert!(
                err.to_string().contains("zero: not a regular file"),
                "{err}"
            );
        }
        let err = open_regular(dir.path()).unwrap_err();
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
    }
}

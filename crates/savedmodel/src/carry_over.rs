//! The files of a SavedModel directory other than its model, carried over into a copy
//! ([`copy_tree`]): variables, assets, anything unknown, byte for byte.
//!
//! Symbolic links follow the one rule of every input: one that leads to a regular file or a
//! directory is followed (a shared variable store, a build system's runfiles tree) and its
//! target copied; one that leads to anything else (a FIFO, a device, nothing) is refused,
//! naming it. A link back to a directory being copied (a loop) is refused too.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Result, SavedModelError};
use crate::format::{ModelFormat, FINGERPRINT_FILE};

/// Copies every file under `src` to `dst` (creating directories, following symbolic links),
/// skipping the model files and the fingerprint at the top level. Returns the number of files
/// copied.
pub(crate) fn copy_tree(src: &Path, dst: &Path) -> Result<usize> {
    copy_tree_except(src, dst, &[])
}

/// [`copy_tree`], also skipping the top-level entries named in `skip` (a `variables/` the
/// writer writes anew).
pub(crate) fn copy_tree_except(src: &Path, dst: &Path, skip: &[&str]) -> Result<usize> {
    let mut ancestors = vec![real_path(src)?];
    copy_dir(src, dst, Some(skip), &mut ancestors)
}

/// [`copy_tree`] of one directory; `ancestors` are the real paths of the directories being
/// copied, `src`'s last.
/// `skip` is `Some` (the top-level names not copied) for the top level only.
fn copy_dir(
    src: &Path,
    dst: &Path,
    skip: Option<&[&str]>,
    ancestors: &mut Vec<PathBuf>,
) -> Result<usize> {
    let top = skip.is_some();
    let mut copied = 0;
    let entries = fs::read_dir(src).map_err(|e| SavedModelError::io(src, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| SavedModelError::io(src, e))?;
        let name = entry.file_name();
        let name_str = name.to_string_lossy();
        let is_model_file = ModelFormat::SEARCH_ORDER
            .iter()
            .any(|f| f.file_name() == name_str);
        let skipped = skip.is_some_and(|skip| skip.contains(&name_str.as_ref()));
        if top && (is_model_file || name_str == FINGERPRINT_FILE || skipped) {
            continue;
        }
        let from = entry.path();
        let to = dst.join(&name);
        // What the entry is once symbolic links are followed.
        let kind = fs::metadata(&from)
            .map_err(|e| SavedModelError::io(&from, e))?
            .file_type();
        if kind.is_dir() {
            let real = real_path(&from)?;
            if ancestors.contains(&real) {
                return Err(SavedModelError::SymlinkLoop {
                    path: from,
                    target: real,
                });
            }
            // `create_dir`, not `create_dir_all`: should an interrupt take the temporary
            // directory away, this fails instead of bringing it back (`TempPath::create_dir`).
            fs::create_dir(&to).map_err(|e| SavedModelError::io(&to, e))?;
            ancestors.push(real);
            let result = copy_dir(&from, &to, None, ancestors);
            ancestors.pop();
            copied += result?;
        } else if kind.is_file() {
            fs::copy(&from, &to).map_err(|e| SavedModelError::io(&from, e))?;
            copied += 1;
        } else {
            // A FIFO, socket or device would block or stream forever: refuse it.
            return Err(SavedModelError::NotRegularFile { path: from });
        }
    }
    Ok(copied)
}

/// `path` with every symbolic link resolved, or an error naming it.
fn real_path(path: &Path) -> Result<PathBuf> {
    fs::canonicalize(path).map_err(|e| SavedModelError::io(path, e))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn follows_links_to_files_and_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("store");
        fs::create_dir(&store).unwrap();
        fs::write(store.join("variables.index"), b"index").unwrap();
        fs::write(tmp.path().join("asset.txt"), b"asset").unwrap();
        let src = tmp.path().join("src");
        fs::create_dir(&src).unwrap();
        fs::write(src.join("saved_model.pb"), b"model").unwrap();
        symlink(&store, src.join("variables")).unwrap();
        symlink(tmp.path().join("asset.txt"), src.join("extra.txt")).unwrap();
        let dst = tmp.path().join("dst");
        fs::create_dir(&dst).unwrap();
        assert_eq!(copy_tree(&src, &dst).unwrap(), 2);
        assert_eq!(
            fs::read(dst.join("variables/variables.index")).unwrap(),
            b"index"
        );
        assert!(!fs::symlink_metadata(dst.join("variables"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(dst.join("extra.txt")).unwrap(), b"asset");
        assert!(!dst.join("saved_model.pb").exists());
    }

    #[test]
    fn refuses_loops_and_special_targets_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        fs::create_dir_all(src.join("assets")).unwrap();
        symlink(&src, src.join("assets/loop")).unwrap();
        let dst = tmp.path().join("dst");
        fs::create_dir(&dst).unwrap();
        let err = copy_tree(&src, &dst).unwrap_err();
        assert!(matches!(err, SavedModelError::SymlinkLoop { .. }), "{err}");
        assert!(err.to_string().contains("assets/loop"), "{err}");

        fs::remove_file(src.join("assets/loop")).unwrap();
        symlink("/dev/zero", src.join("assets/zero")).unwrap();
        let dst = tmp.path().join("dst2");
        fs::create_dir(&dst).unwrap();
        let err = copy_tree(&src, &dst).unwrap_err();
        assert!(
            matches!(err, SavedModelError::NotRegularFile { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("assets/zero"), "{err}");
    }
}

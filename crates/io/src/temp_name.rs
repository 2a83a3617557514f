//! Names of temporaries: `.NAME.unbound-tmp-PID-NANOS` beside the target, never longer than
//! a file name may be; the same prefix for every writer of one target, so that the
//! temporaries a killed writer left can be found ([`crate::remove_stale_temporaries`]).

use std::path::{Path, PathBuf};

/// What every temporary name holds between the target's name and `PID-NANOS`.
pub(crate) const TEMP_MARK: &str = ".unbound-tmp-";

/// The longest file name most filesystems accept (ext4, XFS, btrfs, APFS, tmpfs).
pub const MAX_FILE_NAME: usize = 255;

/// Longest `PID-NANOS` suffix: a 32-bit PID and nanoseconds below 10^9.
const MAX_SUFFIX: usize = 10 + 1 + 9;

/// The bytes of a file name (lossless on Unix).
pub(crate) fn name_bytes(name: &std::ffi::OsStr) -> Vec<u8> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        name.as_bytes().to_vec()
    }
    #[cfg(not(unix))]
    {
        name.to_string_lossy().into_owned().into_bytes()
    }
}

/// A file name from bytes (lossless on Unix).
fn name_from_bytes(bytes: Vec<u8>) -> std::ffi::OsString {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        std::ffi::OsString::from_vec(bytes)
    }
    #[cfg(not(unix))]
    {
        String::from_utf8_lossy(&bytes).into_owned().into()
    }
}

/// The part of every temporary name of `path` before `PID-NANOS`: `.NAME.unbound-tmp-`, where
/// a name too long to leave room for the rest (a 255-byte limit) is cut and ended with a hash
/// of the whole name, so that the temporary's name stays within [`MAX_FILE_NAME`] and is the
/// same for every writer of the same target.
pub(crate) fn temp_prefix(path: &Path) -> Vec<u8> {
    let name = path
        .file_name()
        .map(name_bytes)
        .unwrap_or_else(|| b"output".to_vec());
    let room = MAX_FILE_NAME - 1 - TEMP_MARK.len() - MAX_SUFFIX;
    let mut part = if name.len() <= room {
        name
    } else {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        name.hash(&mut h);
        let tag = format!("~{:016x}", h.finish());
        let mut cut = name[..room - tag.len()].to_vec();
        // Do not leave half a UTF-8 character behind (harmless, but ugly in listings).
        while cut.last().is_some_and(|&b| b & 0xc0 == 0x80) {
            cut.pop();
        }
        if cut.last().is_some_and(|&b| b >= 0xc0) {
            cut.pop();
        }
        cut.extend_from_slice(tag.as_bytes());
        cut
    };
    let mut prefix = vec![b'.'];
    prefix.append(&mut part);
    prefix.extend_from_slice(TEMP_MARK.as_bytes());
    prefix
}

/// A temporary path in the same directory as `path` (so the final rename stays on one
/// filesystem), unique to this process and moment: `.NAME.unbound-tmp-PID-NANOS`, its name
/// never longer than [`MAX_FILE_NAME`] bytes (a long `NAME` is shortened, see above).
pub fn temp_path_for(path: &Path) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut name = temp_prefix(path);
    name.extend_from_slice(format!("{}-{nanos}", std::process::id()).as_bytes());
    path.with_file_name(name_from_bytes(name))
}

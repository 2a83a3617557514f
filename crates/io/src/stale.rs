//! Temporaries a killed writer left behind (`kill -9`, a power cut), removed by the next
//! writer of the same target: one listing of the target's directory, whatever the number of
//! targets in it ([`remove_stale_temporaries_of`]), so that a writer of N files in one
//! directory pays for one listing, not N.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::temp_name::{name_bytes, temp_prefix, TEMP_MARK};

/// Temporaries of dead writers removed by this process, not yet taken by
/// [`take_removed_stale`].
static REMOVED_STALE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Whether process `pid` is alive. Without `/proc` (not Linux) every process is assumed
/// alive, so nothing is removed.
fn process_alive(pid: u32) -> bool {
    let proc_root = Path::new("/proc");
    if !proc_root.join("self").exists() {
        return true;
    }
    proc_root.join(pid.to_string()).exists()
}

/// Removes the temporaries that writers of `target` left beside it when they were killed
/// (`kill -9`, a power cut): names [`crate::temp_path_for`] would give `target`, whose writer's process
/// is no longer alive. A temporary of a live process (another writer at work) is left alone.
/// Returns what was removed (also kept for [`take_removed_stale`]). Every
/// [`crate::TempPath::new`] (so every [`crate::write_atomically`]) calls it. Errors (an
/// unreadable directory, a file removed meanwhile) are ignored: this is cleaning up, not the
/// output.
pub fn remove_stale_temporaries(target: &Path) -> Vec<PathBuf> {
    remove_stale_temporaries_of(std::slice::from_ref(&target.to_path_buf()))
}

/// [`remove_stale_temporaries`] for many targets at once: each directory holding one of them
/// is listed once, so the cost follows the number of directories and of entries in them, not
/// their product with the number of targets. For a writer of many files side by side (the
/// data shards of a checkpoint), followed by [`crate::TempPath::new_cleaned`] for each.
pub fn remove_stale_temporaries_of(targets: &[PathBuf]) -> Vec<PathBuf> {
    let mut by_dir: HashMap<&Path, HashSet<Vec<u8>>> = HashMap::new();
    for target in targets {
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        by_dir.entry(dir).or_default().insert(temp_prefix(target));
    }
    let mut removed = Vec::new();
    for (dir, prefixes) in by_dir {
        remove_in(dir, &prefixes, &mut removed);
    }
    if !removed.is_empty() {
        let mut log = REMOVED_STALE.lock().unwrap_or_else(|e| e.into_inner());
        log.extend(removed.iter().cloned());
    }
    removed
}

/// Removes from `dir` the temporaries of dead writers whose prefix is one of `prefixes`.
fn remove_in(dir: &Path, prefixes: &HashSet<Vec<u8>>, removed: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let own = std::process::id();
    let mark = TEMP_MARK.as_bytes();
    for entry in entries.flatten() {
        let name = name_bytes(&entry.file_name());
        // The prefix ends at the last mark: what follows it is `PID-NANOS`, which holds none.
        let Some(at) = name.windows(mark.len()).rposition(|w| w == mark) else {
            continue;
        };
        let (prefix, rest) = name.split_at(at + mark.len());
        if !prefixes.contains(prefix) {
            continue;
        }
        let Some((pid, nanos)) = std::str::from_utf8(rest)
            .ok()
            .and_then(|r| r.split_once('-'))
        else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if nanos.is_empty() || !nanos.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if pid == own || process_alive(pid) {
            continue;
        }
        let path = entry.path();
        let gone = match entry.file_type() {
            Ok(t) if t.is_dir() => fs::remove_dir_all(&path).is_ok(),
            Ok(_) => fs::remove_file(&path).is_ok(),
            Err(_) => false,
        };
        if gone {
            removed.push(path);
        }
    }
}

/// Takes the list of stale temporaries removed so far by this process (by
/// [`remove_stale_temporaries`], directly or through [`crate::TempPath::new`]), so that a
/// command can say what it cleaned up.
pub fn take_removed_stale() -> Vec<PathBuf> {
    let mut log = REMOVED_STALE.lock().unwrap_or_else(|e| e.into_inner());
    std::mem::take(&mut *log)
}

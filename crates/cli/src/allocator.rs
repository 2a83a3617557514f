//! glibc malloc's per-thread cache, enlarged for `optimize`.
//!
//! `optimize` turns each of a library's functions into a graph and back (thousands of small
//! allocations per function, all freed before the next one). glibc keeps only 7 freed blocks
//! of each size in a thread's cache; the rest go back to the arena's bins, and the next large
//! request consolidates them again. On a library of 10,000 functions that was a fifth of
//! `optimize` (issue 15: 5.7 s → 4.8 s with `--isolate`, 4.3 s → 3.4 s without, on the
//! 3M-node benchmark model; `merge` and `split` are unchanged by it).
//!
//! The cache size is a glibc tunable, read from `GLIBC_TUNABLES` when a process starts and
//! settable no other way, so `optimize` starts itself again, once, with it set (the plugin
//! worker `--isolate` starts inherits it). Nothing is done when the variable already names the
//! tunable (the user's choice, or the second start), or off glibc.

/// The tunable, and the blocks of each size a thread keeps (glibc's default is 7).
const TCACHE_COUNT: &str = "glibc.malloc.tcache_count=2000";

/// Replaces this process with a copy of itself whose malloc keeps [`TCACHE_COUNT`] freed
/// blocks per size and thread; returns (and the process goes on as it is) when that is already
/// so, or cannot be done.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn restart_with_larger_thread_cache() {
    use std::os::unix::process::CommandExt;

    let Some(tunables) = with_thread_cache(&std::env::var("GLIBC_TUNABLES").unwrap_or_default())
    else {
        return;
    };
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    // `exec` returns only on failure: the process then goes on unchanged.
    let _ = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env("GLIBC_TUNABLES", tunables)
        .exec();
}

/// `GLIBC_TUNABLES` holding `tunables` and [`TCACHE_COUNT`], or `None` when `tunables` already
/// sets the cache size (whatever to).
#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
fn with_thread_cache(tunables: &str) -> Option<String> {
    let name = TCACHE_COUNT.split('=').next().unwrap_or(TCACHE_COUNT);
    if tunables
        .split(':')
        .any(|t| t.split('=').next() == Some(name))
    {
        return None;
    }
    Some(if tunables.is_empty() {
        TCACHE_COUNT.to_string()
    } else {
        format!("{tunables}:{TCACHE_COUNT}")
    })
}

/// Off glibc there is nothing to set.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn restart_with_larger_thread_cache() {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cache size is added to what is set, and never set twice: a second start (or a
    /// user who chose a size) starts nothing more.
    #[test]
    fn the_cache_size_is_added_once() {
        assert_eq!(with_thread_cache("").as_deref(), Some(TCACHE_COUNT));
        assert_eq!(
            with_thread_cache("glibc.malloc.check=0").as_deref(),
            Some(format!("glibc.malloc.check=0:{TCACHE_COUNT}").as_str())
        );
        let once = with_thread_cache("glibc.malloc.check=0").unwrap();
        assert_eq!(with_thread_cache(&once), None);
        assert_eq!(with_thread_cache("glibc.malloc.tcache_count=3"), None);
        assert_eq!(
            with_thread_cache("glibc.malloc.tcache_count_x=3").as_deref(),
            Some(format!("glibc.malloc.tcache_count_x=3:{TCACHE_COUNT}").as_str())
        );
    }
}

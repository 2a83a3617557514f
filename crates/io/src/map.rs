//! Read-only memory maps of input files.

use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;

use crate::error::IoError;
use crate::open::open_regular;

/// Maps the whole regular file at `path` read-only as [`Bytes`]; slices of it are zero-copy
/// views that keep the map alive. An empty file gives empty bytes (nothing to map). Special
/// files are refused ([`open_regular`]).
pub fn map_file(path: &Path) -> Result<Bytes, IoError> {
    let (file, len) = open_regular(path)?;
    if len == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: the mapping is read-only. As with every tool that maps its input, the file must
    // not be truncated by another process while the map (or a slice of it) is alive; unbound
    // never writes to a file it has mapped (outputs go to fresh temporaries).
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| IoError::os(path, e))?;
    let map = Arc::new(map);
    let mut live = LIVE_MAPS.lock().unwrap_or_else(|e| e.into_inner());
    live.retain(|m| m.strong_count() > 0);
    live.push(Arc::downgrade(&map));
    Ok(Bytes::from_owner(SharedMap(map)))
}

/// A mapping shared between the [`Bytes`] that own it and the registry of live maps.
struct SharedMap(Arc<memmap2::Mmap>);

impl AsRef<[u8]> for SharedMap {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// The maps [`map_file`] made that may still be alive: [`release_pages`] acts only inside one.
static LIVE_MAPS: Mutex<Vec<Weak<memmap2::Mmap>>> = Mutex::new(Vec::new());

/// Tells the kernel that `bytes`, a part of a file [`map_file`] mapped, will not be read again
/// soon: its whole pages leave this process's resident memory (they stay in the page cache, and
/// a later read maps them back with the same contents). A scan over a file larger than the
/// memory it should use releases what it has passed, so its peak is a window, not the file.
///
/// Does nothing when `bytes` is not inside a live map (a decompressed chunk, a heap buffer):
/// releasing heap pages would zero them, so the range is checked against the maps first.
/// Returns the number of bytes released.
pub fn release_pages(bytes: &[u8]) -> usize {
    let start = bytes.as_ptr() as usize;
    let end = start + bytes.len();
    let live = LIVE_MAPS.lock().unwrap_or_else(|e| e.into_inner());
    for map in live.iter().filter_map(Weak::upgrade) {
        let base = map.as_ptr() as usize;
        if start < base || end > base + map.len() {
            continue;
        }
        let page = page_size();
        let first = (start - base).div_ceil(page) * page;
        let last = (end - base) / page * page;
        if last <= first {
            return 0;
        }
        // SAFETY: the range lies inside this read-only private file mapping, which is alive
        // (we hold a strong reference). `DontNeed` on such a mapping drops the pages from this
        // process; a later access faults them in again from the file, so every `Bytes` over the
        // range still reads the same contents (the file is not modified while mapped, as for
        // the mapping itself). No heap or anonymous memory can be in the range.
        let advised = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, first, last - first)
        };
        return if advised.is_ok() { last - first } else { 0 };
    }
    0
}

/// The size of a memory page.
fn page_size() -> usize {
    // Every platform unbound runs on uses 4 KiB pages or a multiple of them; releasing on a
    // 4 KiB grid inside a larger page only makes the kernel round, never release outside.
    4096
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_pages_read_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let map = map_file(&path).unwrap();
        let released = release_pages(&map[10..900_000]);
        assert!(released >= 800_000, "released {released}");
        assert_eq!(&map[..], &data[..]);
        // Heap memory is never released.
        let heap = vec![7u8; 1 << 20];
        assert_eq!(release_pages(&heap), 0);
        assert!(heap.iter().all(|&b| b == 7));
    }

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

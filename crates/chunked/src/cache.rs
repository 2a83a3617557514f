//! [`ChunkCache`]: the decoded bytes of a `.cpb`'s chunks, each decoded at most once and
//! shared by every reader of the file in one process, across threads.
//!
//! A command over a `.cpb` reads most chunks several times: `verify` checks every record
//! ([`crate::check_chunks_deferring`]), merges the file, and on a second thread fingerprints it
//! (hashing each chunk, then merging the graph again). Decompressing a 64 MiB Brotli chunk is
//! tens of milliseconds, so every reader but the first takes the bytes from here. A slot is a
//! mutex around the decoded bytes: a reader asking for a chunk another thread is decoding
//! waits for it instead of decoding it again; different chunks decode in parallel.
//!
//! Only chunks the caller names are kept: those a merge holds slices of anyway (message
//! chunks), so the cache costs no memory beyond what the merged message holds. A decode that
//! fails stores nothing: the next reader decodes again and meets the same error, so every
//! reader reports a fault the way it would without the cache.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use bytes::Bytes;

/// One chunk's place in the cache.
enum Slot {
    /// Not kept: each read decodes.
    Uncached,
    /// Kept once decoded; the mutex is held while it is being decoded.
    Cached(Mutex<Option<Bytes>>),
}

/// Decoded chunks by chunk index, each decoded at most once (see the module docs).
pub struct ChunkCache {
    slots: Vec<Slot>,
    decodes: AtomicU64,
}

impl std::fmt::Debug for ChunkCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkCache")
            .field("chunks", &self.slots.len())
            .field("decodes", &self.decodes())
            .finish()
    }
}

impl ChunkCache {
    /// A cache for `len` chunks that keeps those in `cached` (indices past `len` are ignored).
    pub fn new(len: usize, cached: impl IntoIterator<Item = u64>) -> Self {
        let mut slots: Vec<Slot> = (0..len).map(|_| Slot::Uncached).collect();
        for index in cached {
            if let Some(slot) = usize::try_from(index).ok().and_then(|i| slots.get_mut(i)) {
                *slot = Slot::Cached(Mutex::new(None));
            }
        }
        Self {
            slots,
            decodes: AtomicU64::new(0),
        }
    }

    /// Whether chunk `index` is kept once decoded.
    pub fn is_cached(&self, index: u64) -> bool {
        matches!(self.slot(index), Some(Slot::Cached(_)))
    }

    /// The bytes of chunk `index`: the kept ones, or `decode()`'s (kept when the chunk is
    /// cached and the decode succeeds). While one thread decodes a cached chunk, others asking
    /// for it wait and then share its bytes.
    pub fn get_or_decode<E>(
        &self,
        index: u64,
        decode: impl FnOnce() -> Result<Bytes, E>,
    ) -> Result<Bytes, E> {
        let Some(Slot::Cached(slot)) = self.slot(index) else {
            return decode();
        };
        // A poisoned slot (a decoder panicked) is decoded again, never trusted.
        let mut guard = slot.lock().unwrap_or_else(|poisoned| {
            let mut guard = poisoned.into_inner();
            *guard = None;
            guard
        });
        if let Some(bytes) = guard.as_ref() {
            return Ok(bytes.clone());
        }
        self.decodes.fetch_add(1, Ordering::Relaxed);
        let bytes = decode()?;
        *guard = Some(bytes.clone());
        Ok(bytes)
    }

    /// The kept bytes of chunk `index`, if it is cached and was decoded.
    pub fn get(&self, index: u64) -> Option<Bytes> {
        match self.slot(index) {
            Some(Slot::Cached(slot)) => slot.lock().ok()?.clone(),
            _ => None,
        }
    }

    /// How many times a kept chunk was decoded (failed decodes included; chunks not kept are
    /// not counted): at most once per kept chunk unless some decode failed.
    pub fn decodes(&self) -> u64 {
        self.decodes.load(Ordering::Relaxed)
    }

    fn slot(&self, index: u64) -> Option<&Slot> {
        usize::try_from(index).ok().and_then(|i| self.slots.get(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Barrier;
    use std::time::Duration;

    #[test]
    fn a_cached_chunk_is_decoded_once() {
        let cache = ChunkCache::new(3, [0, 2]);
        let calls = AtomicUsize::new(0);
        let decode = |n: u8| {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ()>(Bytes::from(vec![n; 10]))
        };
        let a = cache.get_or_decode(0, || decode(1)).unwrap();
        let b = cache.get_or_decode(0, || decode(9)).unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(a, b);
        assert_eq!(a.as_ptr(), b.as_ptr(), "the same buffer, not a copy");
        assert_eq!(cache.get(0), Some(a));
        // Chunk 1 is not cached: every read decodes.
        cache.get_or_decode(1, || decode(2)).unwrap();
        cache.get_or_decode(1, || decode(2)).unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(cache.get(1), None);
        assert_eq!(cache.decodes(), 1, "only kept chunks count");
        assert!(cache.is_cached(2) && !cache.is_cached(1) && !cache.is_cached(7));
    }

    #[test]
    fn a_failed_decode_is_not_kept() {
        let cache = ChunkCache::new(1, [0]);
        let err = cache.get_or_decode(0, || Err::<Bytes, _>("bad chunk"));
        assert_eq!(err, Err("bad chunk"));
        // The next reader decodes again and meets its own error.
        let err = cache.get_or_decode(0, || Err::<Bytes, _>("bad chunk"));
        assert_eq!(err, Err("bad chunk"));
        assert_eq!(cache.decodes(), 2);
        assert_eq!(cache.get(0), None);
    }

    #[test]
    fn threads_sharing_the_cache_wait_for_one_decode() {
        let cache = ChunkCache::new(4, 0..4);
        let calls: Vec<AtomicUsize> = (0..4).map(|_| AtomicUsize::new(0)).collect();
        let threads = 8;
        let start = Barrier::new(threads);
        let got: Vec<Vec<Bytes>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (cache, calls, start) = (&cache, &calls, &start);
                    s.spawn(move || {
                        start.wait();
                        (0..4u64)
                            .map(|i| {
                                // Each thread walks the chunks from a different one.
                                let i = (i + t as u64) % 4;
                                cache
                                    .get_or_decode(i, || {
                                        calls[i as usize].fetch_add(1, Ordering::SeqCst);
                                        // Slow, so the other threads arrive while it runs.
                                        std::thread::sleep(Duration::from_millis(20));
                                        Ok::<_, ()>(Bytes::from(vec![i as u8; 1000 + i as usize]))
                                    })
                                    .unwrap()
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (i, c) in calls.iter().enumerate() {
            assert_eq!(
                c.load(Ordering::SeqCst),
                1,
                "chunk {i} decoded more than once"
            );
        }
        assert_eq!(cache.decodes(), 4);
        for (t, chunks) in got.iter().enumerate() {
            for (k, bytes) in chunks.iter().enumerate() {
                let i = (k + t) % 4;
                let kept = cache.get(i as u64).unwrap();
                assert_eq!(bytes, &kept);
                assert_eq!(bytes.as_ptr(), kept.as_ptr(), "thread {t} chunk {i}");
            }
        }
    }
}

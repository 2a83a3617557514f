//! [`DecodeLimits`] and the accounting of the decoded data a reader holds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

/// How much decoded data a [`crate::RecordReader`] may hold in memory.
///
/// A compressed chunk declares its decoded size, and the declaration can be true and still
/// hostile: 1 GiB of zeros compresses with Zstd to a few kilobytes, 16 GiB to half a megabyte.
/// It can also be true and wanted: a model's constant of one repeated value compresses as
/// well (issue 29: a valid 2.5 GB model was a 235 KB `.cpb`). So the limit follows the memory
/// a command may use, never the file's compression ratio. Before a chunk is decoded whole the
/// reader checks its declared size against two limits, and allocates nothing for a chunk that
/// would pass either:
///
/// - one chunk may decode to at most [`DecodeLimits::max_chunk`] bytes (default 2 GiB, the
///   largest protobuf message: a chunk of a `.cpb` is one);
/// - all decoded data the reader's records still hold (the cached chunk, and every
///   [`bytes::Bytes`] record handed out that points into a decoded buffer) may reach at most
///   [`DecodeLimits::budget`] bytes: by default [`default_budget`], the memory budget the user
///   sets (`unbound --memory-limit`, or the `UNBOUND_MEMORY_LIMIT` environment variable), else
///   half the memory the machine has available.
///
/// Streaming reads ([`crate::RecordReader::copy_record_to`],
/// [`crate::RecordReader::check_chunk`]) hold one decoder buffer whatever the chunk declares
/// and are not limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Largest declared decoded size of one chunk decoded whole.
    pub max_chunk: u64,
    /// Decoded bytes that may be held at once.
    pub budget: u64,
}

impl DecodeLimits {
    /// The default largest chunk: 2 GiB.
    pub const DEFAULT_MAX_CHUNK: u64 = 2 << 30;

    /// No limits at all: for callers that have checked the declared sizes themselves.
    pub const fn unlimited() -> Self {
        DecodeLimits {
            max_chunk: u64::MAX,
            budget: u64::MAX,
        }
    }
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_chunk: Self::DEFAULT_MAX_CHUNK,
            budget: default_budget(),
        }
    }
}

/// The environment variable that sets the memory budget for decoded data ([`default_budget`]):
/// a number of bytes, optionally with a `K`, `M`, `G` or `T` suffix (powers of 1024).
pub const MEMORY_LIMIT_ENV: &str = "UNBOUND_MEMORY_LIMIT";

/// The smallest default budget, whatever the machine reports: 256 MiB.
pub const MIN_DEFAULT_BUDGET: u64 = 256 << 20;

/// The budget set for this process by [`set_default_budget`] (0: none).
static SET_BUDGET: AtomicU64 = AtomicU64::new(0);

/// Sets the budget [`default_budget`] gives for the rest of this process (the `unbound`
/// binary's `--memory-limit`); it wins over the environment variable.
pub fn set_default_budget(bytes: u64) {
    SET_BUDGET.store(bytes.max(1), Ordering::Relaxed);
}

/// The memory budget for decoded data a reader holds at once, unless its caller sets another:
/// the one [`set_default_budget`] set, else [`MEMORY_LIMIT_ENV`] when it parses
/// ([`parse_size`]), else half of the memory available now (`MemAvailable` of
/// `/proc/meminfo`; 4 GiB where it cannot be read), never below [`MIN_DEFAULT_BUDGET`].
pub fn default_budget() -> u64 {
    let set = SET_BUDGET.load(Ordering::Relaxed);
    if set != 0 {
        return set;
    }
    if let Some(bytes) = std::env::var(MEMORY_LIMIT_ENV)
        .ok()
        .and_then(|v| parse_size(&v))
    {
        return bytes;
    }
    (available_memory().unwrap_or(8 << 30) / 2).max(MIN_DEFAULT_BUDGET)
}

/// A size as users write it: digits, optionally followed by `K`, `M`, `G` or `T` (powers of
/// 1024; an optional `B` or `iB` after it, any case). `None` for anything else, or 0.
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let number: u64 = text[..digits].parse().ok()?;
    let unit = text[digits..].trim().to_ascii_uppercase();
    let unit = unit
        .strip_suffix("IB")
        .or(unit.strip_suffix('B'))
        .unwrap_or(&unit);
    let shift = match unit {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return None,
    };
    number.checked_mul(1 << shift).filter(|&n| n > 0)
}

/// `MemAvailable` of `/proc/meminfo`, in bytes.
fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Counts the decoded bytes alive in buffers a reader made.
#[derive(Debug, Clone, Default)]
pub(crate) struct Held(Arc<AtomicU64>);

impl Held {
    /// Bytes alive now.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Wraps a decoded buffer so that its bytes count as held until the last slice of it is
    /// dropped.
    pub(crate) fn track(&self, buffer: Bytes) -> Bytes {
        let n = buffer.len() as u64;
        if n == 0 {
            return buffer;
        }
        self.0.fetch_add(n, Ordering::Relaxed);
        Bytes::from_owner(Tracked {
            buffer,
            n,
            held: self.0.clone(),
        })
    }
}

/// The owner of a tracked buffer: gives its bytes back to the count when dropped.
struct Tracked {
    buffer: Bytes,
    n: u64,
    held: Arc<AtomicU64>,
}

impl AsRef<[u8]> for Tracked {
    fn as_ref(&self) -> &[u8] {
        &self.buffer
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.held.fetch_sub(self.n, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_bytes_follow_the_slices() {
        let held = Held::default();
        let b = held.track(Bytes::from(vec![7u8; 1000]));
        assert_eq!(held.get(), 1000);
        let slice = b.slice(10..20);
        drop(b);
        assert_eq!(held.get(), 1000);
        assert_eq!(&slice[..], &[7u8; 10]);
        drop(slice);
        assert_eq!(held.get(), 0);
    }

    #[test]
    fn sizes_parse_as_users_write_them() {
        assert_eq!(parse_size("1000"), Some(1000));
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size("3 GiB"), Some(3 << 30));
        assert_eq!(parse_size("4KB"), Some(4 << 10));
        assert_eq!(parse_size("1T"), Some(1 << 40));
        for bad in ["", "G", "0", "-1", "1.5G", "12X", "99999999999999999999"] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_default_budget_follows_the_machine_and_is_never_tiny() {
        let l = DecodeLimits::default();
        assert!(l.budget >= MIN_DEFAULT_BUDGET);
        assert_eq!(l.max_chunk, DecodeLimits::DEFAULT_MAX_CHUNK);
        assert_eq!(DecodeLimits::unlimited().budget, u64::MAX);
    }
}

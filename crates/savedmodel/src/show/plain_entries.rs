//! Attribute entries `show` has already scanned and found to name no function, remembered by
//! their bytes.
//!
//! The nodes of a library's functions are scanned down to their attributes' values, looking
//! for the functions they name, and a model of millions of such nodes repeats a few entries
//! (`T`, the same `_output_shapes`) on every node (issue 15: this scan was half of `show`, and
//! a quarter of the checks a split makes). What an entry names depends only on its bytes, so
//! an entry equal to one that named nothing names nothing again, and is skipped after one
//! comparison.

use crate::recent_bytes::RecentBytes;

/// Entries found naming no function lately (no key, no value: being there is the answer).
/// Entries past 128 bytes are scanned every time.
pub(super) type PlainEntries = RecentBytes<(), (), 128>;

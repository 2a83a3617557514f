//! Map entries the canonical check has already accepted, remembered by their bytes.
//!
//! A graph of millions of nodes repeats a few attribute entries (`T: DT_FLOAT`, the same
//! `_output_shapes`) on every node, and checking one is a descent of four or five nested
//! messages for a few dozen bytes (issue 15: the whole-model check was the largest part of a
//! split). Whether an entry is canonical and valid depends only on its bytes, the map field it
//! belongs to, the nesting it is met at and whether the check validates, so an entry equal to
//! one accepted before, under the same three, is accepted again after one comparison.

use crate::recent_bytes::RecentBytes;

/// Where and how an entry was checked: its map field (the layout of the message holding the
/// map and the field's index in it), the nesting of that message, and whether the check
/// validated (see [`super::canonical::Encoder::is_canonical_and_valid`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct EntryContext {
    pub layout: usize,
    pub field: usize,
    pub depth: usize,
    pub validate: bool,
}

/// Entries accepted lately, by context, each with the deepest nesting its check met (the
/// encoder's `deepest`, replayed on a hit). Entries past 96 bytes are checked every time.
pub(super) type EntryMemo = RecentBytes<EntryContext, usize, 96>;

//! Conversion tests on hand-written functions.

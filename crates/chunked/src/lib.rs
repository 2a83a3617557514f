//! unbound-chunked (under construction).

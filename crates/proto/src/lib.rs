//! unbound-proto (under construction).

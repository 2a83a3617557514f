//! unbound-records (under construction).

//! unbound-savedmodel (under construction).

//! The reserved sharding-spec words and the string prefixes of layouts.

/// The tensor axis is not sharded.
pub const UNSHARDED: &str = "unsharded";
/// Any sharding (layout propagation only).
pub const ANY: &str = "any";
/// Relayout leaves this axis as it is.
pub const MATCH: &str = "match";
/// The only spec of a rank-0 layout; parsed away.
pub const SCALAR: &str = "scalar";
/// The string of the empty layout.
pub const EMPTY_LAYOUT: &str = "empty_layout";
/// Prefix of a static layout's string.
pub const STATIC_PREFIX: &str = "sharding_specs:";
/// Prefix of a parted layout's string.
pub const PARTED_PREFIX: &str = "parted:";
/// Prefix of a single-device layout's string.
pub const SINGLE_DEVICE_PREFIX: &str = "maximal:";

/// Whether `spec` names a mesh dimension (it is none of the reserved words).
pub fn is_mesh_dim_spec(spec: &str) -> bool {
    !matches!(spec, UNSHARDED | ANY | MATCH | SCALAR)
}

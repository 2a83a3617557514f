//! What the command line, Python and other crates read a layout from, and the reports of the
//! layout tools, as data: one grammar for a sharding given as text (TensorFlow's layout
//! string, `@FILE` with a proto, JAX `P(...)`, PyTorch `[Shard(0), ...]`), the
//! `0.npy … n.npy` component directories, and the typed reports of `unbound layout`'s
//! `from-op-sharding`, `unpack`, `pack` and `relayout`. Callers only render.

mod components;
mod picture;
mod reports;
mod text;

pub use components::{read_array, read_components, write_array, write_components, NpyData};
pub use picture::{picture, Picture};
pub use reports::{
    from_op_sharding, pack_dir, relayout_dirs, unpack_file, ComponentFile, FromOpShardingReport,
    PackReport, RelayoutReport, RelayoutRequest, UnpackReport,
};
pub use text::{
    chunking, is_layout_text, parse_mesh_arg, parse_shape, parse_sharding, read_layout_or_mesh,
    LayoutOrMesh, ParsedSharding, SpecKind,
};

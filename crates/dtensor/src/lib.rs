//! DTensor meshes and layouts without TensorFlow.
//!
//! TensorFlow's DTensor describes a distributed tensor by a [`Mesh`] (a named grid of
//! devices) and a [`Layout`] (for each tensor axis, the mesh dimension it is split over, or
//! `unsharded`). This crate reads and writes both in TensorFlow's exact string and proto
//! formats, with TensorFlow's validation rules and error messages, and answers what
//! TensorFlow answers: device locations, the shard each device holds, local and global
//! shapes. It also converts layouts to and from XLA's `OpSharding` (the sharding JAX and
//! XLA speak), JAX `PartitionSpec` text, HLO sharding text and PyTorch placements, and
//! splits, joins and relayouts host arrays at memory bandwidth.
//!
//! ```
//! use unbound_dtensor::{Layout, Mesh};
//!
//! let mesh = Mesh::parse("|x=2,y=4|*CPU").unwrap();
//! let layout = Layout::parse(&format!("sharding_specs:y,x, mesh:{mesh}")).unwrap();
//! assert_eq!(layout.local_shape(&[8, 6]).unwrap(), vec![2, 3]);
//! // Device 5 sits at mesh location [1, 1]: shard 1 of axis 0 (y) and 1 of axis 1 (x).
//! assert_eq!(layout.offset_to_shard().unwrap()[5], vec![1, 1]);
//! ```
//!
//! # What lives where
//!
//! - [`Mesh`], [`Layout`]: TensorFlow's formats and rules; `parse_with_warnings` reports
//!   where TensorFlow silently reads something else (a missing trailing comma drops the last
//!   spec, `maximal:false` means true, numbers with trailing text, the global devices of
//!   7-part mesh strings). [`Layout::local_shape`] refuses shapes that do not divide, where
//!   TensorFlow truncates ([`Layout::local_shape_truncating`] is TensorFlow's own).
//! - [`layout_to_op_sharding`] (TensorFlow's converter, explicit or iota form),
//!   [`op_sharding_to_layouts`] (the reverse, which TensorFlow lacks), [`to_hlo_text`] /
//!   [`parse_hlo_text`], [`to_partition_spec`] / [`parse_partition_spec`] (JAX),
//!   [`to_torch`] / [`parse_torch_placements`] (PyTorch).
//! - [`Sharding`]: the model behind [`unpack`], [`pack`] and [`relayout`]; a DTensor layout,
//!   or, opt-in and beyond TensorFlow, several mesh dimensions on one axis, uneven shards
//!   ([`Chunking::Uneven`], PyTorch's `torch.chunk` rule) and `Partial(sum)` (plans only).
//! - [`relayout_plan`]: the collective steps DTensor's relayout would run.
//! - [`LayoutReport`], [`MeshReport`]: what `unbound layout show` prints, as data.
//! - The layout tools' inputs and reports ([`parse_sharding`], [`read_layout_or_mesh`],
//!   [`read_components`], [`UnpackReport`], [`RelayoutReport`], ...): the one grammar the
//!   CLI, `plan`, `reshard` and Python read shardings with, and what they print, as data.
//!
//! Invariants: [`Mesh`] and [`Layout`] print exactly what TensorFlow's `ToString` prints
//! and encode the bytes its `ToProto` serializes; parsing accepts what TensorFlow accepts
//! (with warnings where TensorFlow silently changes the meaning) and rejects what it
//! rejects. Nothing here panics on bad input.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod array;
mod buffer;
mod copy;
mod device;
mod error;
mod from_op_sharding;
mod hlo_text;
mod jax;
mod layout;
mod mesh;
mod op_sharding;
mod pack;
mod plan;
mod report;
mod sharding;
pub mod spec;
mod tools;
mod torch;

pub use array::{Elements, HostArray};
pub use buffer::ByteBuffer;
pub use device::DeviceName;
pub use error::{DTensorError, DeviceListFault, Result, ToolError};
pub use from_op_sharding::{op_sharding_to_layouts, OpShardingLayouts};
pub use hlo_text::{parse_hlo_text, to_hlo_text, MAX_SHARDING_DEPTH};
pub use jax::{parse_partition_spec, to_partition_spec};
pub use layout::{Layout, LayoutType, MAX_RANK};
pub use mesh::{Mesh, MeshDim, MeshKind, EMPTY_MESH, USE_XLA_SPMD};
pub use op_sharding::{
    decode_op_sharding, expanded_devices, layout_to_op_sharding, layout_to_op_sharding_bytes,
    DeviceListForm,
};
pub use pack::{global_shape_of, pack, pack_into, relayout, relayout_into, unpack, unpack_into};
pub use plan::{relayout_plan, resolve_match, RelayoutPlan, RelayoutStep};
pub use report::{DeviceBox, LayoutReport, MeshReport};
pub use sharding::{chunk, Chunking, ShardBox, Sharding};
pub use tools::{
    chunking, from_op_sharding, is_layout_text, pack_dir, parse_mesh_arg, parse_shape,
    parse_sharding, picture, read_array, read_components, read_layout_or_mesh, relayout_dirs,
    unpack_file, write_array, write_components, ComponentFile, FromOpShardingReport, LayoutOrMesh,
    NpyData, PackReport, ParsedSharding, Picture, RelayoutReport, RelayoutRequest, SpecKind,
    UnpackReport,
};
pub use torch::{parse_torch_placements, to_torch, TorchSharding};
pub use unbound_proto::xla::OpSharding;

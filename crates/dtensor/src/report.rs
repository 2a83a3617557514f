//! What `unbound layout show` reports about a mesh or a layout, as data (serde), under
//! TensorFlow's own names.

use serde::Serialize;

use crate::hlo_text::to_hlo_text;
use crate::jax::to_partition_spec;
use crate::layout::Layout;
use crate::mesh::Mesh;
use crate::op_sharding::{layout_to_op_sharding_bytes, DeviceListForm};
use crate::sharding::{Chunking, ShardBox, Sharding};
use crate::torch::{to_torch, TorchSharding};
use crate::{error::Result, layout_to_op_sharding};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Everything about a mesh.
#[derive(Debug, Clone, Serialize)]
pub struct MeshReport {
    /// Always `"mesh"`.
    pub kind: &'static str,
    /// TensorFlow's `to_string()`.
    pub to_string: String,
    /// The serialized `MeshProto`, hex.
    pub proto_hex: String,
    /// The mesh name.
    pub name: String,
    /// Dimension names.
    pub dim_names: Vec<String>,
    /// Dimension sizes.
    pub shape: Vec<i64>,
    /// The number of global devices (TensorFlow's `size`).
    pub size: usize,
    /// Global device ids, row-major.
    pub global_device_ids: Vec<i64>,
    /// Local device ids.
    pub local_device_ids: Vec<i64>,
    /// Local device names.
    pub local_devices: Vec<String>,
    /// Global device names (when listed).
    pub global_devices: Vec<String>,
    /// XLA SPMD on.
    pub use_xla_spmd: bool,
    /// The device type.
    pub device_type: String,
    /// No local devices.
    pub is_remote: bool,
    /// A single-device mesh.
    pub is_single_device: bool,
    /// Where TensorFlow would quietly read something else, or breaks a Python-layer rule.
    pub warnings: Vec<String>,
}

impl MeshReport {
    /// The report of `mesh`, with parse `warnings`.
    pub fn new(mesh: &Mesh, warnings: Vec<String>) -> MeshReport {
        MeshReport {
            kind: "mesh",
            to_string: mesh.to_string(),
            proto_hex: hex(&mesh.encode()),
            name: mesh.name().to_string(),
            dim_names: mesh.dim_names().into_iter().map(str::to_string).collect(),
            shape: mesh.shape(),
            size: mesh.num_devices(),
            global_device_ids: mesh.global_device_ids().to_vec(),
            local_device_ids: mesh.local_device_ids().to_vec(),
            local_devices: mesh.local_devices().to_vec(),
            global_devices: mesh.global_devices().to_vec(),
            use_xla_spmd: mesh.use_xla_spmd(),
            device_type: mesh.device_type(),
            is_remote: mesh.is_remote(),
            is_single_device: mesh.is_single_device(),
            warnings,
        }
    }
}

/// What one local device holds of a global array.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceBox {
    /// Index in local-device order (the component number).
    pub component: usize,
    /// The device name.
    pub device: String,
    /// The global device id.
    pub device_id: i64,
    /// The mesh position.
    pub position: usize,
    /// The mesh coordinates.
    pub location: Vec<i64>,
    /// The box: start and shape on each axis.
    #[serde(flatten)]
    pub shard: ShardBox,
}

/// Everything about a layout.
#[derive(Debug, Clone, Serialize)]
pub struct LayoutReport {
    /// Always `"layout"`.
    pub kind: &'static str,
    /// TensorFlow's `to_string()`.
    pub to_string: String,
    /// The serialized `LayoutProto`, hex.
    pub proto_hex: String,
    /// `STATIC`, `PARTED`, `SINGLE_DEVICE` or `UNKNOWN` (empty).
    #[serde(rename = "type")]
    pub layout_type: &'static str,
    /// The tensor rank.
    pub rank: usize,
    /// One spec per axis.
    pub sharding_specs: Vec<String>,
    /// Shards per axis (-1 for `match`, null for `any`).
    pub num_shards: Vec<Option<i64>>,
    /// Every axis unsharded.
    pub is_fully_replicated: bool,
    /// A single-device layout.
    pub is_single_device: bool,
    /// Sharded on the first axis only.
    pub is_batch_parallel: bool,
    /// The mesh.
    pub mesh: MeshReport,
    /// The serialized `xla.OpSharding` TensorFlow attaches (null when there is none).
    pub op_sharding_hex: Option<String>,
    /// The same as HLO sharding text.
    pub hlo_sharding_text: Option<String>,
    /// The compact iota form as HLO text.
    pub hlo_sharding_iota: Option<String>,
    /// JAX `PartitionSpec`.
    pub partition_spec: Option<String>,
    /// PyTorch `DeviceMesh` and placements.
    pub torch: Option<TorchSharding>,
    /// The global shape asked about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub global_shape: Option<Vec<i64>>,
    /// Its local (per-device) shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_shape: Option<Vec<i64>>,
    /// What each local device holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devices: Option<Vec<DeviceBox>>,
    /// Where TensorFlow would quietly read something else.
    pub warnings: Vec<String>,
}

impl LayoutReport {
    /// The report of `layout` (with parse `warnings`); with `global_shape`, the local shape
    /// and every local device's box (the shape must fit: even shards unless `chunking` is
    /// uneven).
    pub fn new(
        layout: &Layout,
        warnings: Vec<String>,
        global_shape: Option<&[i64]>,
        chunking: Chunking,
    ) -> Result<LayoutReport> {
        let op = layout_to_op_sharding(layout, DeviceListForm::Explicit).ok();
        let iota = layout_to_op_sharding(layout, DeviceListForm::Iota).ok();
        let sharding = Sharding::from_layout(layout, chunking).ok();
        let mut report = LayoutReport {
            kind: "layout",
            to_string: layout.to_string(),
            proto_hex: hex(&layout.encode()),
            layout_type: layout.layout_type().proto_name(),
            rank: layout.rank(),
            sharding_specs: layout.specs().to_vec(),
            num_shards: layout.num_shards_all(),
            is_fully_replicated: layout.is_fully_replicated(),
            is_single_device: layout.is_single_device(),
            is_batch_parallel: layout.is_batch_parallel(),
            mesh: MeshReport::new(layout.mesh(), Vec::new()),
            op_sharding_hex: layout_to_op_sharding_bytes(layout, DeviceListForm::Explicit)
                .ok()
                .map(|b| hex(&b)),
            hlo_sharding_text: op.as_ref().map(to_hlo_text),
            hlo_sharding_iota: iota.as_ref().map(to_hlo_text),
            partition_spec: sharding.as_ref().and_then(|s| to_partition_spec(s).ok()),
            torch: sharding.as_ref().and_then(|s| to_torch(s).ok()),
            global_shape: None,
            local_shape: None,
            devices: None,
            warnings,
        };
        if let Some(global) = global_shape {
            let s = Sharding::from_layout(layout, chunking)?;
            let boxes = s.local_boxes(global)?;
            let positions = layout.mesh().local_positions()?;
            let mesh = layout.mesh();
            report.global_shape = Some(global.to_vec());
            report.local_shape = match chunking {
                Chunking::Even => Some(layout.local_shape(global)?),
                Chunking::Uneven => boxes.first().map(|b| b.shape.clone()),
            };
            report.devices = Some(
                boxes
                    .into_iter()
                    .zip(positions)
                    .enumerate()
                    .map(|(i, (shard, pos))| {
                        Ok(DeviceBox {
                            component: i,
                            device: mesh.local_devices().get(i).cloned().unwrap_or_default(),
                            device_id: mesh.local_device_ids().get(i).copied().unwrap_or(-1),
                            position: pos,
                            location: mesh.device_location(pos as i64)?,
                            shard,
                        })
                    })
                    .collect::<Result<_>>()?,
            );
        }
        Ok(report)
    }
}

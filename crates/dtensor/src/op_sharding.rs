//! Layout → XLA `OpSharding`, exactly as TensorFlow's `layout_to_xla_sharding.cc` builds it,
//! plus the compact iota form on request.

use prost::Message;
use unbound_proto::xla::op_sharding::Type as ShardingType;
use unbound_proto::xla::OpSharding;

use crate::error::{DTensorError, DeviceListFault, Result};
use crate::layout::Layout;

/// How the tile assignment is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceListForm {
    /// An explicit `tile_assignment_devices` list, as TensorFlow writes it.
    #[default]
    Explicit,
    /// The compact iota form: `iota_reshape_dims` (the mesh shape) and
    /// `iota_transpose_perm`, no device list.
    Iota,
}

/// The permutation of mesh dimensions DTensor uses: the dimensions of the sharded axes in
/// axis order, then the unused dimensions in mesh order.
pub(crate) fn mesh_permutation(dims_of_axes: &[Option<usize>], mesh_rank: usize) -> Vec<usize> {
    let mut perm: Vec<usize> = dims_of_axes.iter().flatten().copied().collect();
    for m in 0..mesh_rank {
        if !perm.contains(&m) {
            perm.push(m);
        }
    }
    perm
}

/// `iota(N).reshape(shape).transpose(perm).flatten()`.
pub(crate) fn transposed_iota(shape: &[i64], perm: &[usize]) -> Vec<i64> {
    let n: i64 = shape.iter().product();
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    let out_shape: Vec<i64> = perm.iter().map(|&p| shape[p]).collect();
    let out_strides: Vec<i64> = perm.iter().map(|&p| strides[p]).collect();
    let mut out = Vec::with_capacity(n.max(0) as usize);
    let mut idx = vec![0i64; out_shape.len()];
    for _ in 0..n {
        out.push(idx.iter().zip(&out_strides).map(|(i, s)| i * s).sum());
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < out_shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

fn err(layout: &Layout, fault: impl Into<String>) -> DTensorError {
    DTensorError::OpSharding {
        input: layout.to_string(),
        fault: fault.into(),
    }
}

/// The `OpSharding` TensorFlow attaches to a tensor of `layout` (`ConvertLayoutToXlaOpSharding`):
/// `MAXIMAL` (no device) for a single-device layout, `REPLICATED` (the empty message) for a
/// fully replicated one, otherwise `OTHER` with one tile dimension per axis, a trailing
/// replication dimension when mesh dimensions are unused, and devices numbered by mesh
/// position (not by global device id).
pub fn layout_to_op_sharding(layout: &Layout, form: DeviceListForm) -> Result<OpSharding> {
    if layout.is_single_device() {
        return Ok(OpSharding {
            r#type: ShardingType::Maximal as i32,
            ..Default::default()
        });
    }
    if layout.is_empty() {
        return Err(err(layout, "the empty layout has no sharding"));
    }
    if layout.is_fully_replicated() {
        return Ok(OpSharding::default());
    }
    let dims_of_axes = layout
        .axis_mesh_dims()
        .map_err(|e| err(layout, e.to_string()))?;
    let mesh_shape = layout.mesh().shape();
    if let Some(d) = layout.mesh().dims().iter().find(|d| d.size < 1) {
        return Err(err(
            layout,
            format!("mesh dimension {} has size {}", d.name, d.size),
        ));
    }
    let n = layout
        .mesh()
        .size()
        .filter(|&n| n > 0 && n <= 1 << 24)
        .ok_or_else(|| err(layout, "mesh size is not in 1..=2^24"))?;
    let mut tile: Vec<i64> = dims_of_axes
        .iter()
        .map(|d| d.map_or(1, |m| mesh_shape[m]))
        .collect();
    let product: i64 = tile.iter().product();
    let mut replicate = false;
    if product < n {
        tile.push(n / product);
        replicate = true;
    }
    let perm = mesh_permutation(&dims_of_axes, mesh_shape.len());
    let mut out = OpSharding {
        r#type: ShardingType::Other as i32,
        tile_assignment_dimensions: tile,
        replicate_on_last_tile_dim: replicate,
        ..Default::default()
    };
    match form {
        DeviceListForm::Explicit => {
            out.tile_assignment_devices = transposed_iota(&mesh_shape, &perm)
        }
        DeviceListForm::Iota => {
            out.iota_reshape_dims = mesh_shape;
            out.iota_transpose_perm = perm.iter().map(|&p| p as i32).collect();
        }
    }
    Ok(out)
}

/// The serialized bytes of [`layout_to_op_sharding`].
pub fn layout_to_op_sharding_bytes(layout: &Layout, form: DeviceListForm) -> Result<Vec<u8>> {
    Ok(layout_to_op_sharding(layout, form)?.encode_to_vec())
}

/// Decodes serialized `xla.OpSharding` bytes (`input` names them in errors).
pub fn decode_op_sharding(bytes: &[u8], input: &str) -> Result<OpSharding> {
    OpSharding::decode(bytes).map_err(|e| DTensorError::Proto {
        message: "xla.OpSharding",
        input: input.to_string(),
        fault: e.to_string(),
    })
}

/// The explicit device list of an `OTHER` sharding: `tile_assignment_devices`, or the
/// expansion of the iota form. Checks the count against the tile dimensions.
pub fn expanded_devices(s: &OpSharding) -> std::result::Result<Vec<i64>, DeviceListFault> {
    let n = s
        .tile_assignment_dimensions
        .iter()
        .try_fold(1i64, |a, &d| if d < 0 { None } else { a.checked_mul(d) })
        .filter(|&n| n <= 1 << 24)
        .ok_or(DeviceListFault::TileDimensions)?;
    if !s.iota_reshape_dims.is_empty() {
        let m = s
            .iota_reshape_dims
            .iter()
            .try_fold(1i64, |a, &d| if d < 0 { None } else { a.checked_mul(d) })
            .ok_or(DeviceListFault::IotaDimensions)?;
        if m != n {
            return Err(DeviceListFault::IotaCount {
                devices: m,
                tiles: n,
            });
        }
        let perm: Vec<usize> = if s.iota_transpose_perm.is_empty() {
            (0..s.iota_reshape_dims.len()).collect()
        } else {
            s.iota_transpose_perm.iter().map(|&p| p as usize).collect()
        };
        let mut sorted = perm.clone();
        sorted.sort_unstable();
        if sorted != (0..s.iota_reshape_dims.len()).collect::<Vec<_>>() {
            return Err(DeviceListFault::NotPermutation { perm });
        }
        return Ok(transposed_iota(&s.iota_reshape_dims, &perm));
    }
    if s.tile_assignment_devices.len() as i64 != n {
        return Err(DeviceListFault::DeviceCount {
            devices: s.tile_assignment_devices.len(),
            dimensions: s.tile_assignment_dimensions.clone(),
            tiles: n,
        });
    }
    Ok(s.tile_assignment_devices.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposed_iota_matches_tensorflow_vectors() {
        assert_eq!(
            transposed_iota(&[2, 4], &[1, 0]),
            vec![0, 4, 1, 5, 2, 6, 3, 7]
        );
        assert_eq!(
            transposed_iota(&[2, 2, 2], &[2, 0, 1]),
            vec![0, 2, 4, 6, 1, 3, 5, 7]
        );
        assert_eq!(transposed_iota(&[3], &[0]), vec![0, 1, 2]);
    }
}

//! What is known about one tensor during inference, and the constant values it may carry.

use std::sync::Arc;

use prost::Message;
use unbound_proto::tensorflow::{DataType, TensorProto};

use super::shape::Shape;

/// Const values larger than this (encoded) are not reported in `TensorProperties.value`.
pub const MAX_VALUE_BYTES: usize = 1 << 20;

/// Integer tensors with more elements than this are not decoded for shape inference.
const MAX_INT_VALUES: i64 = 1 << 16;

/// What is known about one tensor.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tensor {
    /// `DataType` value (0 when unknown).
    pub dtype: i32,
    /// Its shape.
    pub shape: Shape,
    /// Integer contents when (partly) known, flattened: shape-like tensors such as the output of
    /// `Shape`, where `-1` may stand for an unknown dim.
    pub ints: Option<Vec<i64>>,
    /// The exact value, for constants.
    pub value: Option<Arc<TensorProto>>,
}

impl Tensor {
    /// A tensor of dtype `dtype` and nothing else known.
    pub(crate) fn unknown(dtype: i32) -> Self {
        Self {
            dtype,
            ..Self::default()
        }
    }

    /// A tensor known only by its shape (the dtype is filled in by the driver).
    pub(crate) fn shaped(shape: Shape) -> Self {
        Self {
            shape,
            ..Self::default()
        }
    }

    /// A shape-like integer tensor: shape `shape` and contents `ints`.
    pub(crate) fn with_ints(shape: Shape, ints: Vec<i64>) -> Self {
        Self {
            shape,
            ints: Some(ints),
            ..Self::default()
        }
    }

    /// The value to report in `TensorProperties.value`: a constant's own tensor when small
    /// enough, or a fully known integer vector/scalar materialized as TensorFlow does for
    /// shape tensors.
    pub(crate) fn exported_value(&self) -> Option<TensorProto> {
        if let Some(value) = &self.value {
            return (value.encoded_len() <= MAX_VALUE_BYTES).then(|| value.as_ref().clone());
        }
        let ints = self.ints.as_ref()?;
        let rank = self.shape.rank()?;
        if rank > 1 || ints.iter().any(|&v| v < 0) {
            return None;
        }
        int_tensor(self.dtype, &self.shape, ints)
    }
}

/// Whether `dtype` is an integer type whose values we decode.
fn is_int(dtype: i32) -> bool {
    dtype == DataType::DtInt32 as i32 || dtype == DataType::DtInt64 as i32
}

/// The values of an int32 or int64 `TensorProto` with a fully known shape and at most
/// `MAX_INT_VALUES` elements, flattened; `None` otherwise.
pub(crate) fn int_values(tensor: &TensorProto) -> Option<Vec<i64>> {
    if !is_int(tensor.dtype) {
        return None;
    }
    let shape = tensor
        .tensor_shape
        .as_ref()
        .map_or_else(Shape::scalar, Shape::from_proto);
    let n = shape.num_elements()?;
    if n > MAX_INT_VALUES {
        return None;
    }
    let n = usize::try_from(n).ok()?;
    let is32 = tensor.dtype == DataType::DtInt32 as i32;
    if !tensor.tensor_content.is_empty() {
        let width = if is32 { 4 } else { 8 };
        if tensor.tensor_content.len() != n.checked_mul(width)? {
            return None;
        }
        let values = tensor
            .tensor_content
            .chunks_exact(width)
            .map(|c| {
                let mut b = [0u8; 8];
                b[..width].copy_from_slice(c);
                if is32 {
                    i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                } else {
                    i64::from_le_bytes(b)
                }
            })
            .collect();
        return Some(values);
    }
    let listed: Vec<i64> = if is32 {
        tensor.int_val.iter().map(|&v| i64::from(v)).collect()
    } else {
        tensor.int64_val.clone()
    };
    // TensorFlow repeats the last listed value to fill the tensor; none listed means zeros.
    if listed.len() > n {
        return None;
    }
    let fill = listed.last().copied().unwrap_or(0);
    let mut values = listed;
    values.resize(n, fill);
    Some(values)
}

/// An int32/int64 `TensorProto` of shape `shape` holding `ints` (as TensorFlow's
/// `MakeTensorProtoFromShape` builds them); `None` for other dtypes or a size mismatch.
pub(crate) fn int_tensor(dtype: i32, shape: &Shape, ints: &[i64]) -> Option<TensorProto> {
    if !is_int(dtype) || shape.num_elements()? != i64::try_from(ints.len()).ok()? {
        return None;
    }
    let mut tensor = TensorProto {
        dtype,
        tensor_shape: Some(shape.to_proto()),
        ..TensorProto::default()
    };
    if dtype == DataType::DtInt32 as i32 {
        tensor.int_val = ints
            .iter()
            .map(|&v| i32::try_from(v).ok())
            .collect::<Option<Vec<_>>>()?;
    } else {
        tensor.int64_val = ints.to_vec();
    }
    Some(tensor)
}

//! A tensor read from or written to a bundle.

use bytes::Bytes;
use unbound_proto::tensorflow::{tensor_shape_proto::Dim, DataType, TensorShapeProto};

use crate::dtype::{storage, Storage};

/// A tensor's values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TensorData {
    /// Raw little-endian element bytes (fixed-size dtypes, and opaque ones such as
    /// `DT_RESOURCE`). Read from a bundle, this is a slice of the mapped data file.
    Raw(Bytes),
    /// One byte string per element (`DT_STRING`), row-major.
    Strings(Vec<Bytes>),
    /// One serialized `VariantTensorDataProto` per element (`DT_VARIANT`), not interpreted.
    Variants(Vec<Bytes>),
}

/// A tensor: dtype (a `tensorflow.DataType` value), shape and values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tensor {
    /// The `tensorflow.DataType` value.
    pub dtype: i32,
    /// Dimension sizes, outermost first; empty for a scalar.
    pub shape: Vec<i64>,
    /// The values.
    pub data: TensorData,
}

impl Tensor {
    /// A fixed-size tensor from raw little-endian bytes.
    pub fn raw(dtype: DataType, shape: Vec<i64>, bytes: impl Into<Bytes>) -> Self {
        Self {
            dtype: dtype as i32,
            shape,
            data: TensorData::Raw(bytes.into()),
        }
    }

    /// A `DT_STRING` tensor.
    pub fn strings<B: Into<Bytes>>(shape: Vec<i64>, values: impl IntoIterator<Item = B>) -> Self {
        Self {
            dtype: DataType::DtString as i32,
            shape,
            data: TensorData::Strings(values.into_iter().map(Into::into).collect()),
        }
    }

    /// A `DT_VARIANT` tensor from serialized `VariantTensorDataProto`s.
    pub fn variants<B: Into<Bytes>>(shape: Vec<i64>, values: impl IntoIterator<Item = B>) -> Self {
        Self {
            dtype: DataType::DtVariant as i32,
            shape,
            data: TensorData::Variants(values.into_iter().map(Into::into).collect()),
        }
    }

    /// Number of elements, or `None` when the shape is invalid (negative dimension, overflow).
    pub fn num_elements(&self) -> Option<u64> {
        num_elements(&self.shape)
    }

    /// Raw bytes of a fixed-size tensor.
    pub fn as_raw(&self) -> Option<&Bytes> {
        match &self.data {
            TensorData::Raw(b) => Some(b),
            _ => None,
        }
    }

    /// Checks that the values agree with dtype and shape (byte count, element count).
    pub fn check_consistent(&self) -> Result<(), crate::Fault> {
        self.check_consistent_impl().map_err(crate::Fault)
    }

    fn check_consistent_impl(&self) -> Result<(), String> {
        let n = self
            .num_elements()
            .ok_or_else(|| format!("invalid shape {:?}", self.shape))?;
        match (&self.data, storage(self.dtype)) {
            (TensorData::Raw(b), Storage::Fixed(size)) => {
                let want = n.checked_mul(size as u64);
                if want != Some(b.len() as u64) {
                    return Err(format!(
                        "{} bytes for shape {:?} of {}-byte elements",
                        b.len(),
                        self.shape,
                        size
                    ));
                }
            }
            (TensorData::Raw(_), Storage::Opaque) => {}
            (TensorData::Strings(v), Storage::String)
            | (TensorData::Variants(v), Storage::Variant) => {
                if v.len() as u64 != n {
                    return Err(format!("{} values for shape {:?}", v.len(), self.shape));
                }
            }
            _ => {
                return Err(format!(
                    "values do not match dtype {}",
                    super::dtype::tf_name(self.dtype)
                ))
            }
        }
        Ok(())
    }
}

/// Number of elements of `shape`, or `None` for a negative dimension or overflow.
pub fn num_elements(shape: &[i64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |acc, &d| {
        if d < 0 {
            None
        } else {
            acc.checked_mul(d as u64)
        }
    })
}

/// The dimensions of a shape proto, or `None` when it has unknown rank or a negative size.
pub fn shape_from_proto(p: Option<&TensorShapeProto>) -> Option<Vec<i64>> {
    let Some(p) = p else {
        return Some(Vec::new());
    };
    if p.unknown_rank || p.dim.iter().any(|d| d.size < 0) {
        return None;
    }
    Some(p.dim.iter().map(|d| d.size).collect())
}

/// The shape proto TensorFlow writes (`TensorShape::AsProto`).
pub fn shape_to_proto(shape: &[i64]) -> TensorShapeProto {
    TensorShapeProto {
        dim: shape
            .iter()
            .map(|&size| Dim {
                size,
                name: String::new(),
            })
            .collect(),
        unknown_rank: false,
    }
}

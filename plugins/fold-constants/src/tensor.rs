//! Small dense tensors of the folded dtypes, read from and written to `TensorProto`.

use prost::bytes::Bytes;
use unbound_proto::tensorflow::{tensor_shape_proto, DataType, TensorProto, TensorShapeProto};

/// Largest tensor (in elements) read or produced.
pub const MAX_ELEMENTS: usize = 4096;

/// Element values of one of the folded dtypes.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// `DT_FLOAT`.
    F32(Vec<f32>),
    /// `DT_DOUBLE`.
    F64(Vec<f64>),
    /// `DT_INT32`.
    I32(Vec<i32>),
    /// `DT_INT64`.
    I64(Vec<i64>),
}

impl Values {
    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            Values::F32(v) => v.len(),
            Values::F64(v) => v.len(),
            Values::I32(v) => v.len(),
            Values::I64(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The dtype.
    pub fn dtype(&self) -> DataType {
        match self {
            Values::F32(_) => DataType::DtFloat,
            Values::F64(_) => DataType::DtDouble,
            Values::I32(_) => DataType::DtInt32,
            Values::I64(_) => DataType::DtInt64,
        }
    }
}

/// A dense tensor: dimensions and row-major values.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// Dimension sizes.
    pub shape: Vec<usize>,
    /// `shape.iter().product()` values.
    pub values: Values,
}

/// Element size in bytes of a folded dtype.
fn element_size(dtype: DataType) -> Option<usize> {
    match dtype {
        DataType::DtFloat | DataType::DtInt32 => Some(4),
        DataType::DtDouble | DataType::DtInt64 => Some(8),
        _ => None,
    }
}

/// TensorFlow's rule for typed fields: no values means zeros, fewer values than elements repeat
/// the last one, more are cut.
fn fill<T: Copy + Default>(given: &[T], n: usize) -> Vec<T> {
    match given.last() {
        None => vec![T::default(); n],
        Some(&last) => given
            .iter()
            .copied()
            .chain(std::iter::repeat(last))
            .take(n)
            .collect(),
    }
}

fn from_le<T, const N: usize>(bytes: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
    bytes
        .chunks_exact(N)
        .map(|c| f(c.try_into().expect("chunks_exact gives N bytes")))
        .collect()
}

/// Reads `proto` when its dtype is folded, its shape known and at most [`MAX_ELEMENTS`]
/// elements, and its content consistent; `None` otherwise.
pub fn read(proto: &TensorProto) -> Option<Tensor> {
    let dtype = DataType::try_from(proto.dtype).ok()?;
    let size = element_size(dtype)?;
    let shape_proto = proto.tensor_shape.as_ref();
    if shape_proto.is_some_and(|s| s.unknown_rank) {
        return None;
    }
    let mut shape = Vec::new();
    let mut n: usize = 1;
    for dim in shape_proto.map(|s| s.dim.as_slice()).unwrap_or_default() {
        let d = usize::try_from(dim.size).ok()?;
        n = n.checked_mul(d)?;
        shape.push(d);
    }
    if n > MAX_ELEMENTS {
        return None;
    }
    let content = &proto.tensor_content;
    let values = if !content.is_empty() {
        if content.len() != n * size {
            return None;
        }
        match dtype {
            DataType::DtFloat => Values::F32(from_le(content, f32::from_le_bytes)),
            DataType::DtDouble => Values::F64(from_le(content, f64::from_le_bytes)),
            DataType::DtInt32 => Values::I32(from_le(content, i32::from_le_bytes)),
            _ => Values::I64(from_le(content, i64::from_le_bytes)),
        }
    } else {
        match dtype {
            DataType::DtFloat => Values::F32(fill(&proto.float_val, n)),
            DataType::DtDouble => Values::F64(fill(&proto.double_val, n)),
            DataType::DtInt32 => Values::I32(fill(&proto.int_val, n)),
            _ => Values::I64(fill(&proto.int64_val, n)),
        }
    };
    Some(Tensor { shape, values })
}

/// `tensor` as a `TensorProto` with little-endian `tensor_content`.
pub fn write(tensor: &Tensor) -> TensorProto {
    let mut content = Vec::new();
    match &tensor.values {
        Values::F32(v) => v.iter().for_each(|x| content.extend(x.to_le_bytes())),
        Values::F64(v) => v.iter().for_each(|x| content.extend(x.to_le_bytes())),
        Values::I32(v) => v.iter().for_each(|x| content.extend(x.to_le_bytes())),
        Values::I64(v) => v.iter().for_each(|x| content.extend(x.to_le_bytes())),
    }
    let dim = tensor
        .shape
        .iter()
        .map(|&d| tensor_shape_proto::Dim {
            size: d as i64,
            ..Default::default()
        })
        .collect();
    TensorProto {
        dtype: tensor.values.dtype() as i32,
        tensor_shape: Some(TensorShapeProto {
            dim,
            ..Default::default()
        }),
        tensor_content: Bytes::from(content),
        ..Default::default()
    }
}

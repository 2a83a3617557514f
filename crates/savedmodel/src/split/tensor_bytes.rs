//! A `TensorProto`'s typed values (`float_val`, `int_val`, ...) as the raw bytes that would be
//! its `tensor_content`: what `tensor_util.MakeNdarray(tensor).tobytes()` gives, little-endian,
//! with fewer values than elements padded by repeating the last one and no values meaning
//! zeros.

use unbound_proto::tensorflow::TensorProto;

/// Largest expansion we perform (a splat constant can describe far more bytes than it holds).
const MAX_EXPANDED_BYTES: u128 = 1 << 34;

/// Converts the typed values of `tensor` to raw bytes, or `None` for dtypes without a
/// `tensor_content` form (strings, resources, variants, 4-bit types) and for shapes that are
/// not fully known or would expand beyond 16 GiB.
pub fn typed_values_to_bytes(tensor: &TensorProto) -> Option<Vec<u8>> {
    let shape = tensor.tensor_shape.as_ref();
    if shape.is_some_and(|s| s.unknown_rank) {
        return None;
    }
    let mut elements: u128 = 1;
    for d in shape.map(|s| s.dim.as_slice()).unwrap_or_default() {
        elements = elements.checked_mul(u128::try_from(d.size).ok()?)?;
    }
    let (width, values) = element_bytes(tensor)?;
    let total = elements.checked_mul(width as u128)?;
    if total > MAX_EXPANDED_BYTES {
        return None;
    }
    let elements = elements as usize;
    let have = values.len() / width;
    if have > elements {
        return None;
    }
    let mut out = Vec::with_capacity(total as usize);
    if have == 0 {
        out.resize(total as usize, 0);
        return Some(out);
    }
    out.extend_from_slice(&values);
    let last = values[values.len() - width..].to_vec();
    for _ in have..elements {
        out.extend_from_slice(&last);
    }
    Some(out)
}

/// Element width and the values present, encoded, for the tensor's dtype.
fn element_bytes(t: &TensorProto) -> Option<(usize, Vec<u8>)> {
    fn each<T: Copy, const N: usize>(vals: &[T], enc: impl Fn(T) -> [u8; N]) -> (usize, Vec<u8>) {
        (N, vals.iter().flat_map(|&v| enc(v)).collect())
    }
    Some(match t.dtype {
        1 => each(&t.float_val, f32::to_le_bytes),
        2 => each(&t.double_val, f64::to_le_bytes),
        3 | 13 => each(&t.int_val, i32::to_le_bytes),
        4 | 12 => each(&t.int_val, |v| [v as u8]),
        5 | 15 => each(&t.int_val, |v| (v as i16).to_le_bytes()),
        6 | 11 => each(&t.int_val, |v| [v as i8 as u8]),
        17 | 16 => each(&t.int_val, |v| (v as u16).to_le_bytes()),
        8 => {
            let (_, b) = each(&t.scomplex_val, f32::to_le_bytes);
            (8, b)
        }
        18 => {
            let (_, b) = each(&t.dcomplex_val, f64::to_le_bytes);
            (16, b)
        }
        9 => each(&t.int64_val, i64::to_le_bytes),
        10 => each(&t.bool_val, |v| [u8::from(v)]),
        14 | 19 => each(&t.half_val, |v| (v as u16).to_le_bytes()),
        22 => each(&t.uint32_val, u32::to_le_bytes),
        23 => each(&t.uint64_val, u64::to_le_bytes),
        24..=28 => (1, t.float8_val.to_vec()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbound_proto::tensorflow::{tensor_shape_proto::Dim, TensorShapeProto};

    fn shape(dims: &[i64]) -> Option<TensorShapeProto> {
        Some(TensorShapeProto {
            dim: dims
                .iter()
                .map(|&size| Dim {
                    size,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
    }

    #[test]
    fn splat_values_repeat_the_last_one() {
        let t = TensorProto {
            dtype: 1,
            tensor_shape: shape(&[2, 2]),
            float_val: vec![1.0, 2.0],
            ..Default::default()
        };
        let b = typed_values_to_bytes(&t).unwrap();
        let floats: Vec<f32> = b
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(floats, vec![1.0, 2.0, 2.0, 2.0]);
    }

    #[test]
    fn no_values_means_zeros_and_strings_have_no_form() {
        let t = TensorProto {
            dtype: 9,
            tensor_shape: shape(&[3]),
            ..Default::default()
        };
        assert_eq!(typed_values_to_bytes(&t).unwrap(), vec![0u8; 24]);
        let s = TensorProto {
            dtype: 7,
            tensor_shape: shape(&[1]),
            ..Default::default()
        };
        assert!(typed_values_to_bytes(&s).is_none());
    }

    #[test]
    fn half_values_are_bit_patterns() {
        let t = TensorProto {
            dtype: 19,
            tensor_shape: shape(&[2]),
            half_val: vec![0x3c00, 0x4000],
            ..Default::default()
        };
        assert_eq!(
            typed_values_to_bytes(&t).unwrap(),
            vec![0x00, 0x3c, 0x00, 0x40]
        );
    }

    #[test]
    fn absurd_splats_are_refused() {
        let t = TensorProto {
            dtype: 1,
            tensor_shape: shape(&[1 << 40]),
            float_val: vec![1.0],
            ..Default::default()
        };
        assert!(typed_values_to_bytes(&t).is_none());
    }
}

//! Slices of partitioned tensors: the slice specification (TensorFlow's `TensorSlice`), its
//! proto form, and copying a slice's elements into the full tensor.

use std::fmt;

use unbound_proto::tensorflow::{
    tensor_slice_proto::{extent::HasLengthHack, Extent as ExtentProto},
    TensorSliceProto,
};

/// One dimension of a slice: where it starts and how long it is (`None`: the whole
/// dimension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// First index in this dimension.
    pub start: i64,
    /// Number of indices, or `None` for the full dimension.
    pub length: Option<i64>,
}

/// Which part of a tensor a slice holds, one extent per dimension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceSpec {
    extents: Vec<Extent>,
}

impl SliceSpec {
    /// A slice from `(start, length)` pairs (`None` length: the full dimension).
    pub fn new(extents: Vec<(i64, Option<i64>)>) -> Self {
        Self {
            extents: extents
                .into_iter()
                .map(|(start, length)| Extent { start, length })
                .collect(),
        }
    }

    /// The slice a `TensorSliceProto` describes (an extent without length is full, start 0
    /// as TensorFlow reads it).
    pub fn from_proto(p: &TensorSliceProto) -> Self {
        Self {
            extents: p
                .extent
                .iter()
                .map(|e| match e.has_length_hack {
                    Some(HasLengthHack::Length(l)) => Extent {
                        start: e.start,
                        length: Some(l),
                    },
                    None => Extent {
                        start: 0,
                        length: None,
                    },
                })
                .collect(),
        }
    }

    /// The proto form TensorFlow writes (`TensorSlice::AsProto`: full extents are empty).
    pub fn to_proto(&self) -> TensorSliceProto {
        TensorSliceProto {
            extent: self
                .extents
                .iter()
                .map(|e| match e.length {
                    Some(l) => ExtentProto {
                        start: e.start,
                        has_length_hack: Some(HasLengthHack::Length(l)),
                    },
                    None => ExtentProto::default(),
                })
                .collect(),
        }
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.extents.len()
    }

    /// The extents.
    pub fn extents(&self) -> &[Extent] {
        &self.extents
    }

    /// Start and length of each dimension within `full_shape`, checked: same rank, lengths
    /// non-negative, the slice inside the tensor.
    pub fn resolve(&self, full_shape: &[i64]) -> Result<Vec<(u64, u64)>, crate::Fault> {
        self.resolve_impl(full_shape).map_err(crate::Fault)
    }

    fn resolve_impl(&self, full_shape: &[i64]) -> Result<Vec<(u64, u64)>, String> {
        if self.rank() != full_shape.len() {
            return Err(format!(
                "slice {self} has rank {} but the tensor has rank {}",
                self.rank(),
                full_shape.len()
            ));
        }
        let mut out = Vec::with_capacity(self.rank());
        for (e, &dim) in self.extents.iter().zip(full_shape) {
            let (start, len) = match e.length {
                None => (0, dim),
                Some(l) => (e.start, l),
            };
            let end = start.checked_add(len);
            if start < 0 || len < 0 || end.is_none_or(|end| end > dim) {
                return Err(format!(
                    "slice {self} does not fit the tensor's shape {full_shape:?}"
                ));
            }
            out.push((start as u64, len as u64));
        }
        Ok(out)
    }
}

impl fmt::Display for SliceSpec {
    /// TensorFlow's slice notation: `start,length` per dimension, `-` for a full one,
    /// separated by `:`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.extents.iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            match e.length {
                Some(l) => write!(f, "{},{}", e.start, l)?,
                None => f.write_str("-")?,
            }
        }
        Ok(())
    }
}

/// Whether two resolved slices (from [`SliceSpec::resolve`]) share an element.
pub fn overlap(a: &[(u64, u64)], b: &[(u64, u64)]) -> bool {
    a.iter()
        .zip(b)
        .all(|(&(s1, l1), &(s2, l2))| s1 < s2 + l2 && s2 < s1 + l1)
}

/// Calls `copy(src_element, dst_element, count)` for every contiguous run of elements of the
/// slice `resolved` (row-major) within the full tensor of `full_shape`: `src_element` counts
/// within the slice, `dst_element` within the full tensor.
pub fn for_each_run(
    full_shape: &[i64],
    resolved: &[(u64, u64)],
    mut copy: impl FnMut(u64, u64, u64),
) {
    let rank = full_shape.len();
    if rank == 0 {
        copy(0, 0, 1);
        return;
    }
    if resolved.iter().any(|&(_, l)| l == 0) {
        return;
    }
    // Row-major strides of the full tensor.
    let mut strides = vec![1u64; rank];
    for d in (0..rank - 1).rev() {
        strides[d] = strides[d + 1] * full_shape[d + 1] as u64;
    }
    let run = resolved[rank - 1].1;
    let mut index = vec![0u64; rank - 1];
    let mut src = 0u64;
    loop {
        let dst: u64 = (0..rank)
            .map(|d| {
                let i = if d + 1 < rank { index[d] } else { 0 };
                (resolved[d].0 + i) * strides[d]
            })
            .sum();
        copy(src, dst, run);
        src += run;
        // Next row: increment the multi-index over all but the last dimension.
        let mut d = rank - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            if index[d] < resolved[d].1 {
                break;
            }
            index[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_proto_round_trip() {
        let s = SliceSpec::new(vec![(0, Some(2)), (0, None)]);
        assert_eq!(s.to_string(), "0,2:-");
        assert_eq!(SliceSpec::from_proto(&s.to_proto()), s);
    }

    #[test]
    fn resolve_checks_bounds() {
        let s = SliceSpec::new(vec![(2, Some(2)), (0, None)]);
        assert_eq!(s.resolve(&[4, 6]).unwrap(), vec![(2, 2), (0, 6)]);
        assert!(s.resolve(&[3, 6]).is_err());
        assert!(s.resolve(&[4]).is_err());
        assert!(SliceSpec::new(vec![(i64::MAX, Some(2))])
            .resolve(&[4])
            .is_err());
        assert!(SliceSpec::new(vec![(-1, Some(2))]).resolve(&[4]).is_err());
    }

    #[test]
    fn runs_cover_the_slice() {
        // A 4x6 tensor; the slice rows 1..3, columns 2..5.
        let mut runs = Vec::new();
        for_each_run(&[4, 6], &[(1, 2), (2, 3)], |s, d, n| runs.push((s, d, n)));
        assert_eq!(runs, vec![(0, 8, 3), (3, 14, 3)]);
        let mut runs = Vec::new();
        for_each_run(&[2, 2, 2], &[(1, 1), (0, 2), (0, 2)], |s, d, n| {
            runs.push((s, d, n))
        });
        assert_eq!(runs, vec![(0, 4, 2), (2, 6, 2)]);
        assert!(overlap(&[(0, 2), (0, 6)], &[(1, 2), (0, 6)]));
        assert!(!overlap(&[(0, 2), (0, 6)], &[(2, 2), (0, 6)]));
    }
}

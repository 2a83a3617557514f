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

impl SliceSpec {
    /// Parses TensorFlow's slice text (`TensorSlice::Parse`): per dimension `-` (whole) or
    /// `start,length`, separated by `:` (e.g. `2,4:-`). An empty text is a rank-0 slice.
    pub fn parse(text: &str) -> Result<Self, crate::Fault> {
        if text.is_empty() {
            return Ok(Self::new(Vec::new()));
        }
        let mut extents = Vec::new();
        for part in text.split(':') {
            if part == "-" {
                extents.push((0, None));
                continue;
            }
            let nums = part
                .split_once(',')
                .and_then(|(a, b)| Some((a.parse::<i64>().ok()?, b.parse::<i64>().ok()?)));
            match nums {
                Some((start, len)) if start >= 0 && len >= 0 => extents.push((start, Some(len))),
                _ => {
                    return Err(crate::Fault(format!(
                        "slice {text:?}: dimension {part:?} is neither \"-\" nor \"start,length\" with non-negative numbers"
                    )))
                }
            }
        }
        Ok(Self::new(extents))
    }
}

/// A request for part of a tensor in TensorFlow's `shape_and_slice` text (the strings
/// `RestoreV2` takes): the full shape's dimensions separated by spaces, then the slice, e.g.
/// `"8 16 2,4:3,10"`; the empty text asks for the whole tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeAndSlice {
    /// The full shape the request assumes; `None` for the whole tensor (empty text).
    pub shape: Option<Vec<i64>>,
    /// The slice; `None` for the whole tensor.
    pub slice: Option<SliceSpec>,
}

impl ShapeAndSlice {
    /// Parses `text` as `checkpoint::ParseShapeAndSlice` does: at least two space-separated
    /// parts, every part but the last a non-negative dimension, the last a slice of the same
    /// rank.
    pub fn parse(text: &str) -> Result<Self, crate::Fault> {
        if text.is_empty() {
            return Ok(Self {
                shape: None,
                slice: None,
            });
        }
        let parts: Vec<&str> = text.split(' ').collect();
        if parts.len() < 2 {
            return Err(crate::Fault(format!(
                "shape_and_slice {text:?}: expected the dimensions and a slice separated by spaces, e.g. \"8 16 0,4:-\""
            )));
        }
        let (dims, slice) = parts.split_at(parts.len() - 1);
        let shape = dims
            .iter()
            .map(|d| d.parse::<i64>().ok().filter(|&v| v >= 0))
            .collect::<Option<Vec<i64>>>()
            .ok_or_else(|| {
                crate::Fault(format!(
                    "shape_and_slice {text:?}: the dimensions must be non-negative integers"
                ))
            })?;
        let slice = SliceSpec::parse(slice[0])?;
        if slice.rank() != shape.len() {
            return Err(crate::Fault(format!(
                "shape_and_slice {text:?}: slice of rank {} for a shape of rank {}",
                slice.rank(),
                shape.len()
            )));
        }
        slice
            .resolve(&shape)
            .map_err(|f| crate::Fault(format!("shape_and_slice {text:?}: {f}")))?;
        Ok(Self {
            shape: Some(shape),
            slice: Some(slice),
        })
    }

    /// The box within a tensor of `full_shape`: per dimension start and length. Fails when
    /// the request's shape is not the tensor's (TensorFlow's "shape in shape_and_slice spec
    /// does not match the shape in the checkpoint").
    pub fn resolve(&self, full_shape: &[i64]) -> Result<Vec<(u64, u64)>, crate::Fault> {
        match (&self.shape, &self.slice) {
            (Some(shape), Some(slice)) => {
                if shape != full_shape {
                    return Err(crate::Fault(format!(
                        "the request's shape {shape:?} is not the stored shape {full_shape:?}"
                    )));
                }
                slice.resolve(full_shape)
            }
            _ => Ok(full_shape.iter().map(|&d| (0, d.max(0) as u64)).collect()),
        }
    }
}

/// The intersection of two boxes (per dimension start and length), if it holds an element.
pub fn intersect(a: &[(u64, u64)], b: &[(u64, u64)]) -> Option<Vec<(u64, u64)>> {
    a.iter()
        .zip(b)
        .map(|(&(s1, l1), &(s2, l2))| {
            let lo = s1.max(s2);
            let hi = (s1 + l1).min(s2 + l2);
            (hi > lo).then(|| (lo, hi - lo))
        })
        .collect()
}

/// The number of elements of a box.
pub fn box_len(b: &[(u64, u64)]) -> u64 {
    b.iter().map(|&(_, l)| l).product()
}

/// Calls `copy(src_element, dst_element, count)` for every run of elements of box `inner`
/// that is contiguous both in the row-major box `src` and in the row-major box `dst` (all
/// three in the same global coordinates; `inner` lies within both). Runs are as long as the
/// two layouts allow: trailing dimensions `inner` spans fully in both are merged.
pub fn for_each_box_run(
    inner: &[(u64, u64)],
    src: &[(u64, u64)],
    dst: &[(u64, u64)],
    mut copy: impl FnMut(u64, u64, u64),
) {
    let rank = inner.len();
    if rank == 0 {
        copy(0, 0, 1);
        return;
    }
    if inner.iter().any(|&(_, l)| l == 0) {
        return;
    }
    let strides = |b: &[(u64, u64)]| {
        let mut s = vec![1u64; rank];
        for d in (0..rank - 1).rev() {
            s[d] = s[d + 1] * b[d + 1].1;
        }
        s
    };
    let (ss, ds) = (strides(src), strides(dst));
    // Merge trailing dimensions that `inner` spans fully in both boxes.
    let mut split = rank - 1;
    let mut run = inner[rank - 1].1;
    while split > 0 && inner[split] == src[split] && inner[split] == dst[split] {
        split -= 1;
        run *= inner[split].1;
    }
    // Runs cover dimension `split` and every one after it; the dimensions before it are
    // iterated.
    let outer = split;
    let mut index = vec![0u64; outer];
    loop {
        let mut s = 0u64;
        let mut d = 0u64;
        for k in 0..rank {
            let i = inner[k].0 + if k < outer { index[k] } else { 0 };
            s += (i - src[k].0) * ss[k];
            d += (i - dst[k].0) * ds[k];
        }
        copy(s, d, run);
        let mut k = outer;
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            index[k] += 1;
            if index[k] < inner[k].1 {
                break;
            }
            index[k] = 0;
        }
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
    fn parses_tensorflow_slice_text() {
        assert_eq!(
            SliceSpec::parse("2,4:-").unwrap(),
            SliceSpec::new(vec![(2, Some(4)), (0, None)])
        );
        assert!(SliceSpec::parse("2:-").is_err());
        assert!(SliceSpec::parse("-1,2").is_err());
        let r = ShapeAndSlice::parse("8 16 2,4:3,10").unwrap();
        assert_eq!(r.resolve(&[8, 16]).unwrap(), vec![(2, 4), (3, 10)]);
        assert!(r.resolve(&[8, 17]).is_err());
        assert!(ShapeAndSlice::parse("8 16 2,4").is_err());
        assert!(ShapeAndSlice::parse("8 16 2,7:-").is_err());
        assert!(ShapeAndSlice::parse("2,4").is_err());
        assert_eq!(
            ShapeAndSlice::parse("").unwrap().resolve(&[3, 2]).unwrap(),
            vec![(0, 3), (0, 2)]
        );
    }

    #[test]
    fn box_runs_merge_full_trailing_dimensions() {
        // A 4x6 source box at the origin; the destination the rows 1..3, all columns.
        let src = [(0, 4), (0, 6)];
        let dst = [(1, 2), (0, 6)];
        let mut runs = Vec::new();
        for_each_box_run(&dst, &src, &dst, |s, d, n| runs.push((s, d, n)));
        assert_eq!(runs, vec![(6, 0, 12)]);
        // Columns 2..5 of rows 1..3 into a destination box of columns 2..6.
        let inner = [(1, 2), (2, 3)];
        let dst = [(0, 4), (2, 4)];
        let mut runs = Vec::new();
        for_each_box_run(&inner, &src, &dst, |s, d, n| runs.push((s, d, n)));
        assert_eq!(runs, vec![(8, 4, 3), (14, 8, 3)]);
        assert_eq!(
            intersect(&[(0, 4), (2, 2)], &[(3, 4), (0, 3)]),
            Some(vec![(3, 1), (2, 1)])
        );
        assert_eq!(intersect(&[(0, 4)], &[(4, 4)]), None);
        let mut runs = Vec::new();
        for_each_box_run(&[], &[], &[], |s, d, n| runs.push((s, d, n)));
        assert_eq!(runs, vec![(0, 0, 1)]);
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

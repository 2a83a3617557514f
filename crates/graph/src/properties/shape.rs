//! Partially known shapes: unknown rank, or a list of dims where `-1` is an unknown dim.

use unbound_proto::tensorflow::{tensor_shape_proto, TensorShapeProto};

/// The largest rank TensorFlow supports; anything larger is treated as unknown (and keeps
/// hostile graphs from making us allocate huge dim lists).
pub(crate) const MAX_RANK: usize = 254;

/// A partially known shape.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub(crate) enum Shape {
    /// Even the rank is unknown.
    #[default]
    Unknown,
    /// Known rank; each dim is its size, or `-1` when unknown.
    Known(Vec<i64>),
}

/// Normalizes one dim: negative sizes mean unknown.
pub(crate) fn dim(size: i64) -> i64 {
    if size < 0 {
        -1
    } else {
        size
    }
}

impl Shape {
    /// A shape of known dims (negative entries become unknown); unknown if the rank is too big.
    pub(crate) fn known(dims: Vec<i64>) -> Self {
        if dims.len() > MAX_RANK {
            return Shape::Unknown;
        }
        Shape::Known(dims.into_iter().map(dim).collect())
    }

    /// The scalar shape `[]`.
    pub(crate) fn scalar() -> Self {
        Shape::Known(Vec::new())
    }

    /// The vector shape `[n]` (`n < 0` for unknown length).
    pub(crate) fn vector(n: i64) -> Self {
        Shape::Known(vec![dim(n)])
    }

    /// A shape of rank `rank` with every dim unknown.
    pub(crate) fn unknown_dims(rank: usize) -> Self {
        if rank > MAX_RANK {
            return Shape::Unknown;
        }
        Shape::Known(vec![-1; rank])
    }

    /// Reads a `TensorShapeProto`.
    pub(crate) fn from_proto(proto: &TensorShapeProto) -> Self {
        if proto.unknown_rank {
            return Shape::Unknown;
        }
        Shape::known(proto.dim.iter().map(|d| d.size).collect())
    }

    /// The `TensorShapeProto` TensorFlow reports for this shape.
    pub(crate) fn to_proto(&self) -> TensorShapeProto {
        match self {
            Shape::Unknown => TensorShapeProto {
                dim: Vec::new(),
                unknown_rank: true,
            },
            Shape::Known(dims) => TensorShapeProto {
                dim: dims
                    .iter()
                    .map(|&size| tensor_shape_proto::Dim {
                        size,
                        name: String::new(),
                    })
                    .collect(),
                unknown_rank: false,
            },
        }
    }

    /// The dims, when the rank is known.
    pub(crate) fn dims(&self) -> Option<&[i64]> {
        match self {
            Shape::Unknown => None,
            Shape::Known(dims) => Some(dims),
        }
    }

    /// The rank, when known.
    pub(crate) fn rank(&self) -> Option<usize> {
        self.dims().map(<[i64]>::len)
    }

    /// Dim `i` (`-1` when unknown or out of range).
    pub(crate) fn dim(&self, i: usize) -> i64 {
        self.dims().and_then(|d| d.get(i).copied()).unwrap_or(-1)
    }

    /// The number of elements, when every dim is known and the product fits in an `i64`.
    pub(crate) fn num_elements(&self) -> Option<i64> {
        let dims = self.dims()?;
        dims.iter().try_fold(
            1i64,
            |acc, &d| {
                if d < 0 {
                    None
                } else {
                    acc.checked_mul(d)
                }
            },
        )
    }

    /// This shape with the rank forced to `rank`: unknown rank becomes all-unknown dims, a
    /// different known rank (an invalid graph) also becomes all-unknown dims.
    pub(crate) fn with_rank(&self, rank: usize) -> Shape {
        match self {
            Shape::Known(dims) if dims.len() == rank => self.clone(),
            _ => Shape::unknown_dims(rank),
        }
    }

    /// The most specific shape compatible with both; on a conflict `self` wins.
    pub(crate) fn merge(&self, other: &Shape) -> Shape {
        match (self, other) {
            (Shape::Unknown, o) => o.clone(),
            (s, Shape::Unknown) => s.clone(),
            (Shape::Known(a), Shape::Known(b)) if a.len() == b.len() => Shape::Known(
                a.iter()
                    .zip(b)
                    .map(|(&x, &y)| if x < 0 { y } else { x })
                    .collect(),
            ),
            (s, _) => s.clone(),
        }
    }

    /// The numpy-style broadcast of two shapes (assuming the graph is valid where dims are
    /// unknown; a definite mismatch gives an unknown dim).
    pub(crate) fn broadcast(&self, other: &Shape) -> Shape {
        let (Some(a), Some(b)) = (self.dims(), other.dims()) else {
            return Shape::Unknown;
        };
        let rank = a.len().max(b.len());
        let mut out = vec![-1; rank];
        for (i, slot) in out.iter_mut().enumerate() {
            let x = pick(a, rank, i);
            let y = pick(b, rank, i);
            *slot = match (x, y) {
                (1, y) => y,
                (x, 1) => x,
                (x, y) if x == y => x,
                (-1, y) => y,
                (x, -1) => x,
                _ => -1,
            };
        }
        Shape::Known(out)
    }
}

/// Dim `i` of `dims` right-aligned to `rank` (missing leading dims broadcast as 1).
fn pick(dims: &[i64], rank: usize, i: usize) -> i64 {
    let offset = rank - dims.len();
    if i < offset {
        1
    } else {
        dims[i - offset]
    }
}

/// Normalizes a possibly negative axis for a tensor of rank `rank`; `None` when out of range.
pub(crate) fn axis(axis: i64, rank: usize) -> Option<usize> {
    let rank = i64::try_from(rank).ok()?;
    let a = if axis < 0 {
        axis.checked_add(rank)?
    } else {
        axis
    };
    if (0..rank).contains(&a) {
        usize::try_from(a).ok()
    } else {
        None
    }
}

/// Adds two dims (unknown if either is).
pub(crate) fn add_dims(a: i64, b: i64) -> i64 {
    if a < 0 || b < 0 {
        -1
    } else {
        a.checked_add(b).unwrap_or(-1)
    }
}

/// Multiplies two dims (unknown if either is, `0` if either is `0`).
pub(crate) fn mul_dims(a: i64, b: i64) -> i64 {
    if a == 0 || b == 0 {
        0
    } else if a < 0 || b < 0 {
        -1
    } else {
        a.checked_mul(b).unwrap_or(-1)
    }
}

//! The folded kernels, with NumPy broadcasting, computed as TensorFlow's CPU kernels compute
//! them: IEEE arithmetic for floats (`Maximum`/`Minimum` propagate NaN), two's-complement
//! wrapping for integers.

use crate::tensor::{Tensor, Values, MAX_ELEMENTS};

/// A folded binary op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binary {
    /// `Add`, `AddV2`.
    Add,
    /// `Sub`.
    Sub,
    /// `Mul`.
    Mul,
    /// `RealDiv` (floats only: integer division can fail at run time).
    RealDiv,
    /// `Maximum`.
    Maximum,
    /// `Minimum`.
    Minimum,
}

/// A folded unary op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unary {
    /// `Neg`.
    Neg,
    /// `Square`.
    Square,
    /// `Sqrt` (floats only).
    Sqrt,
}

/// The op of a TensorFlow op name.
pub enum Op {
    /// Two data inputs.
    Binary(Binary),
    /// One data input.
    Unary(Unary),
}

impl Op {
    /// The folded op named `op`, if any.
    pub fn parse(op: &str) -> Option<Op> {
        Some(match op {
            "Add" | "AddV2" => Op::Binary(Binary::Add),
            "Sub" => Op::Binary(Binary::Sub),
            "Mul" => Op::Binary(Binary::Mul),
            "RealDiv" => Op::Binary(Binary::RealDiv),
            "Maximum" => Op::Binary(Binary::Maximum),
            "Minimum" => Op::Binary(Binary::Minimum),
            "Neg" => Op::Unary(Unary::Neg),
            "Square" => Op::Unary(Unary::Square),
            "Sqrt" => Op::Unary(Unary::Sqrt),
            _ => return None,
        })
    }

    /// The number of data inputs.
    pub fn arity(&self) -> usize {
        match self {
            Op::Binary(_) => 2,
            Op::Unary(_) => 1,
        }
    }
}

/// The broadcast shape of `a` and `b` (NumPy rules), if compatible.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| (i + s.len()).checked_sub(rank).map_or(1, |k| s[k]);
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// For each element of `out`, the index of the element of `shape` broadcast to it.
fn source_indices(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let n: usize = out.iter().product();
    let offset = out.len() - shape.len();
    // Strides of `shape` aligned to `out`, 0 where `shape` broadcasts.
    let mut strides = vec![0usize; out.len()];
    let mut stride = 1;
    for k in (0..shape.len()).rev() {
        strides[k + offset] = if shape[k] == 1 { 0 } else { stride };
        stride *= shape[k];
    }
    (0..n)
        .map(|mut flat| {
            let mut index = 0;
            for k in (0..out.len()).rev() {
                index += (flat % out[k]) * strides[k];
                flat /= out[k];
            }
            index
        })
        .collect()
}

fn zip_broadcast<T: Copy>(
    a: &[T],
    b: &[T],
    ia: &[usize],
    ib: &[usize],
    f: impl Fn(T, T) -> Option<T>,
) -> Option<Vec<T>> {
    ia.iter().zip(ib).map(|(&i, &j)| f(a[i], b[j])).collect()
}

fn max_f<T: PartialOrd + Copy>(a: T, b: T, nan: impl Fn(T) -> bool) -> T {
    if nan(a) {
        a
    } else if nan(b) || a < b {
        b
    } else {
        a
    }
}

fn min_f<T: PartialOrd + Copy>(a: T, b: T, nan: impl Fn(T) -> bool) -> T {
    if nan(a) {
        a
    } else if nan(b) || b < a {
        b
    } else {
        a
    }
}

macro_rules! float_binary {
    ($op:expr, $a:expr, $b:expr, $ia:expr, $ib:expr, $t:ty) => {
        zip_broadcast($a, $b, $ia, $ib, |x: $t, y: $t| {
            Some(match $op {
                Binary::Add => x + y,
                Binary::Sub => x - y,
                Binary::Mul => x * y,
                Binary::RealDiv => x / y,
                Binary::Maximum => max_f(x, y, <$t>::is_nan),
                Binary::Minimum => min_f(x, y, <$t>::is_nan),
            })
        })
    };
}

macro_rules! int_binary {
    ($op:expr, $a:expr, $b:expr, $ia:expr, $ib:expr) => {
        zip_broadcast($a, $b, $ia, $ib, |x, y| match $op {
            Binary::Add => Some(x.wrapping_add(y)),
            Binary::Sub => Some(x.wrapping_sub(y)),
            Binary::Mul => Some(x.wrapping_mul(y)),
            Binary::RealDiv => None,
            Binary::Maximum => Some(x.max(y)),
            Binary::Minimum => Some(x.min(y)),
        })
    };
}

/// `op(a, b)`, or `None` when the dtypes differ, the shapes do not broadcast, the result is
/// larger than [`MAX_ELEMENTS`] or the op is not folded for the dtype.
pub fn binary(op: Binary, a: &Tensor, b: &Tensor) -> Option<Tensor> {
    let shape = broadcast_shape(&a.shape, &b.shape)?;
    if shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))? > MAX_ELEMENTS {
        return None;
    }
    let (ia, ib) = (
        source_indices(&a.shape, &shape),
        source_indices(&b.shape, &shape),
    );
    let values = match (&a.values, &b.values) {
        (Values::F32(x), Values::F32(y)) => Values::F32(float_binary!(op, x, y, &ia, &ib, f32)?),
        (Values::F64(x), Values::F64(y)) => Values::F64(float_binary!(op, x, y, &ia, &ib, f64)?),
        (Values::I32(x), Values::I32(y)) => Values::I32(int_binary!(op, x, y, &ia, &ib)?),
        (Values::I64(x), Values::I64(y)) => Values::I64(int_binary!(op, x, y, &ia, &ib)?),
        _ => return None,
    };
    Some(Tensor { shape, values })
}

/// `op(a)`, or `None` when the op is not folded for the dtype.
pub fn unary(op: Unary, a: &Tensor) -> Option<Tensor> {
    let values = match (&a.values, op) {
        (Values::F32(x), Unary::Neg) => Values::F32(x.iter().map(|v| -v).collect()),
        (Values::F32(x), Unary::Square) => Values::F32(x.iter().map(|v| v * v).collect()),
        (Values::F32(x), Unary::Sqrt) => Values::F32(x.iter().map(|v| v.sqrt()).collect()),
        (Values::F64(x), Unary::Neg) => Values::F64(x.iter().map(|v| -v).collect()),
        (Values::F64(x), Unary::Square) => Values::F64(x.iter().map(|v| v * v).collect()),
        (Values::F64(x), Unary::Sqrt) => Values::F64(x.iter().map(|v| v.sqrt()).collect()),
        (Values::I32(x), Unary::Neg) => Values::I32(x.iter().map(|v| v.wrapping_neg()).collect()),
        (Values::I32(x), Unary::Square) => {
            Values::I32(x.iter().map(|v| v.wrapping_mul(*v)).collect())
        }
        (Values::I64(x), Unary::Neg) => Values::I64(x.iter().map(|v| v.wrapping_neg()).collect()),
        (Values::I64(x), Unary::Square) => {
            Values::I64(x.iter().map(|v| v.wrapping_mul(*v)).collect())
        }
        (_, Unary::Sqrt) => return None,
    };
    Some(Tensor {
        shape: a.shape.clone(),
        values,
    })
}

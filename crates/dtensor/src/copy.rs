//! Copying a box of one C-order array into another as a few long contiguous runs: trailing
//! axes the box spans completely in both arrays are merged into one run, so a copy costs
//! one `memcpy` per run, never one per element.

/// An element type the copier moves: plain bytes (`memcpy`) or owned strings (clones).
pub(crate) trait Item: Sized {
    fn copy_run(dst: &mut [Self], src: &[Self]);
}

impl Item for u8 {
    fn copy_run(dst: &mut [u8], src: &[u8]) {
        dst.copy_from_slice(src);
    }
}

impl Item for Vec<u8> {
    fn copy_run(dst: &mut [Vec<u8>], src: &[Vec<u8>]) {
        dst.clone_from_slice(src);
    }
}

/// Where a box lies in an array: the array's shape and the box's origin in it.
pub(crate) struct Placement<'a> {
    pub shape: &'a [usize],
    pub origin: &'a [usize],
}

/// Copies the box of `extent` at `src_at` in `src` to `dst_at` in `dst`. Elements are
/// `unit` items wide (the item size for bytes, 1 for strings). The caller guarantees the
/// box lies inside both arrays and the slices match their shapes.
pub(crate) fn copy_box<T: Item>(
    src: &[T],
    src_at: Placement<'_>,
    dst: &mut [T],
    dst_at: Placement<'_>,
    extent: &[usize],
    unit: usize,
) {
    let rank = extent.len();
    if extent.contains(&0) {
        return;
    }
    // Row-major strides in items.
    let strides = |shape: &[usize]| {
        let mut s = vec![unit; rank];
        for i in (0..rank.saturating_sub(1)).rev() {
            s[i] = s[i + 1] * shape[i + 1];
        }
        s
    };
    let (ss, ds) = (strides(src_at.shape), strides(dst_at.shape));
    // Merge trailing axes spanned completely in both arrays into one run.
    let mut run = unit;
    let mut outer = rank;
    while outer > 0 {
        outer -= 1;
        run *= extent[outer];
        let full = extent[outer] == src_at.shape[outer] && extent[outer] == dst_at.shape[outer];
        if !full {
            break;
        }
    }
    let base =
        |at: &[usize], strides: &[usize]| at.iter().zip(strides).map(|(a, s)| a * s).sum::<usize>();
    let mut idx = vec![0usize; outer];
    loop {
        let s = base(src_at.origin, &ss) + idx.iter().zip(&ss).map(|(i, s)| i * s).sum::<usize>();
        let d = base(dst_at.origin, &ds) + idx.iter().zip(&ds).map(|(i, s)| i * s).sum::<usize>();
        T::copy_run(&mut dst[d..d + run], &src[s..s + run]);
        // Next outer index (odometer).
        let mut k = outer;
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < extent[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_inner_boxes_and_whole_rows() {
        // src 3x4 (0..12), copy the 2x2 box at (1,1) to (0,2) of a 2x4 zero array.
        let src: Vec<u8> = (0..12).collect();
        let mut dst = vec![0u8; 8];
        copy_box(
            &src,
            Placement {
                shape: &[3, 4],
                origin: &[1, 1],
            },
            &mut dst,
            Placement {
                shape: &[2, 4],
                origin: &[0, 2],
            },
            &[2, 2],
            1,
        );
        assert_eq!(dst, vec![0, 0, 5, 6, 0, 0, 9, 10]);
        // Whole rows, 2-byte items: one run.
        let mut dst = vec![0u8; 16];
        let src: Vec<u8> = (0..24).collect();
        copy_box(
            &src,
            Placement {
                shape: &[3, 4],
                origin: &[1, 0],
            },
            &mut dst,
            Placement {
                shape: &[2, 4],
                origin: &[0, 0],
            },
            &[2, 4],
            2,
        );
        assert_eq!(dst, (8..24).collect::<Vec<u8>>());
        // Rank 0.
        let mut dst = vec![0u8; 4];
        copy_box(
            &[1u8, 2, 3, 4],
            Placement {
                shape: &[],
                origin: &[],
            },
            &mut dst,
            Placement {
                shape: &[],
                origin: &[],
            },
            &[],
            4,
        );
        assert_eq!(dst, vec![1, 2, 3, 4]);
    }
}

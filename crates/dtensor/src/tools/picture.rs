//! Which device holds which block of a rank-1 or rank-2 array, as a grid (what JAX's
//! `visualize_array_sharding` draws): rows are the distinct blocks of axis 0, columns those
//! of axis 1 (a rank-1 array is one row), each cell the devices holding that block.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::report::LayoutReport;

/// The grid of blocks of a rank-1 or rank-2 layout over a global shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Picture {
    /// The `[start, end)` of each row's block on axis 0 (one `[0, 1)` row for rank 1).
    pub rows: Vec<(i64, i64)>,
    /// The `[start, end)` of each column's block on the last axis.
    pub cols: Vec<(i64, i64)>,
    /// Per row, per column, the global ids of the devices holding that block.
    pub cells: Vec<Vec<Vec<i64>>>,
}

/// The picture of `report` (made with a global shape); `None` for other ranks or without
/// device boxes.
pub fn picture(report: &LayoutReport) -> Option<Picture> {
    let devices = report.devices.as_ref()?;
    let rank = report.global_shape.as_ref()?.len();
    if !(1..=2).contains(&rank) {
        return None;
    }
    let span = |d: &crate::report::DeviceBox, axis: usize| -> (i64, i64) {
        let start = d.shard.offset[axis];
        (start, start + d.shard.shape[axis])
    };
    let row_of = |d: &crate::report::DeviceBox| if rank == 2 { span(d, 0) } else { (0, 1) };
    let col_of = |d: &crate::report::DeviceBox| span(d, rank - 1);
    let rows: Vec<(i64, i64)> = devices
        .iter()
        .map(row_of)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let cols: Vec<(i64, i64)> = devices
        .iter()
        .map(col_of)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut cells = vec![vec![Vec::new(); cols.len()]; rows.len()];
    for d in devices {
        let r = rows.binary_search(&row_of(d)).ok()?;
        let c = cols.binary_search(&col_of(d)).ok()?;
        cells[r][c].push(d.device_id);
    }
    for row in &mut cells {
        for cell in row {
            cell.sort_unstable();
        }
    }
    Some(Picture { rows, cols, cells })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Chunking, Layout};

    #[test]
    fn a_two_by_four_mesh_draws_its_blocks() {
        let layout = Layout::parse("sharding_specs:x,unsharded, mesh:|x=2,y=4|*CPU").unwrap();
        let report = LayoutReport::new(&layout, Vec::new(), Some(&[8, 6]), Chunking::Even).unwrap();
        let p = picture(&report).unwrap();
        assert_eq!(p.rows, [(0, 4), (4, 8)]);
        assert_eq!(p.cols, [(0, 6)]);
        assert_eq!(p.cells, [vec![vec![0, 1, 2, 3]], vec![vec![4, 5, 6, 7]]]);
        let layout = Layout::parse("sharding_specs:y, mesh:|x=2,y=4|*CPU").unwrap();
        let report = LayoutReport::new(&layout, Vec::new(), Some(&[8]), Chunking::Even).unwrap();
        let p = picture(&report).unwrap();
        assert_eq!(p.rows, [(0, 1)]);
        assert_eq!(p.cols.len(), 4);
        assert_eq!(p.cells[0][1], [1, 5]);
    }
}

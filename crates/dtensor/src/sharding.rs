//! The general sharding model behind pack, unpack and relayout: for each tensor axis, the
//! mesh dimensions it is split over (major first), optionally unevenly; a DTensor
//! [`Layout`] is the case of at most one mesh dimension per axis, split evenly.

use serde::Serialize;

use crate::error::{DTensorError, Result};
use crate::layout::Layout;
use crate::mesh::Mesh;
use crate::spec::UNSHARDED;

/// How an axis of size `g` is cut into `n` pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Chunking {
    /// Equal pieces; `g` must divide by `n` (TensorFlow's rule, checked here).
    #[default]
    Even,
    /// PyTorch's `torch.chunk` rule (beyond TensorFlow): pieces of `ceil(g / n)`, the last
    /// ones smaller or empty.
    Uneven,
}

/// A sharding of a tensor over a mesh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sharding {
    mesh: Mesh,
    axes: Vec<Vec<usize>>,
    partial: Vec<usize>,
    chunking: Chunking,
}

/// The part of the global array one device holds: per axis, the start and the length.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ShardBox {
    /// Start of the box on each axis.
    pub offset: Vec<i64>,
    /// Length of the box on each axis (its local shape).
    pub shape: Vec<i64>,
}

impl ShardBox {
    /// The box as `(start, length)` per axis, the region form a bundle's box readers take
    /// (offsets and lengths are never negative).
    pub fn region(&self) -> Vec<(u64, u64)> {
        self.offset
            .iter()
            .zip(&self.shape)
            .map(|(&o, &l)| (o as u64, l as u64))
            .collect()
    }
    /// The number of elements.
    pub fn len(&self) -> i64 {
        self.shape.iter().product()
    }
    /// No elements.
    pub fn is_empty(&self) -> bool {
        self.shape.contains(&0)
    }
    /// The intersection with `other`, if it holds any element.
    pub fn intersect(&self, other: &ShardBox) -> Option<ShardBox> {
        let mut offset = Vec::with_capacity(self.offset.len());
        let mut shape = Vec::with_capacity(self.offset.len());
        for i in 0..self.offset.len() {
            let lo = self.offset[i].max(other.offset[i]);
            let hi = (self.offset[i] + self.shape[i]).min(other.offset[i] + other.shape[i]);
            if hi <= lo {
                return None;
            }
            offset.push(lo);
            shape.push(hi - lo);
        }
        Some(ShardBox { offset, shape })
    }
}

/// Start and length of piece `idx` of `n` of an axis of size `g`.
pub fn chunk(g: i64, n: i64, idx: i64, chunking: Chunking) -> (i64, i64) {
    match chunking {
        Chunking::Even => {
            let len = g / n;
            (idx * len, len)
        }
        Chunking::Uneven => {
            let size = g / n + i64::from(g % n != 0);
            let start = idx.saturating_mul(size).min(g);
            (start, size.min(g - start))
        }
    }
}

impl Sharding {
    /// A sharding from per-axis mesh dimension lists (major first) and mesh dimensions
    /// holding partial sums (which matter to relayout plans only).
    pub fn new(
        mesh: Mesh,
        axes: Vec<Vec<usize>>,
        partial: Vec<usize>,
        chunking: Chunking,
    ) -> Result<Sharding> {
        let rank = mesh.dims().len();
        let mut used = vec![false; rank];
        for &m in axes.iter().flatten().chain(&partial) {
            if m >= rank {
                return Err(DTensorError::Layout {
                    input: format!("{axes:?}"),
                    fault: format!("mesh dimension {m} out of range"),
                });
            }
            if std::mem::replace(&mut used[m], true) {
                return Err(DTensorError::Layout {
                    input: format!("{axes:?}"),
                    fault: format!("mesh dimension {} is used twice", mesh.dims()[m].name),
                });
            }
        }
        if let Some(d) = mesh.dims().iter().find(|d| d.size < 1) {
            return Err(DTensorError::Layout {
                input: mesh.to_string(),
                fault: format!("mesh dimension {} has size {}", d.name, d.size),
            });
        }
        if mesh.is_empty() || mesh.size().is_none_or(|n| n <= 0) {
            return Err(DTensorError::Layout {
                input: mesh.to_string(),
                fault: "the mesh has no devices".into(),
            });
        }
        Ok(Sharding {
            mesh,
            axes,
            partial,
            chunking,
        })
    }

    /// The sharding of a DTensor layout (`any` and `match` are refused: they name no
    /// concrete sharding). A single-device layout has all of the tensor on its one device,
    /// which this model cannot place; it is refused too.
    pub fn from_layout(layout: &Layout, chunking: Chunking) -> Result<Sharding> {
        if layout.is_single_device() || layout.is_empty() {
            return Err(DTensorError::Layout {
                input: layout.to_string(),
                fault: "a single-device or empty layout has no shards".into(),
            });
        }
        let axes = layout
            .axis_mesh_dims()?
            .into_iter()
            .map(|d| d.into_iter().collect())
            .collect();
        Sharding::new(layout.mesh().clone(), axes, Vec::new(), chunking)
    }

    /// The mesh.
    pub fn mesh(&self) -> &Mesh {
        &self.mesh
    }
    /// Mesh dimensions per axis, major first.
    pub fn axes(&self) -> &[Vec<usize>] {
        &self.axes
    }
    /// Mesh dimensions holding partial sums.
    pub fn partial(&self) -> &[usize] {
        &self.partial
    }
    /// How axes are cut.
    pub fn chunking(&self) -> Chunking {
        self.chunking
    }
    /// The tensor rank.
    pub fn rank(&self) -> usize {
        self.axes.len()
    }

    /// The DTensor layout of this sharding, if it is one (one mesh dimension per axis at
    /// most, even, no partial sums).
    pub fn to_layout(&self) -> Option<Layout> {
        if self.chunking != Chunking::Even
            || !self.partial.is_empty()
            || self.axes.iter().any(|a| a.len() > 1)
        {
            return None;
        }
        let specs = self
            .axes
            .iter()
            .map(|a| {
                a.first()
                    .map_or(UNSHARDED.to_string(), |&m| self.mesh.dims()[m].name.clone())
            })
            .collect();
        Layout::new(crate::layout::LayoutType::Static, specs, self.mesh.clone()).ok()
    }

    /// A readable description: the layout string, or per-axis mesh dimension lists.
    pub fn describe(&self) -> String {
        if let Some(l) = self.to_layout() {
            return l.to_string();
        }
        let names = |dims: &[usize]| {
            dims.iter()
                .map(|&m| self.mesh.dims()[m].name.clone())
                .collect::<Vec<_>>()
        };
        let axes: Vec<String> = self
            .axes
            .iter()
            .map(|a| {
                if a.is_empty() {
                    UNSHARDED.to_string()
                } else {
                    names(a).join("*")
                }
            })
            .collect();
        let mut s = format!("[{}]", axes.join(", "));
        if !self.partial.is_empty() {
            s += &format!(" partial(sum) over {}", names(&self.partial).join(","));
        }
        if self.chunking == Chunking::Uneven {
            s += " uneven";
        }
        s
    }

    /// The number of pieces of axis `axis`.
    pub fn pieces(&self, axis: usize) -> i64 {
        self.axes[axis]
            .iter()
            .map(|&m| self.mesh.dims()[m].size)
            .product()
    }

    /// Checks `global` against the sharding: rank, non-negative sizes, divisibility for
    /// even chunking.
    pub fn check_shape(&self, global: &[i64]) -> Result<()> {
        let err = |fault: String| DTensorError::Shape {
            shape: global.to_vec(),
            layout: self.describe(),
            fault,
        };
        if global.len() != self.rank() {
            return Err(err(format!(
                "rank {} given, the layout has rank {}",
                global.len(),
                self.rank()
            )));
        }
        for (i, &g) in global.iter().enumerate() {
            if g < 0 {
                return Err(err(format!("axis {i} has negative size {g}")));
            }
            if Self::element_count(global).is_none() {
                return Err(err("the number of elements overflows".into()));
            }
            let n = self.pieces(i);
            if self.chunking == Chunking::Even && g % n != 0 {
                return Err(err(format!(
                    "axis {i} of size {g} does not divide into {n} shards (TensorFlow requires \
                     even shards; uneven sharding is an opt-in extension)"
                )));
            }
        }
        Ok(())
    }

    /// The number of elements of `global`, if it fits in an `i64`.
    pub fn element_count(global: &[i64]) -> Option<i64> {
        global.iter().try_fold(1i64, |a, &d| a.checked_mul(d))
    }

    /// The box held by the device at mesh position `pos`.
    pub fn box_at(&self, global: &[i64], pos: i64) -> Result<ShardBox> {
        let loc = self.mesh.device_location(pos)?;
        let mut offset = Vec::with_capacity(global.len());
        let mut shape = Vec::with_capacity(global.len());
        for (i, &g) in global.iter().enumerate() {
            let mut idx = 0;
            for &m in &self.axes[i] {
                idx = idx * self.mesh.dims()[m].size + loc[m];
            }
            let (o, l) = chunk(g, self.pieces(i), idx, self.chunking);
            offset.push(o);
            shape.push(l);
        }
        Ok(ShardBox { offset, shape })
    }

    /// The box of each local device, in local-device order.
    pub fn local_boxes(&self, global: &[i64]) -> Result<Vec<ShardBox>> {
        self.check_shape(global)?;
        self.mesh
            .local_positions()?
            .into_iter()
            .map(|p| self.box_at(global, p as i64))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torch_chunk_rule() {
        // torch.chunk(torch.arange(10), 4) -> sizes 3,3,3,1; of 5 in 4: 2,2,1,0.
        let sizes: Vec<i64> = (0..4)
            .map(|i| chunk(10, 4, i, Chunking::Uneven).1)
            .collect();
        assert_eq!(sizes, vec![3, 3, 3, 1]);
        let parts: Vec<(i64, i64)> = (0..4).map(|i| chunk(5, 4, i, Chunking::Uneven)).collect();
        assert_eq!(parts, vec![(0, 2), (2, 2), (4, 1), (5, 0)]);
        assert_eq!(chunk(2, 4, 3, Chunking::Uneven), (2, 0));
    }

    #[test]
    fn odd_meshes_from_protos_are_refused() {
        use unbound_proto::tensorflow::dtensor::{MeshDimensionProto, MeshProto};
        let dim = |name: &str, size| MeshDimensionProto {
            name: name.into(),
            size,
        };
        let proto = MeshProto {
            mesh_dimensions: vec![dim("x", -2), dim("y", -2)],
            global_device_ids: vec![0, 1, 2, 3],
            local_device_ids: vec![0, 1, 2, 3],
            ..Default::default()
        };
        let mesh = Mesh::from_proto(&proto).unwrap(); // TensorFlow accepts it too
        let layout = Layout::static_on(&["x"], &mesh).unwrap();
        assert!(Sharding::from_layout(&layout, Chunking::Even).is_err());
        assert!(crate::layout_to_op_sharding(&layout, crate::DeviceListForm::Explicit).is_err());
        let s = Sharding::from_layout(
            &Layout::static_on(&["x"], &Mesh::parse("|x=2|*CPU").unwrap()).unwrap(),
            Chunking::Uneven,
        )
        .unwrap();
        assert!(s.check_shape(&[i64::MAX]).is_ok());
        assert_eq!(
            s.box_at(&[i64::MAX], 1).unwrap().offset,
            vec![i64::MAX / 2 + 1]
        );
    }

    #[test]
    fn several_mesh_dims_on_one_axis() {
        let mesh = Mesh::parse("|x=2,y=4|*CPU").unwrap();
        let s = Sharding::new(mesh, vec![vec![0, 1], vec![]], vec![], Chunking::Even).unwrap();
        // Position 5 is x=1, y=1: piece 1*4+1 = 5 of 8.
        assert_eq!(
            s.box_at(&[16, 3], 5).unwrap(),
            ShardBox {
                offset: vec![10, 0],
                shape: vec![2, 3]
            }
        );
        assert!(s.to_layout().is_none());
        assert_eq!(s.describe(), "[x*y, unsharded]");
    }
}

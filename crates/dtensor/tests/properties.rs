//! Property tests over random meshes, layouts, shapes and dtypes: unpack then pack is the
//! identity, relayout A -> B -> A is the identity (and equals unpacking for B), and
//! OpSharding -> Layout -> OpSharding returns the input.

use proptest::prelude::*;
use unbound_dtensor::{
    layout_to_op_sharding, op_sharding_to_layouts, pack, relayout, unpack, Chunking,
    DeviceListForm, HostArray, Layout, Mesh, Sharding,
};

/// A small deterministic generator driven by one proptest seed.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn random_mesh(g: &mut Gen) -> Mesh {
    let rank = 1 + g.below(3) as usize;
    let names = ["x", "y", "z"];
    let mut dims = Vec::new();
    let mut total = 1;
    for name in names.iter().take(rank) {
        let size = [1, 2, 3, 4][g.below(4) as usize];
        if total * size > 24 {
            break;
        }
        total *= size;
        dims.push(format!("{name}={size}"));
    }
    Mesh::parse(&format!("|{}|*CPU", dims.join(","))).unwrap()
}

/// Per-axis mesh dimensions: at most one per axis (a DTensor layout) unless `multi`.
fn random_axes(g: &mut Gen, mesh: &Mesh, rank: usize, multi: bool) -> Vec<Vec<usize>> {
    let mut axes = vec![Vec::new(); rank];
    if rank == 0 {
        return axes;
    }
    for m in 0..mesh.dims().len() {
        let choice = g.below(rank as u64 + 1) as usize;
        if choice < rank && (multi || axes[choice].is_empty()) {
            axes[choice].push(m);
        }
    }
    axes
}

fn random_array(g: &mut Gen, shape: Vec<i64>) -> HostArray {
    let n: i64 = shape.iter().product();
    if g.below(5) == 0 {
        let strings = (0..n)
            .map(|i| vec![b'a' + (i % 26) as u8; g.below(4) as usize])
            .collect();
        return HostArray::from_strings(shape, strings).unwrap();
    }
    let itemsize = [1usize, 2, 4, 8, 16][g.below(5) as usize];
    let bytes = (0..n as usize * itemsize).map(|_| g.next() as u8).collect();
    HostArray::from_bytes(shape, itemsize, bytes).unwrap()
}

fn global_shape(g: &mut Gen, s: &Sharding, uneven: bool) -> Vec<i64> {
    (0..s.rank())
        .map(|i| {
            let n = s.pieces(i);
            if uneven {
                g.below(2 * n as u64 + 3) as i64
            } else {
                n * g.below(4) as i64
            }
        })
        .collect()
}

fn random_sharding(
    g: &mut Gen,
    mesh: &Mesh,
    rank: usize,
    multi: bool,
    chunking: Chunking,
) -> Sharding {
    Sharding::new(
        mesh.clone(),
        random_axes(g, mesh, rank, multi),
        Vec::new(),
        chunking,
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn unpack_then_pack_is_identity(seed in 1u64..u64::MAX, multi in any::<bool>(), uneven in any::<bool>()) {
        let mut g = Gen(seed);
        let mesh = random_mesh(&mut g);
        let rank = g.below(4) as usize;
        let chunking = if uneven { Chunking::Uneven } else { Chunking::Even };
        let s = random_sharding(&mut g, &mesh, rank, multi, chunking);
        let shape = global_shape(&mut g, &s, uneven);
        let a = random_array(&mut g, shape.clone());
        let parts = unpack(&a, &s).unwrap();
        prop_assert_eq!(parts.len(), mesh.local_device_ids().len());
        prop_assert_eq!(pack(&parts, &s, &shape).unwrap(), a);
    }

    #[test]
    fn relayout_there_and_back_is_identity(seed in 1u64..u64::MAX, multi in any::<bool>(), uneven in any::<bool>()) {
        let mut g = Gen(seed);
        let mesh = random_mesh(&mut g);
        let rank = g.below(4) as usize;
        let chunking = if uneven { Chunking::Uneven } else { Chunking::Even };
        let a_s = random_sharding(&mut g, &mesh, rank, multi, chunking);
        let b_s = random_sharding(&mut g, &mesh, rank, multi, chunking);
        // Even chunking needs a shape both divide.
        let shape: Vec<i64> = (0..rank)
            .map(|i| if uneven { g.below(9) as i64 } else { a_s.pieces(i) * b_s.pieces(i) * g.below(3) as i64 })
            .collect();
        let arr = random_array(&mut g, shape.clone());
        let on_a = unpack(&arr, &a_s).unwrap();
        let on_b = relayout(&on_a, &a_s, &b_s, &shape).unwrap();
        prop_assert_eq!(&on_b, &unpack(&arr, &b_s).unwrap());
        prop_assert_eq!(relayout(&on_b, &b_s, &a_s, &shape).unwrap(), on_a);
    }

    #[test]
    fn op_sharding_to_layout_and_back(seed in 1u64..u64::MAX, given_mesh in any::<bool>()) {
        let mut g = Gen(seed);
        let mesh = random_mesh(&mut g);
        let rank = g.below(4) as usize;
        let s = random_sharding(&mut g, &mesh, rank, false, Chunking::Even);
        let layout: Layout = s.to_layout().unwrap();
        let op = layout_to_op_sharding(&layout, DeviceListForm::Explicit).unwrap();
        let found = op_sharding_to_layouts(&op, given_mesh.then_some(&mesh), Some(rank)).unwrap();
        let again = layout_to_op_sharding(&found.layouts[0], DeviceListForm::Explicit).unwrap();
        prop_assert_eq!(&again, &op, "{} -> {}", layout, found.layouts[0]);
        // The iota form converts back to a layout with the same devices (the iota form
        // itself is not unique: size-1 mesh dimensions may sit anywhere in the permutation).
        let iota = layout_to_op_sharding(&layout, DeviceListForm::Iota).unwrap();
        let found = op_sharding_to_layouts(&iota, Some(&mesh), Some(rank)).unwrap();
        let again = layout_to_op_sharding(&found.layouts[0], DeviceListForm::Explicit).unwrap();
        prop_assert_eq!(again, op);
    }

    #[test]
    fn parsing_random_text_never_panics(text in ".{0,80}", pipes in 0usize..8) {
        let mesh_text = format!("{}{}", "|".repeat(pipes), text);
        let _ = Mesh::parse(&mesh_text);
        let _ = Layout::parse(&format!("sharding_specs:{text} mesh:{mesh_text}"));
        let _ = unbound_dtensor::parse_hlo_text(&text);
        let _ = Layout::decode(text.as_bytes(), "fuzz");
        let _ = unbound_dtensor::decode_op_sharding(text.as_bytes(), "fuzz");
    }
}

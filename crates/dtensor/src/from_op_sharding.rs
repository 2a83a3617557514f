//! XLA `OpSharding` → DTensor layout, which TensorFlow lacks: find a mesh and a layout whose
//! `OpSharding` (as [`crate::layout_to_op_sharding`] builds it) is the given one, or explain
//! why none exists.

use unbound_proto::xla::op_sharding::Type as ShardingType;
use unbound_proto::xla::OpSharding;

use crate::error::{DTensorError, Result};
use crate::hlo_text::{to_hlo_text, MAX_SHARDING_DEPTH};
use crate::layout::{Layout, LayoutType};
use crate::mesh::{Mesh, MeshDim};
use crate::op_sharding::{
    expanded_devices, layout_to_op_sharding, mesh_permutation, transposed_iota, DeviceListForm,
};
use crate::spec::UNSHARDED;

/// The layouts found for an `OpSharding` (one per element of a tuple sharding), with notes
/// on choices made (ambiguity, defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpShardingLayouts {
    /// One layout, or one per tuple element.
    pub layouts: Vec<Layout>,
    /// Choices made on the way: other meshes or layouts that would do too, assumed ranks.
    pub notes: Vec<String>,
}

/// Names given to the dimensions of a mesh this module invents.
const DIM_NAMES: [&str; 8] = ["x", "y", "z", "w", "v", "u", "t", "s"];

/// The most devices a mesh this module invents may have (each gets a device name).
const MAX_INVENTED_DEVICES: usize = 1 << 16;

/// How many device numbers the searches may compare in total before giving up (hostile
/// input must not hang the program).
const SEARCH_BUDGET: u64 = 20_000_000;

/// Charges `cost` to the search budget; false once it is spent.
fn charge(budget: &mut u64, cost: usize) -> bool {
    match budget.checked_sub(cost as u64 + 1) {
        Some(left) => {
            *budget = left;
            true
        }
        None => false,
    }
}

fn gave_up(s: &OpSharding) -> DTensorError {
    fail(
        s,
        "the search for a matching mesh and layout gave up (too many devices or dimensions)",
    )
}

fn fail(s: &OpSharding, fault: impl Into<String>) -> DTensorError {
    DTensorError::OpSharding {
        input: to_hlo_text(s),
        fault: fault.into(),
    }
}

/// A mesh of `shape` on CPU devices `0..N` of one client, as `dtensor.create_mesh` makes.
fn cpu_mesh(names: &[String], shape: &[i64]) -> Result<Mesh> {
    let n: i64 = shape.iter().product();
    let ids: Vec<i64> = (0..n).collect();
    let devices = ids
        .iter()
        .map(|i| format!("/job:localhost/replica:0/task:0/device:CPU:{i}"))
        .collect();
    let dims = names
        .iter()
        .zip(shape)
        .map(|(name, &size)| MeshDim {
            name: name.clone(),
            size,
        })
        .collect();
    Mesh::new("", dims, ids.clone(), ids, devices, Vec::new(), false)
}

/// Finds layouts realising `sharding`. With `mesh`, the layout is on it; without, a mesh of
/// CPU devices is invented (dimensions named `x`, `y`, `z`, ...). `rank` is needed only for
/// a replicated sharding, which does not carry one (default 0).
pub fn op_sharding_to_layouts(
    sharding: &OpSharding,
    mesh: Option<&Mesh>,
    rank: Option<usize>,
) -> Result<OpShardingLayouts> {
    let mut out = OpShardingLayouts {
        layouts: Vec::new(),
        notes: Vec::new(),
    };
    convert(sharding, mesh, rank, &mut out, 0)?;
    Ok(out)
}

fn convert(
    s: &OpSharding,
    mesh: Option<&Mesh>,
    rank: Option<usize>,
    out: &mut OpShardingLayouts,
    depth: usize,
) -> Result<()> {
    if depth > MAX_SHARDING_DEPTH {
        return Err(fail(
            s,
            format!("tuple shardings nested more than {MAX_SHARDING_DEPTH} deep"),
        ));
    }
    match ShardingType::try_from(s.r#type) {
        Ok(ShardingType::Replicated) => {
            let rank = rank.unwrap_or_else(|| {
                let r = s.tile_shape.as_ref().map_or(0, |t| t.dimensions.len());
                out.notes.push(format!(
                    "a replicated sharding has no rank; rank {r} assumed"
                ));
                r
            });
            let mesh = match mesh {
                Some(m) => m.clone(),
                None => {
                    out.notes
                        .push("no mesh given: a one-device CPU mesh is used".into());
                    cpu_mesh(&["x".to_string()], &[1])?
                }
            };
            out.layouts.push(Layout::replicated(&mesh, rank)?);
            Ok(())
        }
        Ok(ShardingType::Maximal) => {
            let pos = match s.tile_assignment_devices.first() {
                Some(&d) => d,
                None => {
                    out.notes
                        .push("MAXIMAL sharding without a device: mesh position 0 used".into());
                    0
                }
            };
            let device = match mesh {
                Some(m) => device_at(m, pos).ok_or_else(|| {
                    fail(
                        s,
                        format!("mesh position {pos} has no device name on mesh {m}"),
                    )
                })?,
                None => {
                    out.notes
                        .push("no mesh given: the device is taken to be a local CPU".into());
                    format!("/job:localhost/replica:0/task:0/device:CPU:{pos}")
                }
            };
            out.layouts
                .push(Layout::single_device(&Mesh::single_device(&device)?)?);
            Ok(())
        }
        Ok(ShardingType::Tuple) => {
            for element in &s.tuple_shardings {
                convert(element, mesh, None, out, depth + 1)?;
            }
            Ok(())
        }
        Ok(ShardingType::Other) => {
            let layout = tiled(s, mesh, out)?;
            if let Some(r) = rank {
                if r != layout.rank() {
                    return Err(fail(
                        s,
                        format!("the sharding has rank {}, not {r}", layout.rank()),
                    ));
                }
            }
            out.layouts.push(layout);
            Ok(())
        }
        Ok(ShardingType::Manual) => Err(fail(
            s,
            "MANUAL: the program handles partitioning itself; no DTensor layout describes that",
        )),
        Ok(ShardingType::Unreduced) => Err(fail(
            s,
            "UNREDUCED: values are partial sums still to be reduced; DTensor layouts have no \
             Partial (it reduces at once)",
        )),
        Ok(ShardingType::Unknown) => Err(fail(s, "UNKNOWN: the sharding is not decided yet")),
        Err(_) => Err(fail(s, format!("unknown sharding type {}", s.r#type))),
    }
}

/// The device name at mesh position `pos`.
fn device_at(mesh: &Mesh, pos: i64) -> Option<String> {
    let p = usize::try_from(pos).ok()?;
    if let Some(d) = mesh.global_devices().get(p) {
        return Some(d.clone());
    }
    let id = *mesh.global_device_ids().get(p)?;
    let local = mesh.local_device_ids().iter().position(|&l| l == id)?;
    mesh.local_devices().get(local).cloned()
}

/// Axis tiles and the trailing replication count of an `OTHER` sharding.
fn tiles(s: &OpSharding) -> Result<(Vec<i64>, i64)> {
    let mut tile = s.tile_assignment_dimensions.clone();
    let replicated_last = match s.last_tile_dims.as_slice() {
        [] => s.replicate_on_last_tile_dim,
        [t] if *t == ShardingType::Replicated as i32 => true,
        [t] if *t == ShardingType::Manual as i32 => {
            return Err(fail(s, "a MANUAL subgroup has no DTensor layout"))
        }
        [_] => {
            return Err(fail(
                s,
                "an UNREDUCED subgroup is a Partial placement, which DTensor lacks",
            ))
        }
        _ => {
            return Err(fail(
                s,
                "several last_tile_dims (subgroups) have no DTensor layout",
            ))
        }
    };
    if tile.is_empty() {
        return Err(fail(s, "OTHER sharding without tile_assignment_dimensions"));
    }
    let rep = if replicated_last {
        tile.pop().unwrap_or(1)
    } else {
        1
    };
    if tile.iter().any(|&t| t < 1) || rep < 1 {
        return Err(fail(s, "tile dimensions must be positive"));
    }
    Ok((tile, rep))
}

fn tiled(s: &OpSharding, mesh: Option<&Mesh>, out: &mut OpShardingLayouts) -> Result<Layout> {
    let devices = expanded_devices(s).map_err(|f| fail(s, f.to_string()))?;
    let n = devices.len() as i64;
    let mut seen = vec![false; devices.len()];
    for &d in &devices {
        match usize::try_from(d).ok().filter(|&d| d < devices.len()) {
            Some(d) if !seen[d] => seen[d] = true,
            _ => {
                return Err(fail(
                    s,
                    format!("devices are not a permutation of the mesh positions 0..{n}"),
                ))
            }
        }
    }
    let (axis_tiles, rep) = tiles(s)?;
    match mesh {
        Some(m) => on_mesh(s, m, &axis_tiles, &devices, out),
        None if devices.len() > MAX_INVENTED_DEVICES => Err(fail(
            s,
            format!(
                "{} devices: too many to invent a mesh of named CPU devices for (at most \
                 {MAX_INVENTED_DEVICES}); give a mesh",
                devices.len()
            ),
        )),
        None => invent_mesh(s, &axis_tiles, rep, &devices, out),
    }
}

/// The devices DTensor would assign for axes sharded on `dims_of_axes` of `mesh_shape`.
fn devices_for(mesh_shape: &[i64], dims_of_axes: &[Option<usize>]) -> Vec<i64> {
    transposed_iota(
        mesh_shape,
        &mesh_permutation(dims_of_axes, mesh_shape.len()),
    )
}

fn on_mesh(
    s: &OpSharding,
    mesh: &Mesh,
    axis_tiles: &[i64],
    devices: &[i64],
    out: &mut OpShardingLayouts,
) -> Result<Layout> {
    let shape = mesh.shape();
    let n = devices.len() as i64;
    if mesh.size() != Some(n) {
        return Err(fail(
            s,
            format!("{n} devices, but mesh {mesh} has {:?}", mesh.size()),
        ));
    }
    for (i, &t) in axis_tiles.iter().enumerate() {
        if t > 1 && !shape.contains(&t) {
            return Err(fail(
                s,
                format!(
                    "axis {i} is split into {t} tiles, but no mesh dimension has size {t} (DTensor \
                     shards an axis over exactly one mesh dimension)"
                ),
            ));
        }
    }
    let mut found: Vec<Layout> = Vec::new();
    let mut current = Vec::new();
    let want = normalized(s, devices);
    let mut budget = SEARCH_BUDGET;
    let mut exhausted = false;
    search_assignment(&shape, axis_tiles, &mut current, &mut |dims| {
        if exhausted || !charge(&mut budget, devices.len()) {
            exhausted = true;
            return;
        }
        let specs = dims
            .iter()
            .map(|d| d.map_or(UNSHARDED.to_string(), |m| mesh.dims()[m].name.clone()))
            .collect();
        let Ok(layout) = Layout::new(LayoutType::Static, specs, mesh.clone()) else {
            return;
        };
        if layout_to_op_sharding(&layout, DeviceListForm::Explicit)
            .ok()
            .as_ref()
            == Some(&want)
        {
            found.push(layout);
        }
    });
    if found.is_empty() {
        if exhausted {
            return Err(gave_up(s));
        }
        return Err(fail(
            s,
            format!("no assignment of axes to the dimensions of mesh {mesh} gives this sharding"),
        ));
    }
    if found.len() > 1 {
        out.notes.push(format!(
            "{} assignments of axes to mesh dimensions give this sharding; the first is used",
            found.len()
        ));
    }
    Ok(found.swap_remove(0))
}

/// The sharding in the form DTensor writes it: explicit devices, the replication flag
/// (rather than `last_tile_dims`), nothing else.
fn normalized(s: &OpSharding, devices: &[i64]) -> OpSharding {
    let replicated = s.replicate_on_last_tile_dim
        || s.last_tile_dims.as_slice() == [ShardingType::Replicated as i32];
    OpSharding {
        r#type: ShardingType::Other as i32,
        tile_assignment_dimensions: s.tile_assignment_dimensions.clone(),
        tile_assignment_devices: devices.to_vec(),
        replicate_on_last_tile_dim: replicated,
        ..Default::default()
    }
}

/// Calls `visit` for every assignment of a distinct mesh dimension of the right size to
/// each axis (axes of one tile may also stay unsharded, `None`; that choice comes first).
fn search_assignment(
    shape: &[i64],
    tiles: &[i64],
    current: &mut Vec<Option<usize>>,
    visit: &mut dyn FnMut(&[Option<usize>]),
) {
    let i = current.len();
    if i == tiles.len() {
        visit(current);
        return;
    }
    if tiles[i] == 1 {
        current.push(None);
        search_assignment(shape, tiles, current, visit);
        current.pop();
    }
    for m in 0..shape.len() {
        if shape[m] == tiles[i] && !current.contains(&Some(m)) {
            current.push(Some(m));
            search_assignment(shape, tiles, current, visit);
            current.pop();
        }
    }
}

/// Ordered factorizations of `r` into `k` factors greater than 1; `None` when the budget
/// runs out.
fn factorizations(r: i64, k: usize, budget: &mut u64) -> Option<Vec<Vec<i64>>> {
    if k == 0 {
        return Some(if r == 1 { vec![vec![]] } else { vec![] });
    }
    // Trial division up to the square root: charge it.
    let root = (r as f64).sqrt() as usize + 1;
    if !charge(budget, root) {
        return None;
    }
    let mut divisors: Vec<i64> = (2..)
        .take_while(|d| d * d <= r)
        .filter(|d| r % d == 0)
        .collect();
    let larger: Vec<i64> = divisors
        .iter()
        .rev()
        .map(|d| r / d)
        .filter(|&q| q * q != r)
        .collect();
    divisors.extend(larger);
    if r > 1 {
        divisors.push(r);
    }
    let mut out = Vec::new();
    for f in divisors {
        for mut rest in factorizations(r / f, k - 1, budget)? {
            if !charge(budget, k) {
                return None;
            }
            rest.insert(0, f);
            out.push(rest);
        }
    }
    Some(out)
}

/// All orders of `items` in which items flagged `keep_order` keep their relative order.
fn interleavings(items: &[(i64, Option<usize>)]) -> Vec<Vec<usize>> {
    fn go(
        items: &[(i64, Option<usize>)],
        used: &mut Vec<bool>,
        cur: &mut Vec<usize>,
        out: &mut Vec<Vec<usize>>,
    ) {
        if cur.len() == items.len() {
            out.push(cur.clone());
            return;
        }
        for i in 0..items.len() {
            if used[i] {
                continue;
            }
            // Replication factors (axis None) appear in their own order.
            if items[i].1.is_none() && (0..i).any(|j| items[j].1.is_none() && !used[j]) {
                continue;
            }
            used[i] = true;
            cur.push(i);
            go(items, used, cur, out);
            cur.pop();
            used[i] = false;
        }
    }
    let mut out = Vec::new();
    go(
        items,
        &mut vec![false; items.len()],
        &mut Vec::new(),
        &mut out,
    );
    out
}

fn invent_mesh(
    s: &OpSharding,
    axis_tiles: &[i64],
    rep: i64,
    devices: &[i64],
    out: &mut OpShardingLayouts,
) -> Result<Layout> {
    let mut sharded: Vec<(i64, Option<usize>)> = axis_tiles
        .iter()
        .enumerate()
        .filter(|(_, &t)| t > 1)
        .map(|(i, &t)| (t, Some(i)))
        .collect();
    if sharded.is_empty() && !axis_tiles.is_empty() {
        // Nothing tiled, yet not REPLICATED: DTensor writes this for an axis sharded over a
        // mesh dimension of size 1.
        sharded.push((1, Some(0)));
    }
    let max_factors = if rep > 1 {
        (64 - rep.leading_zeros() as usize).min(DIM_NAMES.len().saturating_sub(sharded.len()))
    } else {
        0
    };
    let mut budget = SEARCH_BUDGET;
    for k in usize::from(rep > 1)..=max_factors {
        let Some(all) = factorizations(rep, k, &mut budget) else {
            return Err(gave_up(s));
        };
        for factors in all {
            let sizes_ok = |shape: &[i64]| shape.iter().product::<i64>() == devices.len() as i64;
            let mut items = sharded.clone();
            items.extend(factors.iter().map(|&f| (f, None)));
            if items.len() > DIM_NAMES.len() {
                continue;
            }
            for order in interleavings(&items) {
                if !charge(&mut budget, devices.len()) {
                    return Err(gave_up(s));
                }
                let shape: Vec<i64> = order.iter().map(|&i| items[i].0).collect();
                if !sizes_ok(&shape) {
                    continue;
                }
                let mut dims_of_axes = vec![None; axis_tiles.len()];
                for (pos, &i) in order.iter().enumerate() {
                    if let Some(axis) = items[i].1 {
                        dims_of_axes[axis] = Some(pos);
                    }
                }
                if devices_for(&shape, &dims_of_axes) != devices {
                    continue;
                }
                let (names, shape) = if shape.is_empty() {
                    (vec!["x".to_string()], vec![1])
                } else {
                    (
                        DIM_NAMES[..shape.len()]
                            .iter()
                            .map(|n| n.to_string())
                            .collect::<Vec<_>>(),
                        shape,
                    )
                };
                let mesh = cpu_mesh(&names, &shape)?;
                out.notes
                    .push(format!("mesh invented for the sharding: {mesh}"));
                let specs = dims_of_axes
                    .iter()
                    .map(|d| d.map_or(UNSHARDED.to_string(), |m| names[m].clone()))
                    .collect();
                return Layout::new(LayoutType::Static, specs, mesh);
            }
        }
    }
    Err(fail(
        s,
        "no mesh realises this device order: DTensor numbers devices by mesh position and \
         shards each axis over one mesh dimension, and no such mesh gives this tile assignment",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo_text::parse_hlo_text;
    use crate::op_sharding::{layout_to_op_sharding, DeviceListForm};

    #[test]
    fn finds_meshes_for_tensorflow_vectors() {
        for text in [
            "{devices=[3]0,1,2}",
            "{devices=[2,2]0,2,1,3}",
            "{devices=[4,2]0,4,1,5,2,6,3,7}",
            "{devices=[2,2,2]0,2,4,6,1,3,5,7}",
            "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}",
            "{devices=[2,1,2,2]0,4,1,5,2,6,3,7 last_tile_dim_replicate}",
            "{devices=[1,2,4]0,1,4,5,2,3,6,7 last_tile_dim_replicate}",
        ] {
            let s = parse_hlo_text(text).unwrap();
            let found = op_sharding_to_layouts(&s, None, None).unwrap();
            let back = layout_to_op_sharding(&found.layouts[0], DeviceListForm::Explicit).unwrap();
            assert_eq!(to_hlo_text(&back), text, "{}", found.layouts[0]);
        }
    }

    #[test]
    fn explains_impossible_shardings() {
        let s = parse_hlo_text("{devices=[2,2]0,3,1,2}").unwrap();
        assert!(op_sharding_to_layouts(&s, None, None).is_err());
        let s = parse_hlo_text("{devices=[2]0,0}").unwrap();
        assert!(op_sharding_to_layouts(&s, None, None).is_err());
        let mesh = Mesh::parse("|x=2,y=4|*CPU").unwrap();
        let s = parse_hlo_text("{devices=[8]0,1,2,3,4,5,6,7}").unwrap();
        let e = op_sharding_to_layouts(&s, Some(&mesh), None).unwrap_err();
        assert!(
            e.to_string().contains("no mesh dimension has size 8"),
            "{e}"
        );
        let s = parse_hlo_text("{manual}").unwrap();
        assert!(op_sharding_to_layouts(&s, None, None).is_err());
    }

    #[test]
    fn hostile_sizes_end_quickly() {
        let start = std::time::Instant::now();
        let s =
            parse_hlo_text("{devices=[1,16777216]<=[16777216] last_tile_dim_replicate}").unwrap();
        let e = op_sharding_to_layouts(&s, None, None).unwrap_err();
        assert!(e.to_string().contains("give a mesh"), "{e}");
        let s = parse_hlo_text("{devices=[2,2,2,2,2,2,2,2,2,2,2,2]<=[4096]T(0)}");
        if let Ok(s) = s {
            let _ = op_sharding_to_layouts(&s, None, None);
        }
        let s = parse_hlo_text(
            "{devices=[4096]<=[2,2,2,2,2,2,2,2,2,2,2,2]T(11,10,9,8,7,6,5,4,3,2,1,0)}",
        )
        .unwrap();
        let _ = op_sharding_to_layouts(&s, None, None);
        assert!(start.elapsed().as_secs() < 60, "{:?}", start.elapsed());
    }
}

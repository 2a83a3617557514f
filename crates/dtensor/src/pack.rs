//! Splitting a global host array into per-device components (unpack), joining them back
//! (pack), and moving components from one sharding to another (relayout), by block copies.
//!
//! Components are in local-device order, as `dtensor.unpack` returns them and
//! `dtensor.pack` takes them.

use std::collections::HashMap;

use crate::array::{Elements, HostArray};
use crate::copy::{copy_box, Placement};
use crate::error::{DTensorError, Result};
use crate::sharding::{ShardBox, Sharding};

fn usizes(v: &[i64]) -> Vec<usize> {
    v.iter().map(|&x| x as usize).collect()
}

/// Copies `region` (global coordinates) from `src` (holding `src_box`) into `dst` (holding
/// `dst_box`).
fn copy_region(
    src: &HostArray,
    src_box: &ShardBox,
    dst: &mut HostArray,
    dst_box: &ShardBox,
    region: &ShardBox,
) {
    let src_origin: Vec<usize> = region
        .offset
        .iter()
        .zip(&src_box.offset)
        .map(|(r, s)| (r - s) as usize)
        .collect();
    let dst_origin: Vec<usize> = region
        .offset
        .iter()
        .zip(&dst_box.offset)
        .map(|(r, d)| (r - d) as usize)
        .collect();
    let (src_shape, dst_shape, extent) = (
        usizes(src.shape()),
        usizes(dst.shape()),
        usizes(&region.shape),
    );
    let src_at = Placement {
        shape: &src_shape,
        origin: &src_origin,
    };
    let dst_at = Placement {
        shape: &dst_shape,
        origin: &dst_origin,
    };
    match (src.elements(), dst.elements_mut()) {
        (Elements::Fixed { itemsize, bytes: s }, Elements::Fixed { bytes: d, .. }) => {
            copy_box(s, src_at, d, dst_at, &extent, *itemsize)
        }
        (Elements::Strings(s), Elements::Strings(d)) => copy_box(s, src_at, d, dst_at, &extent, 1),
        _ => unreachable!("element kinds are checked by the callers"),
    }
}

fn whole(shape: &[i64]) -> ShardBox {
    ShardBox {
        offset: vec![0; shape.len()],
        shape: shape.to_vec(),
    }
}

fn refuse_partial(sharding: &Sharding) -> Result<()> {
    if sharding.partial().is_empty() {
        return Ok(());
    }
    Err(DTensorError::Data {
        what: sharding.describe(),
        fault: "partial sums have no host data form here (relayout plans only)".into(),
    })
}

/// Splits `global` into the components of the local devices of `sharding`'s mesh, in
/// local-device order.
pub fn unpack(global: &HostArray, sharding: &Sharding) -> Result<Vec<HostArray>> {
    refuse_partial(sharding)?;
    let boxes = sharding.local_boxes(global.shape())?;
    let mut out = boxes
        .iter()
        .map(|b| HostArray::zeros_like_kind(global.elements(), b.shape.clone()))
        .collect::<Result<Vec<_>>>()?;
    unpack_into(global, sharding, &mut out)?;
    Ok(out)
}

/// [`unpack`] into existing components (of the right shapes and dtype), so that memory is
/// reused across calls.
pub fn unpack_into(global: &HostArray, sharding: &Sharding, out: &mut [HostArray]) -> Result<()> {
    refuse_partial(sharding)?;
    let boxes = sharding.local_boxes(global.shape())?;
    check_outputs(out, &boxes, global, sharding)?;
    let all = whole(global.shape());
    for (c, b) in out.iter_mut().zip(&boxes) {
        if !b.is_empty() {
            copy_region(global, &all, c, b, b);
        }
    }
    Ok(())
}

/// Checks output components: one per box, of its shape, of `like`'s dtype.
fn check_outputs(
    out: &[HostArray],
    boxes: &[ShardBox],
    like: &HostArray,
    sharding: &Sharding,
) -> Result<()> {
    check_components(out, boxes, sharding)?;
    match out.iter().position(|c| !c.same_kind(like)) {
        Some(i) => Err(DTensorError::Data {
            what: format!("output component {i}"),
            fault: "its dtype differs from the input's".into(),
        }),
        None => Ok(()),
    }
}

/// Checks components against the boxes they should hold.
fn check_components(
    components: &[HostArray],
    boxes: &[ShardBox],
    sharding: &Sharding,
) -> Result<()> {
    if components.len() != boxes.len() {
        return Err(DTensorError::Data {
            what: "components".into(),
            fault: format!(
                "{} given, but {} has {} local devices",
                components.len(),
                sharding.describe(),
                boxes.len()
            ),
        });
    }
    for (i, (c, b)) in components.iter().zip(boxes).enumerate() {
        if c.shape() != b.shape.as_slice() {
            return Err(DTensorError::Data {
                what: format!("component {i}"),
                fault: format!(
                    "shape {:?}, but the layout puts a shard of shape {:?} there",
                    c.shape(),
                    b.shape
                ),
            });
        }
        if !c.same_kind(&components[0]) {
            return Err(DTensorError::Data {
                what: format!("component {i}"),
                fault: "its dtype differs from component 0's".into(),
            });
        }
    }
    Ok(())
}

/// The first local component holding each distinct box.
fn distinct(boxes: &[ShardBox]) -> Vec<usize> {
    let mut seen = HashMap::new();
    (0..boxes.len())
        .filter(|&i| seen.insert(&boxes[i], i).is_none())
        .collect()
}

/// Checks that `chosen` boxes cover the global array exactly (without overlap).
fn check_cover(
    boxes: &[ShardBox],
    chosen: &[usize],
    global: &[i64],
    sharding: &Sharding,
) -> Result<()> {
    let total = Sharding::element_count(global).unwrap_or(i64::MAX);
    let covered: i64 = chosen.iter().map(|&i| boxes[i].len()).sum();
    if covered != total {
        return Err(DTensorError::Data {
            what: "components".into(),
            fault: format!(
                "the local devices of {} hold {covered} of the {total} elements of the global \
                 array (a multi-client mesh: the rest live on other clients)",
                sharding.describe()
            ),
        });
    }
    Ok(())
}

/// Joins components (local-device order) into the global array of shape `global_shape`.
/// Replicas are not compared: the first device holding each shard supplies it.
pub fn pack(
    components: &[HostArray],
    sharding: &Sharding,
    global_shape: &[i64],
) -> Result<HostArray> {
    let first = components.first().ok_or_else(|| DTensorError::Data {
        what: "components".into(),
        fault: "none given (the mesh has no local devices)".into(),
    })?;
    // Checked before allocating: the shape's rank against the layout, the components
    // against their boxes, and their cover of the whole (so the components, which were read,
    // bound the size of what is allocated).
    refuse_partial(sharding)?;
    let boxes = sharding.local_boxes(global_shape)?;
    check_components(components, &boxes, sharding)?;
    check_cover(&boxes, &distinct(&boxes), global_shape, sharding)?;
    let mut global = HostArray::zeros_like_kind(first.elements(), global_shape.to_vec())?;
    pack_into(components, sharding, &mut global)?;
    Ok(global)
}

/// [`pack`] into an existing global array (its shape is the global shape).
pub fn pack_into(
    components: &[HostArray],
    sharding: &Sharding,
    global: &mut HostArray,
) -> Result<()> {
    refuse_partial(sharding)?;
    let global_shape = global.shape().to_vec();
    let boxes = sharding.local_boxes(&global_shape)?;
    check_components(components, &boxes, sharding)?;
    if let Some(first) = components.first() {
        if !first.same_kind(global) {
            return Err(DTensorError::Data {
                what: "global array".into(),
                fault: "its dtype differs from the components'".into(),
            });
        }
    }
    let chosen = distinct(&boxes);
    check_cover(&boxes, &chosen, &global_shape, sharding)?;
    let all = whole(&global_shape);
    for &i in &chosen {
        if !boxes[i].is_empty() {
            copy_region(&components[i], &boxes[i], global, &all, &boxes[i]);
        }
    }
    Ok(())
}

/// The global shape implied by components of `sharding`: on each axis, the sum of the
/// lengths of the distinct pieces along it.
pub fn global_shape_of(components: &[HostArray], sharding: &Sharding) -> Result<Vec<i64>> {
    let positions = sharding.mesh().local_positions()?;
    if components.len() != positions.len() {
        return Err(DTensorError::Data {
            what: "components".into(),
            fault: format!(
                "{} given, but the mesh has {} local devices",
                components.len(),
                positions.len()
            ),
        });
    }
    let rank = sharding.rank();
    let mut shape = Vec::with_capacity(rank);
    for axis in 0..rank {
        // Sum the lengths along `axis` of one device per piece index.
        let mut by_piece: HashMap<i64, i64> = HashMap::new();
        for (c, &p) in components.iter().zip(&positions) {
            if c.shape().len() != rank {
                return Err(DTensorError::Data {
                    what: "components".into(),
                    fault: format!(
                        "a component has rank {}, the layout {}",
                        c.shape().len(),
                        rank
                    ),
                });
            }
            let loc = sharding.mesh().device_location(p as i64)?;
            let mut idx = 0;
            for &m in &sharding.axes()[axis] {
                idx = idx * sharding.mesh().dims()[m].size + loc[m];
            }
            by_piece.entry(idx).or_insert(c.shape()[axis]);
        }
        if by_piece.len() as i64 != sharding.pieces(axis) {
            return Err(DTensorError::Data {
                what: "components".into(),
                fault: format!(
                    "the local devices hold {} of the {} pieces of axis {axis}",
                    by_piece.len(),
                    sharding.pieces(axis)
                ),
            });
        }
        shape.push(by_piece.values().sum());
    }
    Ok(shape)
}

fn check_same_mesh(from: &Sharding, to: &Sharding) -> Result<()> {
    if from.mesh() != to.mesh() {
        return Err(DTensorError::Relayout {
            from: from.describe(),
            to: to.describe(),
            fault: "the layouts are on different meshes (DTensor relayouts within one mesh)".into(),
        });
    }
    if from.rank() != to.rank() {
        return Err(DTensorError::Relayout {
            from: from.describe(),
            to: to.describe(),
            fault: format!("ranks differ ({} and {})", from.rank(), to.rank()),
        });
    }
    refuse_partial(from)?;
    refuse_partial(to)
}

/// Moves components of sharding `from` to components of sharding `to` on the same mesh:
/// each target component is filled from the source components overlapping it, without
/// building the global array.
pub fn relayout(
    components: &[HostArray],
    from: &Sharding,
    to: &Sharding,
    global_shape: &[i64],
) -> Result<Vec<HostArray>> {
    check_same_mesh(from, to)?;
    let Some(first) = components.first() else {
        return Ok(Vec::new());
    };
    // Check before allocating (the components bound the size of the global shape).
    let src_boxes = from.local_boxes(global_shape)?;
    check_components(components, &src_boxes, from)?;
    check_cover(&src_boxes, &distinct(&src_boxes), global_shape, from)?;
    let mut out = to
        .local_boxes(global_shape)?
        .iter()
        .map(|b| HostArray::zeros_like_kind(first.elements(), b.shape.clone()))
        .collect::<Result<Vec<_>>>()?;
    relayout_into(components, from, to, global_shape, &mut out)?;
    Ok(out)
}

/// [`relayout`] into existing target components.
pub fn relayout_into(
    components: &[HostArray],
    from: &Sharding,
    to: &Sharding,
    global_shape: &[i64],
    out: &mut [HostArray],
) -> Result<()> {
    check_same_mesh(from, to)?;
    let src_boxes = from.local_boxes(global_shape)?;
    check_components(components, &src_boxes, from)?;
    let dst_boxes = to.local_boxes(global_shape)?;
    let Some(first) = components.first() else {
        return Ok(());
    };
    check_outputs(out, &dst_boxes, first, to)?;
    let chosen = distinct(&src_boxes);
    check_cover(&src_boxes, &chosen, global_shape, from)?;
    for (c, b) in out.iter_mut().zip(&dst_boxes) {
        for &i in &chosen {
            if let Some(region) = src_boxes[i].intersect(b) {
                copy_region(&components[i], &src_boxes[i], c, b, &region);
            }
        }
    }
    Ok(())
}

//! Running a plan: worker threads take target shards one at a time and write each item by
//! streaming the source pieces that intersect it; the source checksums are checked, then the
//! shards are renamed into place and the index written.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde::Serialize;
use unbound_bundle::dtype::{storage, Storage};
use unbound_bundle::{
    encode_tensor_name_slice, index_path, prepare_shards, write_index, BoxReader, BundleError,
    FinishedShard, ShardWriter, SliceSpec, Variables,
};
use unbound_proto::tensorflow::BundleEntryProto;

use crate::error::{ReshardError, Result};
use crate::plan::{Plan, TargetItem, BLOCK};
use crate::planner::ReshardOptions;

/// What a reshard did. Fields serialize in this (name) order.
#[derive(Debug, Clone, Serialize)]
pub struct ReshardReport {
    /// Bytes of data written.
    pub bytes: u64,
    /// The output prefix.
    pub dst: String,
    /// Data written per second, in GB (10^9 bytes).
    pub gb_per_s: f64,
    /// The target mesh.
    pub mesh: String,
    /// Data shards written.
    pub num_shards: i32,
    /// Variables given a layout on the mesh.
    pub resharded: usize,
    /// Wall time in seconds.
    pub seconds: f64,
    /// The source prefix.
    pub src: String,
    /// Every tensor of the source.
    pub variables: usize,
}

/// One written entry of a shard: its key, its entry and, for a slice, the full variable it
/// belongs to (its index in the plan) and the slice.
pub(crate) struct Written {
    pub(crate) key: Vec<u8>,
    pub(crate) entry: BundleEntryProto,
    pub(crate) slice_of: Option<(usize, SliceSpec)>,
}

/// Writes the target bundle at `dst` by `plan` (from [`crate::plan`]) with `options.jobs`
/// workers; `progress` hears every block of bytes written. Nothing is left under the final
/// names on error.
pub fn run(
    src: &Variables,
    plan: &Plan,
    dst: &Path,
    options: &ReshardOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<ReshardReport> {
    let start = Instant::now();
    check_output(src, plan, dst)?;
    let all: Vec<usize> = (0..plan.shards.len()).collect();
    let results = write_shards(src, plan, dst, options.jobs, &all, progress)?;
    let mut written = Vec::with_capacity(results.len());
    for (shard, finished, w) in results {
        finished.persist_unsynced()?;
        written.push((shard, w));
    }
    // One sync of the directory for all the renames (then the index, synced on its own).
    unbound_io::sync_parent(&index_path(dst));
    finish_output(src, plan, dst, written)?;
    Ok(report(src, plan, dst, start))
}

/// Refuses an output that exists or is the source; creates its directory and removes the
/// temporaries killed writers left of its files (one listing of the directory, however many
/// shards the plan has: each shard is then created without looking again).
pub(crate) fn check_output(src: &Variables, plan: &Plan, dst: &Path) -> Result<()> {
    let index = index_path(dst);
    if index.exists() {
        return Err(ReshardError::Exists { path: index });
    }
    if dst == src.prefix {
        return Err(ReshardError::Usage(
            "the output prefix is the source prefix".into(),
        ));
    }
    prepare_shards(dst, plan.num_shards)?;
    Ok(())
}

/// Writes the plan's shards numbered in `subset` with `jobs` workers, then checks the
/// checksum of every source byte read. The shards stay under temporary names.
pub(crate) fn write_shards(
    src: &Variables,
    plan: &Plan,
    dst: &Path,
    jobs: usize,
    subset: &[usize],
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<(i32, FinishedShard, Vec<Written>)>> {
    let boxes = BoxReader::new(&src.reader);
    let mut order: Vec<usize> = subset.to_vec();
    order.sort_by_key(|&i| std::cmp::Reverse(plan.shards[i].bytes));
    let mut results = unbound_io::run_until_error(&order, jobs, |&shard, stop| {
        let (finished, written) = write_shard(plan, shard, dst, &boxes, stop, progress)?;
        Ok::<_, ReshardError>((shard as i32, finished, written))
    })?;
    // Every source byte read is checked before anything takes its final name.
    boxes.finish()?;
    results.sort_by_key(|r| r.0);
    Ok(results)
}

/// Writes the index from the entries of every shard (in any order; slices are listed in
/// shard order) and the `checkpoint` state file when the source has one.
pub(crate) fn finish_output(
    src: &Variables,
    plan: &Plan,
    dst: &Path,
    mut written: Vec<(i32, Vec<Written>)>,
) -> Result<()> {
    written.sort_by_key(|w| w.0);
    let mut entries: BTreeMap<Vec<u8>, BundleEntryProto> = BTreeMap::new();
    for (_, shard) in written {
        for w in shard {
            if let Some((v, spec)) = &w.slice_of {
                let var = plan.variables.get(*v).ok_or_else(|| {
                    ReshardError::Usage(format!("variable {v} is not in the plan"))
                })?;
                let full = entries
                    .entry(var.key.as_bytes().to_vec())
                    .or_insert_with(|| BundleEntryProto {
                        dtype: var.stored.dtype,
                        shape: Some(unbound_bundle::shape_to_proto(&var.shape)),
                        ..Default::default()
                    });
                full.slices.push(spec.to_proto());
            }
            if entries.insert(w.key.clone(), w.entry).is_some() {
                return Err(ReshardError::Variable {
                    key: unbound_bundle::display_key(&w.key),
                    fault: "planned twice".into(),
                });
            }
        }
    }
    write_index(dst, plan.num_shards, &entries)?;
    let state = src
        .prefix
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .join("checkpoint");
    if state.is_file() {
        crate::state::write_checkpoint_state(dst)?;
    }
    Ok(())
}

/// The summary of a finished reshard that started at `start`.
pub(crate) fn report(src: &Variables, plan: &Plan, dst: &Path, start: Instant) -> ReshardReport {
    let seconds = start.elapsed().as_secs_f64();
    let bytes = plan.bytes();
    ReshardReport {
        bytes,
        dst: dst.display().to_string(),
        gb_per_s: if seconds > 0.0 {
            bytes as f64 / seconds / 1e9
        } else {
            0.0
        },
        mesh: plan.mesh.clone(),
        num_shards: plan.num_shards,
        resharded: plan.variables.iter().filter(|v| v.to.is_some()).count(),
        seconds,
        src: src.prefix.display().to_string(),
        variables: plan.variables.len(),
    }
}

/// Writes target shard `index` of the plan; stops early when another worker failed.
fn write_shard(
    plan: &Plan,
    index: usize,
    dst: &Path,
    boxes: &BoxReader<'_>,
    failed: &AtomicBool,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(FinishedShard, Vec<Written>)> {
    let shard = &plan.shards[index];
    let mut w = ShardWriter::create_prepared(dst, shard.shard, plan.num_shards)?;
    let mut written = Vec::with_capacity(shard.items.len());
    for item in &shard.items {
        if failed.load(Ordering::Relaxed) {
            return Err(ReshardError::Usage("stopped: another worker failed".into()));
        }
        match item {
            TargetItem::Whole { key } => {
                let src = boxes
                    .bundle()
                    .entry(key.as_bytes())
                    .cloned()
                    .unwrap_or_default();
                let entry = if matches!(storage(src.dtype), Storage::Fixed(_) | Storage::Opaque) {
                    let shape =
                        unbound_bundle::shape_from_proto(src.shape.as_ref()).unwrap_or_default();
                    w.append_with(src.dtype, &shape, |sink| {
                        boxes
                            .copy_entry(key.as_bytes(), BLOCK, |b| {
                                sink.write(b)?;
                                progress(b.len() as u64);
                                Ok::<(), BundleError>(())
                            })
                            .map(|_| ())
                    })?
                } else {
                    // Strings and variants: decoded (their own checksums checked) and
                    // written again with theirs.
                    let t = boxes.bundle().read(key.as_bytes())?;
                    let entry = w.append_tensor(&t)?;
                    progress(entry.size as u64);
                    entry
                };
                written.push(Written {
                    key: key.as_bytes().to_vec(),
                    entry,
                    slice_of: None,
                });
            }
            TargetItem::Slice { variable, region } => {
                let var = &plan.variables[*variable];
                let stored = &var.stored;
                let shape: Vec<i64> = region.iter().map(|&(_, l)| l as i64).collect();
                let whole = shape == var.shape;
                let spec = SliceSpec::new(
                    region
                        .iter()
                        .zip(&var.shape)
                        .map(|(&(s, l), &d)| {
                            if s == 0 && l as i64 == d {
                                (0, None)
                            } else {
                                (s as i64, Some(l as i64))
                            }
                        })
                        .collect(),
                );
                let entry = match storage(stored.dtype) {
                    Storage::Fixed(_) => w.append_with(stored.dtype, &shape, |sink| {
                        boxes
                            .stream(stored, region, BLOCK, |b| {
                                sink.write(b)?;
                                progress(b.len() as u64);
                                Ok::<(), BundleError>(())
                            })
                            .map(|_| ())
                    })?,
                    Storage::String => {
                        let values = boxes.read_strings(stored, region)?;
                        let t = unbound_bundle::Tensor::strings(shape.clone(), values);
                        let entry = w.append_tensor(&t)?;
                        progress(entry.size as u64);
                        entry
                    }
                    _ => {
                        return Err(ReshardError::Variable {
                            key: var.key.clone(),
                            fault: format!(
                                "{} values cannot be resharded (keep them whole: give no layout)",
                                var.dtype
                            ),
                        })
                    }
                };
                if whole {
                    written.push(Written {
                        key: var.key.as_bytes().to_vec(),
                        entry,
                        slice_of: None,
                    });
                } else {
                    written.push(Written {
                        key: encode_tensor_name_slice(var.key.as_bytes(), &spec),
                        entry,
                        slice_of: Some((*variable, spec)),
                    });
                }
            }
        }
    }
    Ok((w.finish()?, written))
}

//! Resharding under `mpirun` (cargo feature `mpi`): every rank plans the same job, writes the
//! target shards `i` with `i % size == rank` (so each data file has one writer) and checks
//! what it read; the ranks agree that all succeeded, rename their shards into place, and send
//! their index entries to rank 0, which writes the index after they all arrived. A shared
//! directory is assumed. The result is the same files, byte for byte, as a single process
//! writes.

use std::path::Path;
use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::traits::*;
use prost::Message;
use unbound_bundle::{SliceSpec, Variables};
use unbound_proto::tensorflow::{BundleEntryProto, TensorSliceProto};

use crate::engine::{check_output, finish_output, report, write_shards, Written};
use crate::error::{ReshardError, Result};
use crate::plan::Plan;
use crate::planner::ReshardOptions;
use crate::ReshardReport;

/// The MPI environment of this process, initialized once.
pub struct MpiWorld {
    _universe: mpi::environment::Universe,
    world: mpi::topology::SimpleCommunicator,
}

impl MpiWorld {
    /// Initializes MPI (`None` if it was initialized already).
    pub fn init() -> Option<Self> {
        let universe = mpi::initialize()?;
        let world = universe.world();
        Some(Self {
            _universe: universe,
            world,
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> i32 {
        self.world.rank()
    }

    /// The number of processes.
    pub fn size(&self) -> i32 {
        self.world.size()
    }
}

/// Runs `plan` across the ranks of `mpi`; returns the report on rank 0 and `None` on the
/// others. Any rank's failure fails every rank, with nothing left under the final names
/// (shards are renamed only after all ranks succeeded).
pub fn run_mpi(
    mpi: &MpiWorld,
    src: &Variables,
    plan: &Plan,
    dst: &Path,
    options: &ReshardOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Option<ReshardReport>> {
    let start = Instant::now();
    let world = &mpi.world;
    let (rank, size) = (world.rank(), world.size());
    let checked = check_output(src, plan, dst);
    let mine: Vec<usize> = (0..plan.shards.len())
        .filter(|i| *i as i32 % size == rank)
        .collect();
    let result = checked.and_then(|()| write_shards(src, plan, dst, options.jobs, &mine, progress));
    let ok = u8::from(result.is_ok());
    let mut all_ok = 0u8;
    world.all_reduce_into(&ok, &mut all_ok, SystemOperation::min());
    let results = match result {
        Err(e) => return Err(e),
        Ok(_) if all_ok == 0 => {
            return Err(ReshardError::Usage(
                "another MPI rank failed (its error names the cause); nothing was written".into(),
            ))
        }
        Ok(r) => r,
    };
    let mut written = Vec::with_capacity(results.len());
    for (shard, finished, w) in results {
        finished.persist_unsynced()?;
        written.push((shard, w));
    }
    unbound_io::sync_parent(&unbound_bundle::index_path(dst));
    world.barrier();
    if rank != 0 {
        world.process_at_rank(0).send(&encode(&written)[..]);
        world.barrier();
        return Ok(None);
    }
    for r in 1..size {
        let (bytes, _) = world.process_at_rank(r).receive_vec::<u8>();
        written.extend(decode(&bytes)?);
    }
    let done = finish_output(src, plan, dst, written);
    world.barrier();
    done?;
    Ok(Some(report(src, plan, dst, start)))
}

/// Entries as bytes: per shard its number and count, per entry the key, the entry and the
/// slice (variable index, `u32::MAX` for none, and the slice proto), lengths as u32 LE.
fn encode(written: &[(i32, Vec<Written>)]) -> Vec<u8> {
    let mut out = Vec::new();
    let put = |out: &mut Vec<u8>, b: &[u8]| {
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(b);
    };
    for (shard, entries) in written {
        out.extend_from_slice(&shard.to_le_bytes());
        out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        for w in entries {
            put(&mut out, &w.key);
            put(&mut out, &w.entry.encode_to_vec());
            match &w.slice_of {
                Some((v, spec)) => {
                    out.extend_from_slice(&(*v as u32).to_le_bytes());
                    put(&mut out, &spec.to_proto().encode_to_vec());
                }
                None => out.extend_from_slice(&u32::MAX.to_le_bytes()),
            }
        }
    }
    out
}

fn decode(bytes: &[u8]) -> Result<Vec<(i32, Vec<Written>)>> {
    let bad = || ReshardError::Usage("a malformed message from another MPI rank".into());
    let mut pos = 0usize;
    let u32_at = |pos: &mut usize| -> Result<u32> {
        let b = bytes.get(*pos..*pos + 4).ok_or_else(bad)?;
        *pos += 4;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let blob = |pos: &mut usize| -> Result<&[u8]> {
        let n = u32_at(pos)? as usize;
        let b = bytes.get(*pos..*pos + n).ok_or_else(bad)?;
        *pos += n;
        Ok(b)
    };
    let mut out = Vec::new();
    while pos < bytes.len() {
        let shard = u32_at(&mut pos)? as i32;
        let count = u32_at(&mut pos)?;
        let mut entries = Vec::new();
        for _ in 0..count {
            let key = blob(&mut pos)?.to_vec();
            let entry = BundleEntryProto::decode(blob(&mut pos)?).map_err(|_| bad())?;
            let v = u32_at(&mut pos)?;
            let slice_of = if v == u32::MAX {
                None
            } else {
                let proto = TensorSliceProto::decode(blob(&mut pos)?).map_err(|_| bad())?;
                Some((v as usize, SliceSpec::from_proto(&proto)))
            };
            entries.push(Written {
                key,
                entry,
                slice_of,
            });
        }
        out.push((shard, entries));
    }
    Ok(out)
}

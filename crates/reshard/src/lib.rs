//! `unbound-reshard`: sharded checkpoints rewritten for any layout on any mesh, without
//! TensorFlow.
//!
//! A DTensor checkpoint stores each variable as the unique slices its layout gives the
//! devices of a mesh (each written once, by the lowest device id holding it); a plain
//! checkpoint stores each variable whole. [`plan`] decides, for every variable of a source
//! bundle, its target layout on a target mesh ([`LayoutRule`]s matched against checkpoint
//! keys and object paths, a default, or the layout it has) and lists the target slices with
//! the data shard each goes to, numbered as TensorFlow's `tf.train.Checkpoint.save` numbers
//! them: shard 0 for tensors outside the mesh (the object graph, `save_counter`, variables
//! kept whole), shard 1 + i for the device at mesh position i. [`run`] then writes every
//! target slice by streaming the source slices that intersect it
//! ([`unbound_bundle::BoxReader`]), block by block, so no variable is ever held whole; each
//! shard is written by one worker, the index last, everything atomically.
//!
//! ```no_run
//! use std::path::Path;
//! use unbound_reshard::{plan, run, LayoutRule, ReshardOptions};
//!
//! let options = ReshardOptions {
//!     mesh: unbound_reshard::parse_mesh("x=4,y=2")?,
//!     rules: vec![LayoutRule::parse("dense/kernel=y,unsharded")?],
//!     default: None,
//!     jobs: 2,
//! };
//! let src = unbound_bundle::Variables::open(Path::new("ckpt/model-1"))?;
//! let p = plan(&src, &options)?;
//! let report = run(&src, &p, Path::new("out/model-1"), &options, &|_| {})?;
//! println!("{} bytes in {:.2} s", report.bytes, report.seconds);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! With the cargo feature `mpi`, `run_mpi` (under `mpirun`) splits the target shards
//! between the ranks and has rank 0 write the index once every rank's shards are in place.
//!
//! [`run_safetensors`] writes a plan as one safetensors file per device of the mesh (the
//! mesh and layouts in the headers' metadata) and [`import_safetensors`] reads such files,
//! or plain safetensors files, back as a checkpoint to reshard.
//!
//! Invariants: a target is written only after the whole plan is made and every source piece
//! it needs is checked against the index and the data files' sizes; slices that overlap or
//! leave a gap are errors naming the variable, never filled; every byte read is covered by a
//! checksum check before the output is renamed into place.

#![forbid(unsafe_code)]

mod amplification;
#[cfg(feature = "mpi")]
mod distributed;
mod engine;
mod error;
mod plan;
mod planner;
mod safetensors_check;
mod safetensors_in;
mod safetensors_out;
mod state;

#[cfg(feature = "mpi")]
pub use distributed::{run_mpi, MpiWorld};
pub use engine::{run, ReshardReport};
pub use error::{ReshardError, Result};
pub use plan::{ratio, Plan, ShardPlan, TargetItem, VariablePlan};
pub use planner::{parse_mesh, parse_specs, plan, LayoutRule, ReshardOptions, REPLICATED};
pub use safetensors_check::check_header;
pub use safetensors_in::{import_safetensors, stage_safetensors, tf_dtype, unhex, Staged};
pub use safetensors_out::{
    device_file_name, hex, run_safetensors, safetensors_dtype, SafetensorsReport, META_DEVICE,
    META_LAYOUTS, META_MESH, META_OBJECT_GRAPH,
};
pub use state::write_checkpoint_state;

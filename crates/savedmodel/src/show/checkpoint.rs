//! The checkpoint in `variables/` (tensor bundle): its keys and its object graph. Only the
//! index is read (and the object graph's one string tensor); no variable values.

use std::path::Path;

use unbound_proto::tensorflow::TrackableObjectGraph;

use super::signature::dims;
use super::{CheckpointInfo, CheckpointKey};
use unbound_bundle::dtype::enum_name;
use unbound_bundle::{display_key, BundleReader};

/// What `show` reads from the checkpoint.
pub struct Checkpoint {
    /// Keys with dtype, shape and size.
    pub info: CheckpointInfo,
    /// The object graph of an object-based checkpoint.
    pub object_graph: Option<TrackableObjectGraph>,
}

/// Reads the checkpoint of `dir`, if there is one that opens (`unbound verify` reports one that
/// does not).
pub fn read_checkpoint(dir: &Path) -> Option<Checkpoint> {
    let prefix = dir.join("variables").join("variables");
    let bundle = BundleReader::open(&prefix).ok()?;
    let keys = bundle
        .tensor_keys()
        .filter_map(|k| {
            let entry = bundle.entry(k)?;
            Some(CheckpointKey {
                key: display_key(k),
                dtype: enum_name(entry.dtype),
                shape: dims(entry.shape.as_ref()),
                bytes: bundle.stored_bytes(k).unwrap_or(0),
            })
        })
        .collect();
    Some(Checkpoint {
        info: CheckpointInfo {
            prefix: "variables/variables".into(),
            shards: bundle.num_shards().max(0) as u64,
            keys,
        },
        object_graph: bundle.object_graph().ok().flatten(),
    })
}

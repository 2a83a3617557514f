//! The `checkpoint` state file beside a checkpoint (TensorFlow's `CheckpointState` in text
//! form), carried over to the output so `tf.train.latest_checkpoint` finds it.

use std::io::Write;
use std::path::Path;

use crate::error::{ReshardError, Result};

/// Writes `DIR/checkpoint` for the checkpoint at `prefix` (in `DIR`) naming it as the latest
/// and only checkpoint, atomically, in TensorFlow's text form (`model_checkpoint_path` and
/// `all_model_checkpoint_paths`, relative to the directory).
pub fn write_checkpoint_state(prefix: &Path) -> Result<()> {
    let dir = prefix
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = prefix
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .ok_or_else(|| ReshardError::Usage(format!("{}: not a prefix", prefix.display())))?;
    let quoted = name.replace('\\', "\\\\").replace('"', "\\\"");
    let text =
        format!("model_checkpoint_path: \"{quoted}\"\nall_model_checkpoint_paths: \"{quoted}\"\n");
    let path = dir.join("checkpoint");
    unbound_io::write_atomically(&path, |w| {
        w.write_all(text.as_bytes())
            .map_err(|e| unbound_io::IoError::os(&path, e))
    })?;
    Ok(())
}

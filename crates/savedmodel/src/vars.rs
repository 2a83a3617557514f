//! `vars`: the variables of a SavedModel (its `variables/variables` bundle) or of any
//! checkpoint prefix, listed by [`unbound_bundle::variables`].

use std::path::{Path, PathBuf};

use unbound_bundle::variables::Variables;
use unbound_bundle::{index_path, saved_model_prefix};

use crate::dir::model_file;
use crate::{Result, SavedModelError};

/// The bundle prefix for `path`: `DIR/variables/variables` for a SavedModel directory,
/// `path` itself for a checkpoint prefix; `None` for a SavedModel without variables.
pub fn bundle_prefix(path: &Path) -> Result<Option<PathBuf>> {
    let in_model = saved_model_prefix(path);
    if index_path(&in_model).is_file() {
        return Ok(Some(in_model));
    }
    if index_path(path).is_file() {
        return Ok(Some(path.to_path_buf()));
    }
    if model_file(path).is_ok() {
        if let Some(shard) = orphan_data_shard(&in_model) {
            return Err(SavedModelError::IndexMissing {
                index: index_path(&in_model),
                shard,
            });
        }
        return Ok(None);
    }
    Err(SavedModelError::NotAModelOrCheckpoint {
        path: path.to_path_buf(),
    })
}

/// A data shard (`PREFIX.data-*`) of the bundle `prefix`, whose index is missing.
pub fn orphan_data_shard(prefix: &Path) -> Option<PathBuf> {
    let dir = prefix.parent()?;
    let stem = format!("{}.data-", prefix.file_name()?.to_string_lossy());
    let mut shards: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&stem))
        .map(|e| e.path())
        .collect();
    shards.sort();
    shards.into_iter().next()
}

/// Opens the variables of the SavedModel directory or checkpoint prefix `path`; `None` for a
/// SavedModel without variables.
pub fn open_variables(path: &Path) -> Result<Option<Variables>> {
    match bundle_prefix(path)? {
        Some(prefix) => Ok(Some(Variables::open(&prefix)?)),
        None => Ok(None),
    }
}

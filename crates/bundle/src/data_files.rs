//! The data shards of a bundle, each memory-mapped on first use.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bytes::Bytes;

use crate::naming::data_path;

/// Lazily mapped data files `PREFIX.data-*-of-N`.
#[derive(Debug)]
pub(crate) struct DataFiles {
    prefix: PathBuf,
    num_shards: i32,
    maps: Mutex<HashMap<i32, Result<Bytes, String>>>,
    /// Shards held in memory instead of files ([`DataFiles::in_memory`]).
    given: Option<Vec<Bytes>>,
}

impl DataFiles {
    pub(crate) fn new(prefix: &Path, num_shards: i32) -> Self {
        Self {
            prefix: prefix.to_path_buf(),
            num_shards,
            maps: Mutex::new(HashMap::new()),
            given: None,
        }
    }

    /// Shards given as bytes: `shards[i]` is shard `i`; the others are missing. Nothing is
    /// read from disk.
    pub(crate) fn in_memory(prefix: &Path, num_shards: i32, shards: Vec<Bytes>) -> Self {
        Self {
            given: Some(shards),
            ..Self::new(prefix, num_shards)
        }
    }

    /// The path of shard `shard`.
    pub(crate) fn path(&self, shard: i32) -> PathBuf {
        data_path(&self.prefix, shard, self.num_shards)
    }

    /// The bytes of shard `shard` (mapped once, then shared), or why the file cannot be read.
    pub(crate) fn get(&self, shard: i32) -> Result<Bytes, String> {
        if let Some(given) = &self.given {
            return usize::try_from(shard)
                .ok()
                .and_then(|i| given.get(i))
                .cloned()
                .ok_or_else(|| "cannot open data file: no such shard was given".to_string());
        }
        let mut maps = self.maps.lock().unwrap_or_else(|e| e.into_inner());
        maps.entry(shard)
            .or_insert_with(|| map(&self.path(shard)))
            .clone()
    }
}

fn map(path: &Path) -> Result<Bytes, String> {
    unbound_io::map_file(path).map_err(|e| match e {
        unbound_io::IoError::NotRegularFile { .. } => "data file is not a regular file".into(),
        unbound_io::IoError::Os { source, .. } => format!("cannot open data file: {source}"),
        other => format!("cannot read data file: {other}"),
    })
}

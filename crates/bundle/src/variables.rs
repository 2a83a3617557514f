//! The variables of a tensor bundle as a report: what `unbound vars` lists (key, object path,
//! dtype, shape, size, shard, slices) and what it reports after writing one as `.npy`. The
//! reports serialize (serde) to the JSON `unbound vars --json` prints.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::dtype::tf_name;
use crate::npy::{write_npy, NpyError, NpyOptions};
use crate::{
    display_key, index_path, object_paths, shape_from_proto, BundleError, BundleReader, Result,
    SliceSpec,
};

/// The variables of a bundle (or of a SavedModel without one). Fields serialize in this
/// (name) order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VarsReport {
    /// Number of data shards (0 without a bundle).
    pub num_shards: i32,
    /// The bundle prefix (`DIR/variables/variables` for a SavedModel); `None` for a
    /// SavedModel without variables.
    pub prefix: Option<String>,
    /// The variables listed: every tensor in key order, or the one asked for.
    pub variables: Vec<VariableEntry>,
}

impl VarsReport {
    /// The report for a SavedModel without variables.
    pub fn no_variables() -> Self {
        VarsReport {
            num_shards: 0,
            prefix: None,
            variables: Vec::new(),
        }
    }

    /// Total stored size of the variables listed.
    pub fn total_bytes(&self) -> u64 {
        self.variables.iter().map(|v| v.bytes).sum()
    }
}

/// One tensor of the bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VariableEntry {
    /// Size of the stored value in bytes (all slices of a partitioned variable).
    pub bytes: u64,
    /// TensorFlow's Python dtype name ([`tf_name`]: `float32`, `string`, ...).
    pub dtype: String,
    /// The checkpoint key, printable ([`display_key`]).
    pub key: String,
    /// The object path that saved it (from the checkpoint's object graph): child names joined
    /// with `/`, empty for the root object; `None` when unknown.
    pub object_path: Option<String>,
    /// Dimensions; `None` for a shape that is not valid.
    pub shape: Option<Vec<i64>>,
    /// The data shard holding it; `None` for a partitioned variable (its slices say).
    pub shard: Option<i32>,
    /// The slices of a partitioned variable in TensorFlow's text form (`0,2:-`); empty
    /// otherwise.
    pub slices: Vec<String>,
}

/// What writing one variable as `.npy` did. Fields serialize in this (name) order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NpyReport {
    /// The NumPy dtype descriptor written, e.g. `<f4`.
    pub descr: String,
    /// Size of the `.npy` file in bytes.
    pub file_bytes: u64,
    /// The checkpoint key written.
    pub key: String,
    /// A note on a conversion made (bfloat16 widened, ...), if any.
    pub note: Option<String>,
    /// The `.npy` file written.
    pub npy: String,
    /// The array shape.
    pub shape: Vec<i64>,
}

/// A bundle opened for listing: the reader, its prefix, and the object paths of its
/// checkpoint's object graph.
pub struct Variables {
    /// The reader.
    pub reader: BundleReader,
    /// The bundle prefix.
    pub prefix: PathBuf,
    /// Object path by checkpoint key (empty when the bundle has no object graph).
    pub object_paths: BTreeMap<String, String>,
    /// What could not be read but did not stop the listing (an object graph that does not
    /// decode).
    pub warnings: Vec<String>,
}

impl Variables {
    /// Opens the bundle at `prefix` and reads its object graph.
    pub fn open(prefix: &Path) -> Result<Self> {
        let reader = BundleReader::open(prefix)?;
        let mut warnings = Vec::new();
        let object_paths = match reader.object_graph() {
            Ok(Some(graph)) => object_paths(&graph),
            Ok(None) => BTreeMap::new(),
            Err(e) => {
                warnings.push(format!("object paths unavailable: {e}"));
                BTreeMap::new()
            }
        };
        Ok(Variables {
            reader,
            prefix: prefix.to_path_buf(),
            object_paths,
            warnings,
        })
    }

    /// A checkpoint key as given, or the key saved by the object at that path (when exactly
    /// one attribute of it is saved).
    pub fn resolve_key(&self, given: &str) -> String {
        if self.reader.entry(given).is_some() {
            return given.to_string();
        }
        let mut matches = self
            .object_paths
            .iter()
            .filter(|(_, p)| p.as_str() == given);
        match (matches.next(), matches.next()) {
            (Some((key, _)), None) => key.clone(),
            _ => given.to_string(),
        }
    }

    /// The listing: every tensor, or only `key` (a checkpoint key or an object path), which
    /// must exist.
    pub fn report(&self, key: Option<&str>) -> Result<VarsReport> {
        let variables = match key {
            Some(given) => {
                let k = self.resolve_key(given);
                if self.reader.entry(&k).is_none() {
                    return Err(BundleError::NoVariable {
                        file: index_path(&self.prefix),
                        key: k,
                    });
                }
                vec![self.entry(k.as_bytes())]
            }
            None => self.reader.tensor_keys().map(|k| self.entry(k)).collect(),
        };
        Ok(VarsReport {
            num_shards: self.reader.num_shards(),
            prefix: Some(self.prefix.display().to_string()),
            variables,
        })
    }

    /// Writes `key` (a checkpoint key or an object path) as a `.npy` file at `out`
    /// ([`write_npy`]: atomically, every value CRC-checked).
    pub fn write_npy(
        &self,
        key: &str,
        out: &Path,
        opts: NpyOptions,
    ) -> std::result::Result<NpyReport, NpyError> {
        let key = self.resolve_key(key);
        let info = write_npy(&self.reader, key.as_bytes(), out, opts)?;
        Ok(NpyReport {
            descr: info.descr,
            file_bytes: info.file_bytes,
            key,
            note: info.note,
            npy: out.display().to_string(),
            shape: info.shape,
        })
    }

    /// One tensor's entry.
    fn entry(&self, key: &[u8]) -> VariableEntry {
        let entry = self.reader.entry(key).cloned().unwrap_or_default();
        let name = display_key(key);
        VariableEntry {
            bytes: self.reader.stored_bytes(key).unwrap_or(0),
            dtype: tf_name(entry.dtype),
            object_path: self.object_paths.get(&name).cloned(),
            key: name,
            shape: shape_from_proto(entry.shape.as_ref()),
            shard: entry.slices.is_empty().then_some(entry.shard_id),
            slices: entry
                .slices
                .iter()
                .map(|s| SliceSpec::from_proto(s).to_string())
                .collect(),
        }
    }
}

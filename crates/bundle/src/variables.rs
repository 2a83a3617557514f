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
    /// Where each slice of a partitioned variable is stored (in the order of `slices`);
    /// empty, and left out of the JSON, otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stored_slices: Vec<StoredSlice>,
    /// When the slices of a partitioned variable form an even grid (as a DTensor layout
    /// writes them), the number of shards along each axis; left out of the JSON otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grid: Option<Vec<i64>>,
}

/// One stored slice of a partitioned variable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredSlice {
    /// Its size in bytes.
    pub bytes: u64,
    /// The data shard holding it (`None` when the index has no entry for it).
    pub shard: Option<i32>,
    /// The slice in TensorFlow's text form.
    pub slice: String,
}

/// The number of shards along each axis when the slices (start, length per axis) tile a
/// tensor of `shape` as an even grid: on every axis the slices use equal intervals that
/// tile it, and every combination of intervals is one slice. `None` otherwise.
pub fn infer_grid(shape: &[i64], slices: &[Vec<(u64, u64)>]) -> Option<Vec<i64>> {
    if slices.is_empty() || slices.iter().any(|s| s.len() != shape.len()) {
        return None;
    }
    let mut grid = Vec::with_capacity(shape.len());
    for (axis, &dim) in shape.iter().enumerate() {
        let mut intervals: Vec<(u64, u64)> = slices.iter().map(|s| s[axis]).collect();
        intervals.sort_unstable();
        intervals.dedup();
        let len = intervals[0].1;
        let n = intervals.len() as u64;
        let tiles = intervals
            .iter()
            .enumerate()
            .all(|(i, &(start, l))| l == len && start == i as u64 * len);
        if !tiles || n.checked_mul(len) != Some(dim as u64) {
            return None;
        }
        grid.push(n as i64);
    }
    let cells: u64 = grid.iter().map(|&n| n as u64).product();
    let mut distinct = slices.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    (distinct.len() as u64 == cells && slices.len() as u64 == cells).then_some(grid)
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

    /// Writes box `request` (TensorFlow's `shape_and_slice` text, e.g. `8 16 2,4:3,10`) of
    /// `key` (a checkpoint key or an object path) as a `.npy` file at `out`
    /// ([`crate::npy::write_box_npy`]).
    pub fn write_box_npy(
        &self,
        key: &str,
        request: &str,
        out: &Path,
        opts: NpyOptions,
    ) -> std::result::Result<NpyReport, NpyError> {
        let key = self.resolve_key(key);
        let request = crate::ShapeAndSlice::parse(request)
            .map_err(|f| BundleError::tensor(self.reader.index_path(), key.as_bytes(), f.0))?;
        let info = crate::npy::write_box_npy(&self.reader, key.as_bytes(), &request, out, opts)?;
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
        let shape = shape_from_proto(entry.shape.as_ref());
        let specs: Vec<SliceSpec> = entry.slices.iter().map(SliceSpec::from_proto).collect();
        let stored_slices = specs
            .iter()
            .map(|spec| {
                let slice_key = crate::encode_tensor_name_slice(key, spec);
                let e = self.reader.entry(&slice_key);
                StoredSlice {
                    bytes: e.map_or(0, |e| e.size.max(0) as u64),
                    shard: e.map(|e| e.shard_id),
                    slice: spec.to_string(),
                }
            })
            .collect();
        let grid = shape.as_ref().and_then(|shape| {
            let resolved: Option<Vec<_>> = specs.iter().map(|s| s.resolve(shape).ok()).collect();
            infer_grid(shape, &resolved?)
        });
        VariableEntry {
            stored_slices,
            grid,
            bytes: self.reader.stored_bytes(key).unwrap_or(0),
            dtype: tf_name(entry.dtype),
            object_path: self.object_paths.get(&name).cloned(),
            key: name,
            shape,
            shard: entry.slices.is_empty().then_some(entry.shard_id),
            slices: entry
                .slices
                .iter()
                .map(|s| SliceSpec::from_proto(s).to_string())
                .collect(),
        }
    }
}

//! Checking a whole bundle: every tensor's size, offset and checksum, every data shard, every
//! partitioned tensor's slices.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::BundleError;
use crate::reader::BundleReader;

/// Most shards checked for presence one by one (a damaged header could claim billions).
const MAX_SHARDS_CHECKED: i32 = 1 << 16;

/// One thing wrong with a bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleFault {
    /// The file at fault (index or data shard).
    pub file: PathBuf,
    /// The tensor key concerned, if any (printable; slice keys decoded).
    pub key: Option<String>,
    /// What is wrong.
    pub fault: String,
}

impl fmt::Display for BundleFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(k) => write!(f, "{}: tensor {k}: {}", self.file.display(), self.fault),
            None => write!(f, "{}: {}", self.file.display(), self.fault),
        }
    }
}

impl From<BundleError> for BundleFault {
    fn from(e: BundleError) -> Self {
        match e {
            BundleError::Io { path, source } => Self {
                file: path,
                key: None,
                fault: source.to_string(),
            },
            BundleError::Index { file, fault } => Self {
                file,
                key: None,
                fault,
            },
            BundleError::Tensor { file, key, fault } => Self {
                file,
                key: Some(key),
                fault,
            },
            BundleError::NotFound { file, key } => Self {
                file,
                key: Some(key),
                fault: "missing".into(),
            },
            other => Self {
                file: PathBuf::new(),
                key: None,
                fault: other.to_string(),
            },
        }
    }
}

/// Opens the bundle at `prefix` and verifies it; a bundle that does not open gives one fault.
pub fn verify_prefix(prefix: &Path) -> Vec<BundleFault> {
    match BundleReader::open(prefix) {
        Ok(r) => r.verify(),
        Err(e) => vec![e.into()],
    }
}

impl BundleReader {
    /// Checks every data shard exists and every tensor reads back with a matching checksum;
    /// partitioned tensors must have disjoint slices covering them. A missing shard is
    /// reported once (not once per tensor stored in it). Empty when all is well. (Whether
    /// every key the object graph names is present is left to the caller: see
    /// [`crate::object_paths`].)
    pub fn verify(&self) -> Vec<BundleFault> {
        let mut faults = Vec::new();
        let mut missing: BTreeMap<i32, usize> = BTreeMap::new();
        if self.num_shards() > MAX_SHARDS_CHECKED {
            faults.push(BundleFault {
                file: self.index_path().to_path_buf(),
                key: None,
                fault: format!("header claims {} data shards", self.num_shards()),
            });
        } else {
            for shard in 0..self.num_shards() {
                if self.data.get(shard).is_err() {
                    missing.insert(shard, 0);
                }
            }
        }
        // Slice keys are verified as stored tensors like any other.
        for key in self.keys() {
            let Some(entry) = self.entry(key) else {
                continue;
            };
            let result = if !entry.slices.is_empty() {
                self.slice_plan(key, entry).map(|_| ())
            } else if let Some(count) = missing.get_mut(&entry.shard_id) {
                *count += 1;
                continue;
            } else {
                self.read_stored(key, entry).map(|_| ())
            };
            if let Err(e) = result {
                faults.push(e.into());
            }
        }
        faults.extend(self.slack_faults(&missing));
        for (shard, count) in missing {
            let fault = match self.data.get(shard) {
                Err(f) => f,
                Ok(_) => continue,
            };
            faults.insert(
                0,
                BundleFault {
                    file: self.data_path(shard),
                    key: None,
                    fault: format!("{fault} (data shard {shard}, {count} tensors stored there)"),
                },
            );
        }
        faults
    }

    /// Bytes TensorFlow's reader skips but its writer never leaves, so a file that holds
    /// them was changed after it was written: bytes in a data shard after the end of the
    /// last tensor stored there, and non-zero bytes in the index footer's padding.
    fn slack_faults(&self, missing: &BTreeMap<i32, usize>) -> Vec<BundleFault> {
        let mut faults = Vec::new();
        let mut ends: BTreeMap<i32, u64> = BTreeMap::new();
        for key in self.keys() {
            if let Some(e) = self.entry(key).filter(|e| e.slices.is_empty()) {
                let end = ends.entry(e.shard_id).or_default();
                // Negative values are the read's fault to report, not this check's.
                let stored_end = e.offset.saturating_add(e.size).max(0) as u64;
                *end = (*end).max(stored_end);
            }
        }
        if self.num_shards() <= MAX_SHARDS_CHECKED {
            for shard in (0..self.num_shards()).filter(|s| !missing.contains_key(s)) {
                let Ok(data) = self.data.get(shard) else {
                    continue;
                };
                let end = ends.get(&shard).copied().unwrap_or(0);
                if data.len() as u64 > end {
                    faults.push(BundleFault {
                        file: self.data_path(shard),
                        key: None,
                        fault: format!(
                            "{} bytes after the end of the last tensor stored there (at {end}): appended after the checkpoint was written",
                            data.len() as u64 - end
                        ),
                    });
                }
            }
        }
        // Only a bundle read from files has an index file to look at again.
        if let Ok(index) = unbound_io::map_file(self.index_path()) {
            if let Some(at) = crate::sstable::footer_padding_fault(&index) {
                faults.push(BundleFault {
                    file: self.index_path().to_path_buf(),
                    key: None,
                    fault: format!(
                        "non-zero byte at {at} in the table footer's padding (TensorFlow writes zeros): the index was changed after it was written"
                    ),
                });
            }
        }
        faults
    }
}

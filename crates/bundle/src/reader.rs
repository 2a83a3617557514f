//! Reading a bundle: the index is parsed on open; data shards are mapped on first use, and a
//! tensor is read (and its checksum verified) only when asked for.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use prost::Message;
use unbound_proto::tensorflow::{
    bundle_header_proto::Endianness, BundleEntryProto, BundleHeaderProto, TrackableObjectGraph,
};

use crate::crc;
use crate::data_files::DataFiles;
use crate::dtype::{storage, tf_name, Storage};
use crate::error::{BundleError, Result};
use crate::naming::index_path;
use crate::ordered_code::is_slice_key;
use crate::sstable::read_table;
use crate::strings::{decode_strings, decode_variants};
use crate::tensor::{num_elements, shape_from_proto, Tensor, TensorData};
use crate::OBJECT_GRAPH_KEY;

/// The newest bundle format version this reader understands (TensorFlow's
/// `kTensorBundleVersion`).
const BUNDLE_VERSION: i32 = 1;

/// An open tensor bundle (`PREFIX.index` plus `PREFIX.data-*-of-*`).
#[derive(Debug)]
pub struct BundleReader {
    prefix: PathBuf,
    index_path: PathBuf,
    header: BundleHeaderProto,
    entries: BTreeMap<Vec<u8>, BundleEntryProto>,
    pub(crate) data: DataFiles,
}

impl BundleReader {
    /// Opens the bundle at `prefix` (for a SavedModel, `DIR/variables/variables`): maps and
    /// parses the index (every block checksum verified), checks the header. Data files are
    /// mapped when a tensor in them is first read.
    pub fn open(prefix: &Path) -> Result<Self> {
        let index_path = index_path(prefix);
        let bytes = map_index(&index_path)?;
        Self::from_index(prefix, index_path, bytes, DataFiles::new)
    }

    /// A bundle held in memory: the bytes of its `.index` and of its data shards (shard `i`
    /// is `shards[i]`; a shard the index names past the list reads as missing). `prefix` only
    /// names the files in errors. For tests and fuzzing, and for bundles that are not files.
    pub fn from_bytes(prefix: &Path, index: Bytes, shards: Vec<Bytes>) -> Result<Self> {
        Self::from_index(prefix, index_path(prefix), index, |prefix, num_shards| {
            DataFiles::in_memory(prefix, num_shards, shards)
        })
    }

    /// Parses the index `bytes` (from `index_path`) and checks its header.
    fn from_index(
        prefix: &Path,
        index_path: PathBuf,
        bytes: Bytes,
        data: impl FnOnce(&Path, i32) -> DataFiles,
    ) -> Result<Self> {
        let table =
            read_table(&bytes).map_err(|e| BundleError::index(&index_path, e.to_string()))?;
        let mut rows = table.into_iter();
        let header = match rows.next() {
            Some(first) if first.key.is_empty() => {
                BundleHeaderProto::decode(first.value).map_err(|e| {
                    BundleError::index(&index_path, format!("unparseable header entry: {e}"))
                })?
            }
            _ => {
                return Err(BundleError::index(
                    &index_path,
                    "no header entry (key \"\")",
                ))
            }
        };
        check_header(&header).map_err(|f| BundleError::index(&index_path, f))?;
        let mut entries = BTreeMap::new();
        for row in rows {
            let entry = BundleEntryProto::decode(row.value).map_err(|e| {
                BundleError::tensor(
                    &index_path,
                    &row.key,
                    format!("unparseable index entry: {e}"),
                )
            })?;
            entries.insert(row.key, entry);
        }
        Ok(Self {
            data: data(prefix, header.num_shards),
            prefix: prefix.to_path_buf(),
            index_path,
            header,
            entries,
        })
    }

    /// The bundle prefix.
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// The `.index` file.
    pub fn index_path(&self) -> &Path {
        &self.index_path
    }

    /// The path of data shard `shard`.
    pub fn data_path(&self, shard: i32) -> PathBuf {
        self.data.path(shard)
    }

    /// The header entry.
    pub fn header(&self) -> &BundleHeaderProto {
        &self.header
    }

    /// Number of data shards.
    pub fn num_shards(&self) -> i32 {
        self.header.num_shards
    }

    /// Every key but the header's, in order, including the keys of slices of partitioned
    /// tensors (see [`crate::is_slice_key`]).
    pub fn keys(&self) -> impl Iterator<Item = &[u8]> {
        self.entries.keys().map(Vec::as_slice)
    }

    /// The keys of whole tensors (partitioned ones included), without slice keys.
    pub fn tensor_keys(&self) -> impl Iterator<Item = &[u8]> {
        self.keys().filter(|k| !is_slice_key(k))
    }

    /// The slice keys no entry lists among its slices: what TensorFlow's `list_variables`
    /// (`CheckpointReader`, which hides only the slice keys some entry lists) shows as
    /// variables of their own. A key that looks like a slice key but does not decode, and a
    /// slice of a tensor with no entry of its own, are such keys; TensorFlow never writes one.
    pub fn unlisted_slice_keys(&self) -> Vec<&[u8]> {
        let listed: std::collections::HashSet<Vec<u8>> = self
            .entries
            .iter()
            .flat_map(|(key, entry)| {
                entry.slices.iter().map(move |s| {
                    crate::encode_tensor_name_slice(key, &crate::SliceSpec::from_proto(s))
                })
            })
            .collect();
        self.keys()
            .filter(|k| is_slice_key(k) && !listed.contains(*k))
            .collect()
    }

    /// The index entry of `key`.
    pub fn entry(&self, key: impl AsRef<[u8]>) -> Option<&BundleEntryProto> {
        self.entries.get(key.as_ref())
    }

    /// The bytes `key` occupies in the data files (for a partitioned tensor, the sum over its
    /// slices).
    pub fn stored_bytes(&self, key: impl AsRef<[u8]>) -> Option<u64> {
        let key = key.as_ref();
        let entry = self.entry(key)?;
        if entry.slices.is_empty() {
            return Some(entry.size.max(0) as u64);
        }
        let total = entry
            .slices
            .iter()
            .map(|s| {
                let slice_key =
                    crate::encode_tensor_name_slice(key, &crate::SliceSpec::from_proto(s));
                self.entry(&slice_key).map_or(0, |e| e.size.max(0) as u64)
            })
            .sum();
        Some(total)
    }

    /// Reads one tensor (a partitioned one is assembled from its slices), verifying sizes,
    /// offsets and checksums. Numeric values are slices of the mapped data file.
    pub fn read(&self, key: impl AsRef<[u8]>) -> Result<Tensor> {
        let key = key.as_ref();
        let entry = self.lookup(key)?;
        if entry.slices.is_empty() {
            self.read_stored(key, entry)
        } else {
            self.read_partitioned(key, entry)
        }
    }

    /// The stored bytes of tensor `key`, stored whole (not partitioned), as a slice of its
    /// mapped data file: no copy is made. Dtype, shape, shard, offset and size are checked
    /// against the index and the file; with `verify`, the bytes' CRC32C is checked too (which
    /// reads every byte once). For zero-copy readers such as the Python package's views.
    pub fn mapped(&self, key: impl AsRef<[u8]>, verify: bool) -> Result<Bytes> {
        let key = key.as_ref();
        let entry = self.lookup(key)?;
        if !entry.slices.is_empty() {
            return Err(BundleError::Unsupported {
                key: crate::display_key(key),
                what: format!("stored in {} slices, not whole", entry.slices.len()),
            });
        }
        let (path, bytes) = self.checked_bytes(key, entry)?;
        if verify {
            check_crc(&path, key, entry, crc::crc32c(&bytes))?;
        }
        Ok(bytes)
    }

    /// The object graph of an object-based checkpoint (`_CHECKPOINTABLE_OBJECT_GRAPH`), or
    /// `None` for a name-based one.
    pub fn object_graph(&self) -> Result<Option<TrackableObjectGraph>> {
        if self.entry(OBJECT_GRAPH_KEY).is_none() {
            return Ok(None);
        }
        let t = self.read(OBJECT_GRAPH_KEY)?;
        let bad = |fault: String| {
            BundleError::tensor(&self.index_path, OBJECT_GRAPH_KEY.as_bytes(), fault)
        };
        match &t.data {
            TensorData::Strings(v) if v.len() == 1 => TrackableObjectGraph::decode(v[0].clone())
                .map(Some)
                .map_err(|e| bad(format!("not a TrackableObjectGraph: {e}"))),
            _ => Err(bad("not a scalar string".into())),
        }
    }

    pub(crate) fn lookup(&self, key: &[u8]) -> Result<&BundleEntryProto> {
        self.entry(key).ok_or_else(|| BundleError::NotFound {
            file: self.index_path.clone(),
            key: crate::display_key(key),
        })
    }

    /// Reads a tensor stored in one piece.
    pub(crate) fn read_stored(&self, key: &[u8], entry: &BundleEntryProto) -> Result<Tensor> {
        let shape = self.entry_shape(key, entry)?;
        let n = num_elements(&shape).unwrap_or(0);
        let (path, bytes) = self.checked_bytes(key, entry)?;
        let fault = |f: String| BundleError::tensor(&path, key, f);
        let (data, c) = match storage(entry.dtype) {
            Storage::Fixed(_) | Storage::Opaque => {
                let c = crc::crc32c(&bytes);
                (TensorData::Raw(bytes), c)
            }
            Storage::String => {
                let (v, c) = decode_strings(&bytes, n).map_err(|f| fault(f.into()))?;
                (TensorData::Strings(v), c)
            }
            Storage::Variant => {
                let (v, c) = decode_variants(&bytes, n).map_err(|f| fault(f.into()))?;
                (TensorData::Variants(v), c)
            }
        };
        check_crc(&path, key, entry, c)?;
        Ok(Tensor {
            dtype: entry.dtype,
            shape,
            data,
        })
    }

    /// The entry's shape, checked.
    pub(crate) fn entry_shape(&self, key: &[u8], entry: &BundleEntryProto) -> Result<Vec<i64>> {
        shape_from_proto(entry.shape.as_ref())
            .filter(|s| num_elements(s).is_some())
            .ok_or_else(|| {
                BundleError::tensor(
                    &self.index_path,
                    key,
                    format!("invalid shape {:?}", entry.shape),
                )
            })
    }

    /// The entry's bytes in its data file, after checking dtype, size against dtype and
    /// shape, shard, and offset and size against the file. Does not read the bytes.
    pub(crate) fn checked_bytes(
        &self,
        key: &[u8],
        entry: &BundleEntryProto,
    ) -> Result<(PathBuf, Bytes)> {
        let index_fault = |f: String| BundleError::tensor(&self.index_path, key, f);
        let shape = self.entry_shape(key, entry)?;
        let n = num_elements(&shape).unwrap_or(0);
        if entry.dtype <= 0 || tf_name(entry.dtype).starts_with("dtype(") {
            return Err(index_fault(format!("unknown dtype {}", entry.dtype)));
        }
        if entry.offset < 0 || entry.size < 0 {
            return Err(index_fault(format!(
                "negative offset {} or size {}",
                entry.offset, entry.size
            )));
        }
        if let Storage::Fixed(elem) = storage(entry.dtype) {
            if n.checked_mul(elem as u64) != Some(entry.size as u64) {
                return Err(index_fault(format!(
                    "stored size {} does not match shape {shape:?} of {} ({elem}-byte elements)",
                    entry.size,
                    tf_name(entry.dtype)
                )));
            }
        }
        if entry.shard_id < 0 || entry.shard_id >= self.num_shards() {
            return Err(index_fault(format!(
                "shard {} but the bundle has {} shards",
                entry.shard_id,
                self.num_shards()
            )));
        }
        let path = self.data.path(entry.shard_id);
        let file = self
            .data
            .get(entry.shard_id)
            .map_err(|f| BundleError::tensor(&path, key, f))?;
        let (start, size) = (entry.offset as u64, entry.size as u64);
        match start.checked_add(size) {
            Some(end) if end <= file.len() as u64 => {
                Ok((path, file.slice(start as usize..end as usize)))
            }
            _ => Err(BundleError::tensor(
                &path,
                key,
                format!(
                    "stored at bytes {start}..{} but the file has {} bytes (truncated?)",
                    start.saturating_add(size),
                    file.len()
                ),
            )),
        }
    }
}

pub(crate) fn check_crc(
    path: &Path,
    key: &[u8],
    entry: &BundleEntryProto,
    actual: u32,
) -> Result<()> {
    let stored = crc::unmask(entry.crc32c);
    if stored != actual {
        return Err(BundleError::tensor(
            path,
            key,
            format!(
                "checksum mismatch: the index says {stored:#010x}, the {} bytes at offset {} give {actual:#010x}",
                entry.size, entry.offset
            ),
        ));
    }
    Ok(())
}

fn check_header(h: &BundleHeaderProto) -> std::result::Result<(), String> {
    if h.num_shards < 1 {
        return Err(format!("header says {} data shards", h.num_shards));
    }
    if h.endianness == Endianness::Big as i32 {
        return Err("big-endian bundles are not supported".into());
    }
    if let Some(v) = &h.version {
        if v.min_consumer > BUNDLE_VERSION || v.bad_consumers.contains(&BUNDLE_VERSION) {
            return Err(format!(
                "bundle format version {} needs a newer reader (min consumer {})",
                v.producer, v.min_consumer
            ));
        }
    }
    Ok(())
}

fn map_index(path: &Path) -> Result<Bytes> {
    Ok(unbound_io::map_file(path)?)
}

//! Writing a bundle: tensors are appended to data shards as they are added; `finish` syncs
//! and renames the shards into place, then writes the index (sorted keys, header first)
//! atomically, as TensorFlow's `BundleWriter` does. Until then only temporary files exist
//! (removed if the writer is dropped unfinished, or by the CLI's signal handler).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use prost::Message;
use unbound_io::{InPieces, TempPath};
use unbound_proto::tensorflow::{BundleEntryProto, BundleHeaderProto, VersionDef};

use crate::crc;
use crate::dtype::tf_name;
use crate::error::{BundleError, Result};
use crate::naming::{data_path, index_path};
use crate::ordered_code::encode_tensor_name_slice;
use crate::slices::{overlap, SliceSpec};
use crate::sstable::TableBuilder;
use crate::strings::{encode_strings, encode_variants};
use crate::tensor::{shape_to_proto, Tensor, TensorData};

/// The format version written (TensorFlow's `kTensorBundleVersion`).
const BUNDLE_VERSION: i32 = 1;

struct Shard {
    /// The temporary file, renamed to the shard's final path by `finish`; removed if the
    /// writer is dropped unfinished.
    tmp: TempPath,
    /// Large tensors reach the file a piece at a time ([`unbound_io::InPieces`]).
    out: BufWriter<InPieces<File>>,
    size: u64,
}

/// Writes a tensor bundle at a prefix, with one or more data shards.
pub struct BundleWriter {
    prefix: PathBuf,
    shards: Vec<Shard>,
    entries: BTreeMap<Vec<u8>, BundleEntryProto>,
}

impl BundleWriter {
    /// A writer for a bundle with one data shard.
    pub fn create(prefix: &Path) -> Result<Self> {
        Self::with_shards(prefix, 1)
    }

    /// A writer for a bundle with `num_shards` data shards (`PREFIX.data-0000i-of-N`).
    pub fn with_shards(prefix: &Path, num_shards: i32) -> Result<Self> {
        if !(1..=99_999).contains(&num_shards) {
            return Err(BundleError::Invalid(format!(
                "{num_shards} shards (1 to 99999)"
            )));
        }
        crate::shard_writer::prepare_shards(prefix, num_shards)?;
        let mut writer = Self {
            prefix: prefix.to_path_buf(),
            shards: Vec::new(),
            entries: BTreeMap::new(),
        };
        for i in 0..num_shards {
            let tmp = TempPath::new_cleaned(&data_path(prefix, i, num_shards));
            let file = tmp
                .create_file()
                .map_err(|e| BundleError::io(tmp.path(), e))?;
            writer.shards.push(Shard {
                tmp,
                out: BufWriter::with_capacity(unbound_io::BUFFER_SIZE, InPieces(file)),
                size: 0,
            });
        }
        Ok(writer)
    }

    /// Number of data shards.
    pub fn num_shards(&self) -> i32 {
        self.shards.len() as i32
    }

    /// Adds `tensor` under `key` to shard 0.
    pub fn add(&mut self, key: &str, tensor: &Tensor) -> Result<()> {
        self.add_to_shard(0, key, tensor)
    }

    /// Adds `tensor` under `key` to data shard `shard`.
    pub fn add_to_shard(&mut self, shard: i32, key: &str, tensor: &Tensor) -> Result<()> {
        check_key(key)?;
        if self.entries.contains_key(key.as_bytes()) {
            return Err(BundleError::Invalid(format!("duplicate key {key:?}")));
        }
        let entry = self.write_data(shard, key, tensor)?;
        self.entries.insert(key.as_bytes().to_vec(), entry);
        Ok(())
    }

    /// Adds one slice of the partitioned tensor `full_key` (of shape `full_shape`) to shard
    /// `shard`, as TensorFlow's `BundleWriter::AddSlice`: the full tensor's entry records the
    /// slice, the values go under the slice's own key. A slice covering the whole tensor is
    /// stored as a plain tensor.
    pub fn add_slice(
        &mut self,
        shard: i32,
        full_key: &str,
        full_shape: &[i64],
        slice: &SliceSpec,
        tensor: &Tensor,
    ) -> Result<()> {
        check_key(full_key)?;
        let resolved = slice
            .resolve(full_shape)
            .map_err(|e| BundleError::Invalid(format!("{full_key:?}: {e}")))?;
        let slice_shape: Vec<i64> = resolved.iter().map(|&(_, l)| l as i64).collect();
        if slice_shape == full_shape {
            return self.add_to_shard(shard, full_key, tensor);
        }
        if tensor.shape != slice_shape {
            return Err(BundleError::Invalid(format!(
                "{full_key:?}: slice {slice} needs shape {slice_shape:?}, the tensor has {:?}",
                tensor.shape
            )));
        }
        if let Some(existing) = self.entries.get(full_key.as_bytes()) {
            let same = existing.dtype == tensor.dtype
                && existing.shape == Some(shape_to_proto(full_shape))
                && !existing.slices.is_empty();
            if !same {
                return Err(BundleError::Invalid(format!(
                    "{full_key:?} already added with another dtype or shape, or unpartitioned"
                )));
            }
            for s in &existing.slices {
                let other = SliceSpec::from_proto(s)
                    .resolve(full_shape)
                    .unwrap_or_default();
                if overlap(&other, &resolved) {
                    return Err(BundleError::Invalid(format!(
                        "{full_key:?}: slice {slice} overlaps slice {}",
                        SliceSpec::from_proto(s)
                    )));
                }
            }
        }
        let slice_key = encode_tensor_name_slice(full_key.as_bytes(), slice);
        if self.entries.contains_key(&slice_key) {
            return Err(BundleError::Invalid(format!(
                "{full_key:?}: slice {slice} added twice"
            )));
        }
        let entry = self.write_data(shard, full_key, tensor)?;
        self.entries.insert(slice_key, entry);
        let full = self
            .entries
            .entry(full_key.as_bytes().to_vec())
            .or_insert_with(|| BundleEntryProto {
                dtype: tensor.dtype,
                shape: Some(shape_to_proto(full_shape)),
                ..Default::default()
            });
        full.slices.push(slice.to_proto());
        Ok(())
    }

    /// Appends the tensor's data to a shard and returns its index entry.
    fn write_data(&mut self, shard: i32, key: &str, tensor: &Tensor) -> Result<BundleEntryProto> {
        if tensor.dtype <= 0 || tf_name(tensor.dtype).starts_with("dtype(") {
            return Err(BundleError::Invalid(format!(
                "{key:?}: unknown dtype {}",
                tensor.dtype
            )));
        }
        tensor
            .check_consistent()
            .map_err(|e| BundleError::Invalid(format!("{key:?}: {e}")))?;
        let num_shards = self.shards.len();
        let s = usize::try_from(shard)
            .ok()
            .and_then(|i| self.shards.get_mut(i))
            .ok_or_else(|| BundleError::Invalid(format!("shard {shard} of {num_shards}")))?;
        let out = &mut s.out;
        let io = |e| BundleError::io(s.tmp.path(), e);
        let (size, c) = match &tensor.data {
            TensorData::Raw(b) => {
                out.write_all(b).map_err(io)?;
                (b.len() as u64, crc::crc32c(b))
            }
            TensorData::Strings(v) => encode_strings(v, out).map_err(io)?,
            TensorData::Variants(v) => encode_variants(v, out).map_err(io)?,
        };
        let entry = BundleEntryProto {
            dtype: tensor.dtype,
            shape: Some(shape_to_proto(&tensor.shape)),
            shard_id: shard,
            offset: s.size as i64,
            size: size as i64,
            crc32c: crc::mask(c),
            slices: Vec::new(),
        };
        s.size += size;
        Ok(entry)
    }

    /// Syncs and renames the data shards into place, then writes the index atomically.
    pub fn finish(mut self) -> Result<()> {
        let num_shards = self.shards.len() as i32;
        for s in std::mem::take(&mut self.shards) {
            let file = s
                .out
                .into_inner()
                .map_err(|e| BundleError::io(s.tmp.path(), e.into_error()))?
                .into_inner();
            file.sync_all()
                .map_err(|e| BundleError::io(s.tmp.path(), e))?;
            drop(file);
            s.tmp.persist()?;
        }
        let header = BundleHeaderProto {
            num_shards,
            endianness: 0,
            version: Some(VersionDef {
                producer: BUNDLE_VERSION,
                min_consumer: 0,
                bad_consumers: Vec::new(),
            }),
        };
        let mut table = TableBuilder::new();
        table.add(b"", &header.encode_to_vec());
        for (key, entry) in &self.entries {
            table.add(key, &entry.encode_to_vec());
        }
        let bytes = table.finish();
        let index = index_path(&self.prefix);
        unbound_io::write_atomically(&index, |w| {
            w.write_all(&bytes).map_err(|e| BundleError::io(&index, e))
        })
    }
}

fn check_key(key: &str) -> Result<()> {
    if key.is_empty() || key.as_bytes()[0] == 0 {
        return Err(BundleError::Invalid(format!(
            "key {key:?}: keys must be non-empty and not start with a zero byte"
        )));
    }
    Ok(())
}

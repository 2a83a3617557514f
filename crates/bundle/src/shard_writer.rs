//! Writing a bundle one data shard at a time, streamed: each [`ShardWriter`] owns one data
//! file (so several threads or processes can write shards side by side), takes an entry's
//! bytes piece by piece and computes its checksum on the way; [`write_index`] writes the
//! index once every shard is in place. Until a shard is persisted it exists only under a
//! temporary name, removed if the writer is dropped.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use prost::Message;
use unbound_io::{InPieces, TempPath};
use unbound_proto::tensorflow::{BundleEntryProto, BundleHeaderProto, VersionDef};

use crate::crc;
use crate::error::{BundleError, Result};
use crate::naming::{data_path, index_path};
use crate::sstable::TableBuilder;
use crate::strings::{encode_strings, encode_variants};
use crate::tensor::{shape_to_proto, Tensor, TensorData};

/// The format version written (TensorFlow's `kTensorBundleVersion`).
const BUNDLE_VERSION: i32 = 1;

/// One data shard being written.
pub struct ShardWriter {
    shard: i32,
    tmp: TempPath,
    /// Large tensors reach the file a piece at a time ([`unbound_io::InPieces`]).
    out: BufWriter<InPieces<File>>,
    size: u64,
}

/// The bytes of one entry being appended; see [`ShardWriter::append_with`].
pub struct EntrySink<'a> {
    writer: &'a mut ShardWriter,
    crc: u32,
    size: u64,
}

impl EntrySink<'_> {
    /// Appends `bytes` to the entry.
    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.writer
            .out
            .write_all(bytes)
            .map_err(|e| BundleError::io(self.writer.tmp.path(), e))?;
        self.crc = crc::extend(self.crc, bytes);
        self.size += bytes.len() as u64;
        Ok(())
    }
}

/// Refuses a shard number outside `0..num_shards` or a count outside 1 to 99,999.
fn check_shard(shard: i32, num_shards: i32) -> Result<()> {
    if !(1..=99_999).contains(&num_shards) || !(0..num_shards).contains(&shard) {
        return Err(BundleError::Invalid(format!(
            "shard {shard} of {num_shards} (1 to 99999 shards)"
        )));
    }
    Ok(())
}

/// Creates the directory of `prefix` if needed.
fn create_parent(prefix: &Path) -> Result<()> {
    if let Some(dir) = prefix.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| BundleError::io(dir, e))?;
    }
    Ok(())
}

/// Prepares the writing of all `num_shards` data shards of the bundle at `prefix` (then
/// [`ShardWriter::create_prepared`] for each): creates the prefix's directory and removes,
/// in one listing of it, the temporaries killed writers left of any of its shards or its
/// index.
pub fn prepare_shards(prefix: &Path, num_shards: i32) -> Result<()> {
    check_shard(0, num_shards)?;
    create_parent(prefix)?;
    let mut targets: Vec<_> = (0..num_shards)
        .map(|i| data_path(prefix, i, num_shards))
        .collect();
    targets.push(index_path(prefix));
    unbound_io::remove_stale_temporaries_of(&targets);
    Ok(())
}

/// A shard written and synced, still under its temporary name.
pub struct FinishedShard(TempPath);

impl FinishedShard {
    /// Renames the shard to its final name.
    pub fn persist(self) -> Result<()> {
        Ok(self.0.persist()?)
    }

    /// Renames the shard to its final name without syncing its directory: a writer of many
    /// shards syncs it once after the last ([`unbound_io::sync_parent`]).
    pub fn persist_unsynced(self) -> Result<()> {
        Ok(self.0.persist_unsynced()?)
    }
}

impl ShardWriter {
    /// Starts data shard `shard` of `num_shards` of the bundle at `prefix`
    /// (`PREFIX.data-0000i-of-N`, under a temporary name until persisted), creating the
    /// prefix's directory if needed.
    pub fn create(prefix: &Path, shard: i32, num_shards: i32) -> Result<Self> {
        check_shard(shard, num_shards)?;
        create_parent(prefix)?;
        Self::open(TempPath::new(&data_path(prefix, shard, num_shards)), shard)
    }

    /// [`ShardWriter::create`] for a writer of many shards that called [`prepare_shards`]
    /// once before: neither the directory nor stale temporaries are looked at again, so
    /// writing N shards costs N files, not N listings of the directory.
    pub fn create_prepared(prefix: &Path, shard: i32, num_shards: i32) -> Result<Self> {
        check_shard(shard, num_shards)?;
        Self::open(
            TempPath::new_cleaned(&data_path(prefix, shard, num_shards)),
            shard,
        )
    }

    /// Starts data shard `shard` of `num_shards` of the bundle at `prefix` over the file at
    /// `from`, which already holds bytes of entries: a file the caller wrote before it knew
    /// where the bundle would be (`externalize` spools values as it verifies its source),
    /// on the same filesystem. The file is moved to the shard's temporary name and appended
    /// to; [`ShardWriter::entry_at`] describes the entries it held.
    pub fn adopt(prefix: &Path, shard: i32, num_shards: i32, from: &Path) -> Result<Self> {
        check_shard(shard, num_shards)?;
        create_parent(prefix)?;
        let tmp = TempPath::new(&data_path(prefix, shard, num_shards));
        std::fs::rename(from, tmp.path()).map_err(|e| BundleError::io(from, e))?;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(tmp.path())
            .map_err(|e| BundleError::io(tmp.path(), e))?;
        let size = file
            .metadata()
            .map_err(|e| BundleError::io(tmp.path(), e))?
            .len();
        Ok(Self {
            shard,
            tmp,
            out: BufWriter::with_capacity(unbound_io::BUFFER_SIZE, InPieces(file)),
            size,
        })
    }

    /// The index entry of `size` bytes at `offset` of the shard, bytes already in it (those of
    /// the file [`ShardWriter::adopt`] took, or appended) in the stored layout of `dtype`,
    /// whose CRC-32C (unmasked) is `crc`; refused when they are not all in the shard.
    pub fn entry_at(
        &self,
        dtype: i32,
        shape: &[i64],
        offset: u64,
        size: u64,
        crc: u32,
    ) -> Result<BundleEntryProto> {
        if offset.checked_add(size).is_none_or(|end| end > self.size) {
            return Err(BundleError::Invalid(format!(
                "{}: an entry of {size} bytes at byte {offset}, past the {} bytes it holds",
                self.tmp.target().display(),
                self.size
            )));
        }
        Ok(BundleEntryProto {
            dtype,
            shape: Some(shape_to_proto(shape)),
            shard_id: self.shard,
            offset: offset as i64,
            size: size as i64,
            crc32c: crc::mask(crc),
            slices: Vec::new(),
        })
    }

    fn open(tmp: TempPath, shard: i32) -> Result<Self> {
        let file = tmp
            .create_file()
            .map_err(|e| BundleError::io(tmp.path(), e))?;
        Ok(Self {
            shard,
            tmp,
            out: BufWriter::with_capacity(unbound_io::BUFFER_SIZE, InPieces(file)),
            size: 0,
        })
    }

    /// The shard number.
    pub fn shard(&self) -> i32 {
        self.shard
    }

    /// Bytes written so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Appends one entry of `dtype` and `shape` whose bytes `fill` writes (in the stored
    /// layout of the dtype); returns its index entry, checksum included.
    pub fn append_with<E: From<BundleError>>(
        &mut self,
        dtype: i32,
        shape: &[i64],
        fill: impl FnOnce(&mut EntrySink<'_>) -> std::result::Result<(), E>,
    ) -> std::result::Result<BundleEntryProto, E> {
        let offset = self.size;
        let mut sink = EntrySink {
            writer: self,
            crc: 0,
            size: 0,
        };
        fill(&mut sink)?;
        let (c, size) = (sink.crc, sink.size);
        self.size += size;
        Ok(self.entry_at(dtype, shape, offset, size, c)?)
    }

    /// Appends a tensor held in memory (any dtype), with the checksum TensorFlow computes
    /// for its layout (for strings and variants not that of the raw bytes).
    pub fn append_tensor(&mut self, tensor: &Tensor) -> Result<BundleEntryProto> {
        tensor
            .check_consistent()
            .map_err(|e| BundleError::Invalid(e.0))?;
        let mut buf = Vec::new();
        let io = |e| BundleError::io(self.tmp.path(), e);
        let (size, c) = match &tensor.data {
            TensorData::Raw(b) => {
                buf.extend_from_slice(b);
                (b.len() as u64, crc::crc32c(b))
            }
            TensorData::Strings(v) => encode_strings(v, &mut buf).map_err(io)?,
            TensorData::Variants(v) => encode_variants(v, &mut buf).map_err(io)?,
        };
        self.out.write_all(&buf).map_err(io)?;
        let offset = self.size;
        self.size += size;
        self.entry_at(tensor.dtype, &tensor.shape, offset, size, c)
    }

    /// Flushes and syncs the shard; it keeps its temporary name until persisted.
    pub fn finish(self) -> Result<FinishedShard> {
        let file = self
            .out
            .into_inner()
            .map_err(|e| BundleError::io(self.tmp.path(), e.into_error()))?
            .into_inner();
        file.sync_all()
            .map_err(|e| BundleError::io(self.tmp.path(), e))?;
        Ok(FinishedShard(self.tmp))
    }
}

/// Writes `PREFIX.index` atomically: the header (`num_shards`, little-endian, version 1) and
/// `entries` in key order, byte for byte as TensorFlow's `BundleWriter` writes them.
pub fn write_index(
    prefix: &Path,
    num_shards: i32,
    entries: &BTreeMap<Vec<u8>, BundleEntryProto>,
) -> Result<()> {
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
    for (key, entry) in entries {
        if key.is_empty() {
            return Err(BundleError::Invalid("an entry with the empty key".into()));
        }
        table.add(key, &entry.encode_to_vec());
    }
    let bytes = table.finish();
    let index = index_path(prefix);
    unbound_io::write_atomically(&index, |w| {
        w.write_all(&bytes).map_err(|e| BundleError::io(&index, e))
    })
}

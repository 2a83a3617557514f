//! The Merger: rebuilds a message from its chunks and `ChunkedMessage` metadata with the exact
//! semantics of TensorFlow's `tensorflow::tools::proto_splitter::Merger`:
//!
//! - a `ChunkedMessage` with a `chunk_index` first merges that chunk into its message; without
//!   one (a "blank" message) it starts from what is there;
//! - its chunked fields are applied in [`sort_for_merge`] order;
//! - an empty field tag merges the chunk into the current message (nested metadata under it is
//!   ignored, as TensorFlow does);
//! - otherwise the tags are walked, creating missing repeated elements and map entries; a
//!   message-typed last field recurses with the nested `ChunkedMessage`; a string or bytes last
//!   field is replaced by the chunk; a numeric, bool or enum last field is parsed from the
//!   chunk's text.
//!
//! Values of string and bytes fields set from a file's chunks stay lazy references to their
//! records ([`Payload::Record`]) until written, so a multi-gigabyte tensor is streamed from the
//! `.cpb` to the output without being held in memory.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use prost::Message as _;
use prost_reflect::{Kind, MessageDescriptor};
use unbound_proto::tensorflow::proto_splitter::{
    chunk_info::Type as InfoType, ChunkInfo, ChunkMetadata, ChunkedField, ChunkedMessage,
};
use unbound_records::RecordReader;

use crate::ahead::{message_types, Ahead, Claim};
use crate::cache::ChunkCache;
use crate::error::{ChunkedError, Result};
use crate::fault::ChunkFault;
pub use crate::layout::MAX_NESTING;
use crate::layout::{check_layout, size_matches};
use crate::lazy::{release_if_compressed, KeptRecordFile, RecordFile};
use crate::streamed::{parse_streamed, StreamTap, StreamedChunk, STREAM_AT};
use crate::tags::{encode_key, sort_for_merge, steps, Selector, Step};
use unbound_wire::navigate::message_type;
use unbound_wire::scalar::parse_text_scalar;
use unbound_wire::{Payload, RecordRef, RecordSource, WireError, WireMessage};

/// Where the Merger takes chunks from.
pub trait ChunkSource {
    /// A name for errors: the file, or a description of the in-memory source.
    fn name(&self) -> &str;
    /// Number of chunks.
    fn len(&self) -> usize;
    /// Whether there are no chunks.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The bytes of chunk `index` (their size is checked by [`ChunkSource::check_len`]).
    fn bytes(&self, index: u64) -> Result<Bytes>;
    /// Checks that chunk `index`, as read, has `len` bytes, the size its metadata declares
    /// (the [`Merger`] calls it after using the bytes, so a chunk that does not even parse
    /// is reported as such).
    fn check_len(&self, index: u64, len: u64) -> Result<()> {
        let _ = (index, len);
        Ok(())
    }
    /// The size chunk `index` declares, when known before reading it.
    fn declared_size(&self, index: u64) -> Option<u64> {
        let _ = index;
        None
    }
    /// Chunk `index` as a value payload; sources backed by a file may return it lazily.
    fn payload(&self, index: u64) -> Result<Payload> {
        self.bytes(index).map(Payload::Inline)
    }
    /// Chunk `index` parsed as a message of type `desc` while it streams from its file, when
    /// the source would rather not decode it whole (a chunk of hundreds of megabytes: its
    /// large values stay in the file, `streamed.rs`); `None` to have its bytes read.
    fn streamed(&self, index: u64, desc: &MessageDescriptor) -> Option<Result<WireMessage>> {
        let _ = (index, desc);
        None
    }
    /// Chunk `index` as a message already built in memory, when the source holds it so and
    /// its fields are those parsing its bytes gives, in that order (a split not yet written,
    /// say): the [`Merger`] then copies its fields instead of parsing the bytes again.
    fn built(&self, index: u64) -> Option<&WireMessage> {
        let _ = index;
        None
    }
}

/// Chunks held in memory (TensorFlow's `Merger::Merge`).
pub struct MemoryChunks {
    name: String,
    chunks: Vec<Bytes>,
}

impl MemoryChunks {
    /// Chunks in index order.
    pub fn new(name: impl Into<String>, chunks: Vec<Bytes>) -> Self {
        Self {
            name: name.into(),
            chunks,
        }
    }
}

impl ChunkSource for MemoryChunks {
    fn name(&self) -> &str {
        &self.name
    }
    fn len(&self) -> usize {
        self.chunks.len()
    }
    fn declared_size(&self, index: u64) -> Option<u64> {
        let i = usize::try_from(index).ok()?;
        self.chunks.get(i).map(|c| c.len() as u64)
    }
    fn bytes(&self, index: u64) -> Result<Bytes> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.chunks.get(i))
            .cloned()
            .ok_or_else(|| out_of_range(&self.name, index, self.chunks.len()))
    }
}

/// The chunks of a `.cpb` file, located by the `ChunkInfo` list of its metadata.
///
/// `FileChunks` is `Sync`: several threads may merge from (and check) the same file at once.
/// With [`FileChunks::keep_decoded`], the chunks they read whole are decoded once and shared
/// ([`ChunkCache`]).
pub struct FileChunks {
    reader: Arc<RecordReader>,
    /// The same file as the source of lazy payloads, made once and shared by all of them.
    source: Arc<Box<dyn RecordSource>>,
    infos: Vec<ChunkInfo>,
    lazy: bool,
    /// The decoded chunks kept for every reader, when [`FileChunks::keep_decoded`] was called
    /// (shared with `source`, so lazy values of kept chunks read them too).
    cache: Option<Arc<ChunkCache>>,
    /// The kept chunks by record position (each is the only record of its Riegeli chunk).
    kept_at: Arc<HashMap<u64, u64>>,
    /// What sees the bytes of the chunks merges stream, if anything ([`StreamTap`]).
    tap: Option<Arc<dyn StreamTap>>,
    /// The chunks streamed ahead of the merge, if [`FileChunks::stream_ahead`] was called.
    ahead: Option<Ahead>,
}

impl FileChunks {
    /// Opens `path` and reads its metadata (the last record).
    pub fn open(path: &std::path::Path) -> Result<(Self, ChunkMetadata)> {
        let reader = Arc::new(RecordReader::open(path)?);
        Self::from_reader(reader)
    }

    /// Uses an open reader and reads its metadata, which must fit the file's records
    /// ([`crate::check_layout`]: each `ChunkInfo` names, in order, exactly the next record
    /// before the metadata; the tree's indices are in range and its tags decode). A metadata
    /// that does not is refused with [`ChunkedError::Layout`] listing every fault. Each
    /// chunk's size is checked against its record when the chunk is read.
    pub fn from_reader(reader: Arc<RecordReader>) -> Result<(Self, ChunkMetadata)> {
        let (metadata_position, metadata) = read_metadata_at(&reader)?;
        let faults = check_layout(&reader, &metadata, metadata_position)?;
        if !faults.is_empty() {
            return Err(ChunkedError::Layout {
                source_name: reader.name().to_string(),
                faults,
            });
        }
        let infos = metadata.chunks.clone();
        Ok((
            Self {
                source: Arc::new(Box::new(RecordFile(Arc::clone(&reader)))),
                reader,
                infos,
                lazy: true,
                cache: None,
                kept_at: Arc::new(HashMap::new()),
                tap: None,
                ahead: None,
            },
            metadata,
        ))
    }

    /// The indices of the chunks whose `ChunkInfo` type is MESSAGE: the chunks a merge reads
    /// whole and keeps slices of in the message it builds (BYTES chunks become lazy record
    /// references).
    pub fn message_chunks(&self) -> Vec<u64> {
        (0u64..)
            .zip(&self.infos)
            .filter(|(_, info)| info.r#type == InfoType::Message as i32)
            .map(|(index, _)| index)
            .collect()
    }

    /// Keeps the decoded bytes of the chunks in `indices` once read, for every later reader
    /// on any thread ([`ChunkCache`]): each is then decompressed at most once however many
    /// merges, checks ([`crate::check_chunks_deferring`]) and hashes read it, lazy values of
    /// BYTES chunks included (the merged message's lazy records read them through the cache).
    /// Meant for chunks a merge holds anyway ([`FileChunks::message_chunks`]), so keeping
    /// them costs nothing, or for every chunk of a file small enough to hold decoded
    /// ([`FileChunks::keep_decoded_up_to`]). A compressed chunk's file pages are given back
    /// to the kernel once it is decoded: from then on its decoded bytes are what is read.
    ///
    /// Only a chunk that is the only record of its Riegeli chunk is kept (TensorFlow writes
    /// every chunk so; unbound packs small records together, and those decode together as
    /// before). Refused (returns `false`, nothing kept, every read decodes as before) when a
    /// chunk cannot be located, or when the decoded sizes the kept chunks' Riegeli headers
    /// declare, added up, pass the reader's [`unbound_records::DecodeLimits`]: decoding them
    /// all whole would then fail (or be refused) at a point that depends on which thread
    /// reads first, where without the cache it fails at the same chunk every time.
    pub fn keep_decoded(&mut self, indices: impl IntoIterator<Item = u64>) -> bool {
        self.keep_decoded_up_to(indices, u64::MAX)
    }

    /// [`FileChunks::keep_decoded`], also refused when the kept chunks would hold more than
    /// `max_total` decoded bytes in all: a caller's memory bound.
    pub fn keep_decoded_up_to(
        &mut self,
        indices: impl IntoIterator<Item = u64>,
        max_total: u64,
    ) -> bool {
        let limits = self.reader.decode_limits();
        let mut kept_total = 0u64;
        let budget = limits.budget;
        let mut total = self.reader.decoded_bytes_held();
        let mut kept_at = HashMap::new();
        for index in indices {
            let Ok(info) = self.info(index) else {
                return false;
            };
            let Ok(chunk) = self.reader.chunk_of(info.offset) else {
                return false;
            };
            if chunk.begin != info.offset || chunk.num_records != 1 {
                // Packed with other records: decoded with them, through the reader's cache
                // of its last chunk, as before.
                continue;
            }
            if chunk.decoded_data_size >= STREAM_AT {
                // Streamed whenever it is read, never held (`streamed.rs`), stored or
                // compressed: a stored record is a slice of the file only inside one 64 KiB
                // block, and is copied out whole when it crosses a block header.
                continue;
            }
            if kept_at.insert(info.offset, index).is_some() {
                continue;
            }
            let need = chunk.decoded_data_size;
            total = total.saturating_add(need);
            kept_total = kept_total.saturating_add(need);
            if need > limits.max_chunk || total > budget || kept_total > max_total {
                return false;
            }
        }
        let cache = Arc::new(ChunkCache::new(self.infos.len(), kept_at.values().copied()));
        let kept_at = Arc::new(kept_at);
        self.source = Arc::new(Box::new(KeptRecordFile {
            file: RecordFile(Arc::clone(&self.reader)),
            cache: Arc::clone(&cache),
            kept_at: Arc::clone(&kept_at),
        }));
        self.cache = Some(cache);
        self.kept_at = kept_at;
        true
    }

    /// Chunk `index` as a lazy payload for a reader that reads it once, later, and has no use
    /// for it beyond (`show` scanning a graph a chunk at a time): nothing of the chunk is read
    /// now (where [`ChunkSource::payload`] checks its record at once, which maps the whole
    /// chunk); when it is read, its record is checked as every read checks it, its size
    /// against the declared one, and its compressed pages are given back to the kernel, so a
    /// pass over the chunks holds one or two of them at a time, not the file.
    pub fn read_later(&self, index: u64) -> Result<Payload> {
        let info = self.info(index)?;
        Ok(Payload::Record(RecordRef {
            reader: Arc::new(Box::new(crate::lazy::ReadOnce {
                reader: Arc::clone(&self.reader),
                index,
                info: *info,
            })),
            position: info.offset,
            len: info.size,
        }))
    }

    /// The cache of decoded chunks, when [`FileChunks::keep_decoded`] set one up.
    pub fn cache(&self) -> Option<&ChunkCache> {
        self.cache.as_deref()
    }

    /// Lets `tap` see the bytes of every chunk a merge through these chunks streams.
    pub fn set_stream_tap(&mut self, tap: Arc<dyn StreamTap>) {
        self.tap = Some(tap);
    }

    /// Streams the chunks a merge of `metadata` into a message of type `root` will stream
    /// ([`FileChunks::streams_chunk_at`]) on a second thread, ahead of the merge (see
    /// `ahead.rs`); nothing when there are fewer than two. Call it once the chunks are set up
    /// ([`FileChunks::keep_decoded`], [`FileChunks::set_stream_tap`]).
    pub fn stream_ahead(&mut self, root: &MessageDescriptor, metadata: &ChunkedMessage) {
        let streamed: Vec<_> = message_types(root, metadata)
            .into_iter()
            .filter(|(index, _)| {
                self.info(*index)
                    .is_ok_and(|info| self.streams_chunk_at(info.offset))
            })
            .collect();
        if streamed.len() < 2 {
            return;
        }
        let starts: HashMap<u64, u64> = streamed
            .iter()
            .map(|(index, _)| (*index, self.stream_start(*index)))
            .collect();
        let stream = ChunkStreamer {
            reader: Arc::clone(&self.reader),
            source: Arc::clone(&self.source),
            tap: self.tap.clone(),
        };
        let infos = self.infos.clone();
        self.ahead = Ahead::start(streamed, move |index, desc| {
            let info = usize::try_from(index)
                .ok()
                .and_then(|i| infos.get(i))
                .ok_or_else(|| out_of_range(stream.reader.name(), index, infos.len()))?;
            let start = starts.get(&index).copied().unwrap_or(0);
            stream.stream_at(index, info, desc, start)
        });
    }

    /// Streams the record at `position` whole (the only record of its chunk) through the
    /// tap, if any: a chunk of bytes is announced as one value the merge leaves in the file
    /// ([`crate::TapSink::lazy_value`]); the sink is finished only when every byte came.
    /// Whether it streamed whole is what the reader remembers
    /// ([`RecordReader::decompressed_whole`]).
    pub(crate) fn stream_whole(&self, position: u64) {
        let Some(index) = self.infos.iter().position(|i| i.offset == position) else {
            return;
        };
        let Ok(len) = self.reader.record_len_at(position) else {
            return;
        };
        let info = &self.infos[index];
        let chunk = StreamedChunk {
            index: index as u64,
            position,
            len,
            start: self.stream_start(index as u64),
        };
        let Some(mut sink) = self.tap.as_ref().and_then(|tap| tap.begin(chunk)) else {
            let _ = self.reader.copy_record_to(position, &mut std::io::sink());
            return;
        };
        if info.r#type == InfoType::Bytes as i32 {
            sink.lazy_value(0, len);
        }
        let copied = self
            .reader
            .copy_record_to(position, &mut SinkWriter(sink.as_mut()));
        if copied.is_ok_and(|n| n == len) {
            sink.finish();
        }
    }

    /// [`StreamedChunk::start`] of chunk `index`.
    fn stream_start(&self, index: u64) -> u64 {
        (0..index)
            .filter_map(|i| self.info(i).ok())
            .filter(|info| self.streams_chunk_at(info.offset))
            .fold(0u64, |sum, info| sum.saturating_add(info.size))
    }

    /// Whether a merge streams the record at `position` as a message chunk (parsed as it is
    /// decoded, its large values left in the file) rather than decoding it whole: a chunk of
    /// that one record, not kept, declaring 64 MiB or more. Stored chunks too: a
    /// record crossing a block header is copied out whole to be read in place (the 600 MB
    /// stored chunks of a model of constants were held by `show`).
    pub fn streams_chunk_at(&self, position: u64) -> bool {
        if !self.lazy || self.kept_chunk_at(position).is_some() {
            return false;
        }
        self.reader.chunk_of(position).is_ok_and(|chunk| {
            chunk.begin == position
                && chunk.num_records == 1
                && chunk.decoded_data_size >= STREAM_AT
        })
    }

    /// The index of the kept chunk whose record is at `position`, if any.
    pub fn kept_chunk_at(&self, position: u64) -> Option<u64> {
        self.kept_at.get(&position).copied()
    }

    /// The `ChunkInfo` list of the metadata.
    pub fn infos(&self) -> &[ChunkInfo] {
        &self.infos
    }

    /// Whether string and bytes values stay lazy record references (the default) or are read
    /// at merge time.
    pub fn set_lazy(&mut self, lazy: bool) {
        self.lazy = lazy;
    }

    /// The underlying reader.
    pub fn reader(&self) -> &Arc<RecordReader> {
        &self.reader
    }

    /// The sum of the sizes the `ChunkInfo`s declare (each is checked against its record
    /// when read): what merging every chunk once reads. A caller writing a `.pb` (at most
    /// 2 GiB) can refuse a file declaring more before reading anything; the
    /// [`Merger::set_max_chunk_bytes`] limit enforces it during the merge.
    pub fn declared_bytes(&self) -> u64 {
        self.infos
            .iter()
            .fold(0u64, |sum, info| sum.saturating_add(info.size))
    }

    fn info(&self, index: u64) -> Result<&ChunkInfo> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.infos.get(i))
            .ok_or_else(|| out_of_range(self.reader.name(), index, self.infos.len()))
    }

    /// Refuses a record whose size is not the chunk's declared size.
    fn check_size(&self, index: u64, info: &ChunkInfo, actual: u64) -> Result<()> {
        size_matches(&self.reader, index, info, actual)
    }
}

impl ChunkSource for FileChunks {
    fn name(&self) -> &str {
        self.reader.name()
    }
    fn len(&self) -> usize {
        self.infos.len()
    }
    fn declared_size(&self, index: u64) -> Option<u64> {
        self.info(index).ok().map(|info| info.size)
    }
    fn check_len(&self, index: u64, len: u64) -> Result<()> {
        self.check_size(index, self.info(index)?, len)
    }
    fn bytes(&self, index: u64) -> Result<Bytes> {
        match &self.cache {
            Some(cache) if cache.is_cached(index) => cache.get_or_decode(index, || {
                let bytes = self.read_bytes(index)?;
                if let Ok(info) = self.info(index) {
                    release_if_compressed(&self.reader, info.offset);
                }
                Ok(bytes)
            }),
            Some(_) | None => self.read_bytes(index),
        }
    }
    fn streamed(&self, index: u64, desc: &MessageDescriptor) -> Option<Result<WireMessage>> {
        let info = self.info(index).ok()?;
        if !self.streams_chunk_at(info.offset) {
            return None;
        }
        if let Some(Claim::Streamed(streamed)) = self.ahead.as_ref().map(|a| a.claim(index, desc)) {
            return Some(streamed);
        }
        let stream = ChunkStreamer {
            reader: Arc::clone(&self.reader),
            source: Arc::clone(&self.source),
            tap: self.tap.clone(),
        };
        let start = self.tap.as_ref().map_or(0, |_| self.stream_start(index));
        Some(stream.stream_at(index, info, desc, start))
    }
    fn payload(&self, index: u64) -> Result<Payload> {
        let info = self.info(index)?;
        if !self.lazy {
            let bytes = self.bytes(index)?;
            self.check_size(index, info, bytes.len() as u64)?;
            return Ok(Payload::Inline(bytes));
        }
        let len = self.reader.record_len_at(info.offset)?;
        self.check_size(index, info, len)?;
        Ok(Payload::Record(RecordRef {
            reader: Arc::clone(&self.source),
            position: info.offset,
            len,
        }))
    }
}

/// A tap's sink as a plain writer.
struct SinkWriter<'a>(&'a mut dyn crate::TapSink);

impl std::io::Write for SinkWriter<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.write(data)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// What streaming a chunk needs of a [`FileChunks`], for either thread (`ahead.rs`).
struct ChunkStreamer {
    reader: Arc<RecordReader>,
    source: Arc<Box<dyn RecordSource>>,
    tap: Option<Arc<dyn StreamTap>>,
}

impl ChunkStreamer {
    /// Streams chunk `index`, described by `info`, as a message of type `desc`; `start` is
    /// its [`StreamedChunk::start`].
    fn stream_at(
        &self,
        index: u64,
        info: &ChunkInfo,
        desc: &MessageDescriptor,
        start: u64,
    ) -> Result<WireMessage> {
        let name = format!("{}: chunk {index}", self.reader.name());
        let len = self.reader.record_len_at(info.offset)?;
        size_matches(&self.reader, index, info, len)?;
        let budget = self.reader.decode_limits().budget;
        let chunk = StreamedChunk {
            index,
            position: info.offset,
            len,
            start,
        };
        let tap = self.tap.as_ref().and_then(|tap| tap.begin(chunk));
        parse_streamed(&self.source, info.offset, len, desc, budget, &name, tap)
    }
}

impl FileChunks {
    /// Chunk `index` read (and decoded) from the file.
    fn read_bytes(&self, index: u64) -> Result<Bytes> {
        let info = self.info(index)?;
        let (position, bytes) = self.reader.read_record_at(info.offset)?;
        if position != info.offset {
            // `check_layout` makes this impossible; kept so no other record is ever taken.
            return Err(ChunkedError::Layout {
                source_name: self.reader.name().to_string(),
                faults: vec![ChunkFault::NoRecord {
                    chunk: usize::try_from(index).unwrap_or(usize::MAX),
                    position: info.offset,
                }],
            });
        }
        Ok(bytes)
    }
}

/// Reads the `ChunkMetadata` of a `.cpb`: its last record.
pub fn read_metadata(reader: &RecordReader) -> Result<ChunkMetadata> {
    read_metadata_at(reader).map(|(_, m)| m)
}

/// [`read_metadata`], with the metadata record's position.
pub fn read_metadata_at(reader: &RecordReader) -> Result<(u64, ChunkMetadata)> {
    let (position, bytes) = reader.last_record()?;
    ChunkMetadata::decode(bytes)
        .map(|m| (position, m))
        .map_err(|e| {
            ChunkedError::metadata(
                reader.name(),
                format!("the last record (position {position}) is not a ChunkMetadata: {e}"),
            )
        })
}

fn out_of_range(name: &str, index: u64, len: usize) -> ChunkedError {
    ChunkedError::metadata(
        name,
        format!("chunk index {index} is out of range for {len} chunks"),
    )
}

/// Rebuilds messages from a [`ChunkSource`].
pub struct Merger<'a> {
    source: &'a dyn ChunkSource,
    max_chunk_bytes: u64,
    read: std::cell::Cell<u64>,
}

impl<'a> Merger<'a> {
    /// A merger over `source`.
    pub fn new(source: &'a dyn ChunkSource) -> Self {
        Self {
            source,
            max_chunk_bytes: u64::MAX,
            read: std::cell::Cell::new(0),
        }
    }

    /// Refuses ([`ChunkedError::TooLarge`]) to read chunks once their declared sizes add up
    /// to more than `limit` bytes, checked before each chunk is read: a merge into a `.pb`
    /// passes 2 GiB, so a file whose chunks declare more fails before they are decoded.
    /// Unlimited by default.
    pub fn set_max_chunk_bytes(&mut self, limit: u64) {
        self.max_chunk_bytes = limit;
    }

    /// Counts chunk `index` against the limit before it is read.
    fn count(&self, index: u64) -> Result<()> {
        let size = self.source.declared_size(index).unwrap_or(0);
        let total = self.read.get().saturating_add(size);
        if total > self.max_chunk_bytes {
            return Err(ChunkedError::TooLarge {
                source_name: self.source.name().to_string(),
                chunk: index,
                total,
                limit: self.max_chunk_bytes,
            });
        }
        self.read.set(total);
        Ok(())
    }

    /// [`ChunkSource::bytes`], counted.
    fn chunk_bytes(&self, index: u64) -> Result<Bytes> {
        self.count(index)?;
        self.source.bytes(index)
    }

    /// [`ChunkSource::payload`], counted.
    fn chunk_payload(&self, index: u64) -> Result<Payload> {
        self.count(index)?;
        self.source.payload(index)
    }

    /// Builds the message of type `desc` that `metadata` describes.
    pub fn merge(
        &self,
        desc: &MessageDescriptor,
        metadata: &ChunkedMessage,
    ) -> Result<WireMessage> {
        let mut message = WireMessage::new(Some(desc.clone()));
        let name = self.source.name();
        self.read_fields(&mut message, desc, metadata, 0)
            .map_err(|e| match e {
                // Navigation errors know the schema but not the file: name it.
                ChunkedError::Schema { message, fault }
                | ChunkedError::Message(WireError::Schema { message, fault })
                    if !fault.contains(name) =>
                {
                    ChunkedError::Schema {
                        message,
                        fault: format!("{fault} (in {name})"),
                    }
                }
                e => e,
            })?;
        Ok(message)
    }

    /// `ReadFields`: merges the message's own chunk, then its chunked fields in merge order.
    fn read_fields(
        &self,
        target: &mut WireMessage,
        desc: &MessageDescriptor,
        cm: &ChunkedMessage,
        depth: usize,
    ) -> Result<()> {
        if let Some(index) = cm.chunk_index {
            self.merge_chunk(target, desc, index)?;
        }
        let ordered = sort_for_merge(&cm.chunked_fields)
            .map_err(|fault| ChunkedError::metadata(self.source.name(), fault.to_string()))?;
        for cf in ordered {
            self.process_field(target, desc, cf, depth)?;
        }
        Ok(())
    }

    /// Protobuf `MergeFromString` of chunk `index` into `target`.
    fn merge_chunk(
        &self,
        target: &mut WireMessage,
        desc: &MessageDescriptor,
        index: u64,
    ) -> Result<()> {
        if let Some(built) = self.source.built(index) {
            self.count(index)?;
            target.fields.extend(built.fields.iter().cloned());
            return Ok(());
        }
        if let Some(streamed) = self.source.streamed(index, desc) {
            self.count(index)?;
            target.fields.extend(streamed?.fields);
            return Ok(());
        }
        let bytes = self.chunk_bytes(index)?;
        target
            .append_bytes(&bytes)
            .map_err(|error| ChunkedError::Wire {
                source_name: format!(
                    "{}: chunk {index} (merged into {})",
                    self.source.name(),
                    desc.full_name()
                ),
                error,
            })?;
        self.source.check_len(index, bytes.len() as u64)
    }

    /// `ProcessField`: applies one chunked field to `target`.
    fn process_field(
        &self,
        target: &mut WireMessage,
        desc: &MessageDescriptor,
        cf: &ChunkedField,
        depth: usize,
    ) -> Result<()> {
        let empty = ChunkedMessage::default();
        let child = cf.message.as_ref().unwrap_or(&empty);
        // TensorFlow reads the chunk named by the nested message even when it has no index
        // (it then reads chunk 0); only scalar fields use it in that case.
        let chunk_index = child.chunk_index.unwrap_or(0);
        if cf.field_tag.is_empty() {
            return self.merge_chunk(target, desc, chunk_index);
        }
        let path = steps(&cf.field_tag).map_err(|fault| {
            ChunkedError::metadata(self.source.name(), format!("{fault} in {:?}", cf.field_tag))
        })?;
        self.apply(target, desc, &path, child, chunk_index, depth)
    }

    /// Walks `path` from `target` and applies the chunk at its end.
    fn apply(
        &self,
        target: &mut WireMessage,
        desc: &MessageDescriptor,
        path: &[Step],
        child: &ChunkedMessage,
        chunk_index: u64,
        depth: usize,
    ) -> Result<()> {
        if depth > MAX_NESTING {
            return Err(ChunkedError::TooDeep {
                source_name: self.source.name().to_string(),
                limit: MAX_NESTING,
            });
        }
        let (step, rest) = path
            .split_first()
            .expect("apply is called with a non-empty path");
        let fd = desc.get_field(step.field).ok_or_else(|| {
            self.schema(
                desc,
                format!(
                    "field number {} not found (chunk {chunk_index})",
                    step.field
                ),
            )
        })?;
        let last = rest.is_empty();
        match (&step.selector, fd.is_map(), fd.is_list()) {
            (Some(Selector::Key(key)), true, _) => {
                let entry_desc = message_type(&fd)?;
                let key_kind = entry_desc.map_entry_key_field().kind();
                let key_wire = encode_key(&key_kind, key).ok_or_else(|| {
                    self.schema(
                        desc,
                        format!("map key {key:?} does not fit the key type of {}", fd.name()),
                    )
                })?;
                let entry = target.map_entry_mut(&fd, &key_wire)?;
                let value_fd = entry_desc.map_entry_value_field();
                let value_step = Step {
                    field: value_fd.number(),
                    selector: None,
                };
                let mut value_path = vec![value_step];
                value_path.extend_from_slice(rest);
                self.apply(
                    entry,
                    &entry_desc,
                    &value_path,
                    child,
                    chunk_index,
                    depth + 1,
                )
            }
            (_, true, _) => Err(self.schema(
                desc,
                format!("map field {} needs a map key in its tag path", fd.name()),
            )),
            (Some(Selector::Index(index)), false, true) => match fd.kind() {
                Kind::Message(elem_desc) => {
                    let element = target.repeated_message_mut(&fd, *index)?;
                    self.descend_or_read(element, &elem_desc, rest, child, chunk_index, depth + 1)
                }
                kind => {
                    let value = self.trailing_scalar(desc, &kind, &fd, last, chunk_index)?;
                    Ok(target.set_repeated_scalar(&fd, *index, value)?)
                }
            },
            (None, false, true) => {
                // A trailing repeated field without an index (TensorFlow leaves this undefined):
                // the chunk becomes a new last element.
                if !last {
                    return Err(self.schema(
                        desc,
                        format!(
                            "repeated field {} needs an index in its tag path",
                            fd.name()
                        ),
                    ));
                }
                match fd.kind() {
                    Kind::Message(elem_desc) => {
                        let element = target.push_message(&fd)?;
                        self.read_fields(element, &elem_desc, child, depth + 1)
                    }
                    kind => {
                        let value = self.scalar_value(&kind, &fd, chunk_index)?;
                        target.fields.push(unbound_wire::WireField {
                            number: fd.number(),
                            value,
                        });
                        Ok(())
                    }
                }
            }
            (Some(Selector::Key(_)), false, _) => Err(self.schema(
                desc,
                format!("field {} is not a map but its tag has a map key", fd.name()),
            )),
            (Some(Selector::Index(_)), false, false) => Err(self.schema(
                desc,
                format!(
                    "field {} is not repeated but its tag has an index",
                    fd.name()
                ),
            )),
            (None, false, false) => match fd.kind() {
                Kind::Message(sub_desc) => {
                    let sub = target.singular_message_mut(&fd)?;
                    self.descend_or_read(sub, &sub_desc, rest, child, chunk_index, depth + 1)
                }
                kind => {
                    let value = self.trailing_scalar(desc, &kind, &fd, last, chunk_index)?;
                    target.set_scalar(&fd, value);
                    Ok(())
                }
            },
        }
    }

    /// Continues along `rest`, or, at the end of the path, merges `child` into `message`.
    fn descend_or_read(
        &self,
        message: &mut WireMessage,
        desc: &MessageDescriptor,
        rest: &[Step],
        child: &ChunkedMessage,
        chunk_index: u64,
        depth: usize,
    ) -> Result<()> {
        if rest.is_empty() {
            self.read_fields(message, desc, child, depth)
        } else {
            self.apply(message, desc, rest, child, chunk_index, depth)
        }
    }

    /// The value for scalar field `fd`, which must end the tag path (a scalar holds no fields).
    fn trailing_scalar(
        &self,
        desc: &MessageDescriptor,
        kind: &Kind,
        fd: &prost_reflect::FieldDescriptor,
        last: bool,
        chunk_index: u64,
    ) -> Result<unbound_wire::WireValue> {
        if !last {
            return Err(self.schema(
                desc,
                format!("scalar field {} cannot hold more fields", fd.name()),
            ));
        }
        self.scalar_value(kind, fd, chunk_index)
    }

    /// The value a BYTES chunk gives a scalar field: the raw bytes for string and bytes fields,
    /// parsed text otherwise.
    fn scalar_value(
        &self,
        kind: &Kind,
        fd: &prost_reflect::FieldDescriptor,
        chunk_index: u64,
    ) -> Result<unbound_wire::WireValue> {
        if matches!(kind, Kind::String | Kind::Bytes) {
            return Ok(unbound_wire::WireValue::Bytes(
                self.chunk_payload(chunk_index)?,
            ));
        }
        let text = self.chunk_bytes(chunk_index)?;
        let value =
            parse_text_scalar(kind, &text).map_err(|expected| ChunkedError::TextScalar {
                source_name: self.source.name().to_string(),
                chunk: chunk_index,
                field: fd.full_name().to_string(),
                expected: expected.to_string(),
                value: String::from_utf8_lossy(&text[..text.len().min(40)]).into_owned(),
            })?;
        self.source.check_len(chunk_index, text.len() as u64)?;
        Ok(value)
    }

    fn schema(&self, desc: &MessageDescriptor, fault: String) -> ChunkedError {
        ChunkedError::Schema {
            message: desc.full_name().to_string(),
            fault: format!("{fault} (in {})", self.source.name()),
        }
    }
}

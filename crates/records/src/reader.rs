//! [`RecordReader`]: random access to the records of a Riegeli/records file
//! by numeric position, over a memory-mapped (or owned) copy of the file.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::chunk_decoder::{self, DecodedChunk};
use crate::chunk_header::ChunkType;
use crate::chunk_reader::{Chunk, FileChunks, Which};
use crate::compression::{self, CompressionType};
use crate::error::{DecodeLimitKind, RecordsError};
use crate::limits::{DecodeLimits, Held};
use crate::simple_chunk::SimpleLayout;

/// The fixed first 64 bytes of every Riegeli/records file: the block header
/// at 0 and the file signature chunk header.
pub(crate) const SIGNATURE: [u8; 64] = [
    0x83, 0xaf, 0x70, 0xd1, 0x0d, 0x88, 0x4a, 0x3f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, //
    0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x91, 0xba, 0xc2, 0x3c, 0x92, 0x87, 0xe1,
    0xa9, //
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe1, 0x9f, 0x13, 0xc0, 0xe9, 0xb1, 0xc3,
    0x72, //
    0x73, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, //
];

/// How many chunk beginnings a [`Remembered`] set holds before starting over.
const MAX_VERIFIED: usize = 1 << 20;

/// Chunk beginnings a reader has learnt something of (their data hash checked, their record
/// streamed whole), at most [`MAX_VERIFIED`] of them: past that it forgets and learns again.
#[derive(Default)]
struct Remembered(Mutex<HashSet<u64>>);

impl Remembered {
    /// Whether the chunk at `begin` is remembered.
    fn contains(&self, begin: u64) -> bool {
        self.0.lock().is_ok_and(|set| set.contains(&begin))
    }

    /// Remembers the chunk at `begin`.
    fn insert(&self, begin: u64) {
        if let Ok(mut set) = self.0.lock() {
            if set.len() >= MAX_VERIFIED {
                set.clear();
            }
            set.insert(begin);
        }
    }
}

/// [`RecordReader::copy_record_to`] of one record of a compressed chunk of several records
/// decodes the chunk whole (and caches it, for the next records) when it declares at most this
/// many bytes; a larger chunk is decoded as a stream up to the end of the record instead.
const WHOLE_DECODE_FOR_COPY: u64 = 64 << 20;

/// One chunk header as seen by `inspect`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkSummary {
    /// File position where the chunk begins; its records have numeric
    /// positions `begin, begin + 1, ...`.
    pub begin: u64,
    /// File position where the next chunk begins.
    pub end: u64,
    /// The chunk type.
    pub chunk_type: ChunkType,
    /// Number of records in the chunk.
    pub num_records: u64,
    /// Size of the chunk data as stored (excluding block headers).
    pub data_size: u64,
    /// Sum of the record sizes after decoding.
    pub decoded_data_size: u64,
    /// The compression type byte of simple, transposed and metadata chunks,
    /// when it is a known one; `None` for other chunk types.
    pub compression: Option<CompressionType>,
}

/// Reads records from a whole Riegeli/records file held in memory (mapped or
/// owned), by numeric record position.
///
/// All methods take `&self`; the reader is `Send + Sync`. The most recently
/// decoded chunk is cached so that reading its records one by one decodes it
/// once, and each chunk's data hash is verified once.
///
/// Decoding a chunk whole (to hand out its records as [`Bytes`]) is bounded by
/// [`DecodeLimits`]: a chunk declaring more decoded data than they allow is refused with
/// [`RecordsError::DecodeLimit`] before anything is allocated for it.
pub struct RecordReader {
    file: FileChunks,
    cache: Mutex<Option<(u64, Arc<DecodedChunk>)>>,
    verified: Remembered,
    /// Chunks of one record already decompressed whole without fault (data hash, framing,
    /// decompression to exactly the declared size): streamed through
    /// [`RecordReader::copy_record_to`], or decoded to hand out their record. A fact about
    /// these very bytes, which [`RecordReader::check_chunk`] then need not learn again by
    /// decompressing the chunk once more.
    decompressed_whole: Remembered,
    limits: DecodeLimits,
    held: Held,
}

impl std::fmt::Debug for RecordReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordReader")
            .field("name", &self.file.name)
            .field("len", &self.len())
            .finish()
    }
}

impl RecordReader {
    /// Memory-maps the file at `path` and checks its signature.
    pub fn open(path: &Path) -> Result<Self, RecordsError> {
        let name = path.display().to_string();
        let data = unbound_io::map_file(path)?;
        if data.is_empty() {
            return Err(RecordsError::NotRiegeli {
                file: name,
                detail: "the file is empty".into(),
            });
        }
        Self::from_bytes(data, name)
    }

    /// Reads from bytes already in memory; `name` is used in errors.
    pub fn from_bytes(data: Bytes, name: impl Into<String>) -> Result<Self, RecordsError> {
        let name = name.into();
        if data.len() < SIGNATURE.len() {
            if data[..] == SIGNATURE[..data.len()] && !data.is_empty() {
                return Err(RecordsError::Truncated {
                    file: name,
                    offset: 0,
                    detail: format!(
                        "the file has {} bytes, less than the 64-byte signature",
                        data.len()
                    ),
                });
            }
            return Err(RecordsError::NotRiegeli {
                file: name,
                detail: format!("{} bytes, too short for the signature", data.len()),
            });
        }
        if data[..64] != SIGNATURE {
            return Err(RecordsError::NotRiegeli {
                file: name,
                detail: "bad signature".into(),
            });
        }
        Ok(RecordReader {
            file: FileChunks { data, name },
            cache: Mutex::new(None),
            verified: Remembered::default(),
            decompressed_whole: Remembered::default(),
            limits: DecodeLimits::default(),
            held: Held::default(),
        })
    }

    /// Replaces the [`DecodeLimits`] (the default ones refuse decompression bombs; raise them
    /// only for a file whose declared sizes the caller has judged).
    pub fn set_decode_limits(&mut self, limits: DecodeLimits) {
        self.limits = limits;
    }

    /// The [`DecodeLimits`] in effect.
    pub fn decode_limits(&self) -> DecodeLimits {
        self.limits
    }

    /// Decoded bytes held in memory right now: decoded chunk buffers still referenced by the
    /// cache or by records handed out. (Uncompressed records are slices of the file and count
    /// nothing.)
    pub fn decoded_bytes_held(&self) -> u64 {
        self.held.get()
    }

    /// The sum of the decoded sizes all chunk headers declare: the total size of all records
    /// (the metadata record of a `.cpb` included), read from the headers alone, without
    /// decoding or hashing any chunk data. Lets a caller refuse a file whose records already
    /// exceed what its output may hold before reading any of them.
    pub fn declared_record_bytes(&self) -> Result<u64, RecordsError> {
        let mut total = 0u64;
        for chunk in self.chunks() {
            let chunk = chunk?;
            if chunk.num_records > 0 {
                total = total.saturating_add(chunk.decoded_data_size);
            }
        }
        Ok(total)
    }

    /// The name used in errors (the path for [`RecordReader::open`]).
    pub fn name(&self) -> &str {
        &self.file.name
    }

    /// The file size in bytes.
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    /// Whether the file is empty (never true for an opened reader: the
    /// signature takes 64 bytes).
    pub fn is_empty(&self) -> bool {
        self.file.len() == 0
    }

    /// Riegeli `Seek(Position(pos))` then `ReadRecord`: the first record
    /// whose numeric position is `>= pos`, with that position.
    pub fn read_record_at(&self, pos: u64) -> Result<(u64, Bytes), RecordsError> {
        if let Some((decoded, index)) = self.cached_record(pos) {
            return Ok((pos, decoded.record(index)));
        }
        let (chunk, index) = self.locate(pos)?;
        let decoded = self.decoded(&chunk)?;
        Ok((chunk.begin + index, decoded.record(index as usize)))
    }

    /// The last record of the file with its numeric position (Riegeli
    /// `Seek(Size())`, `SeekBack()`, `ReadRecord`).
    pub fn last_record(&self) -> Result<(u64, Bytes), RecordsError> {
        let mut chunk_pos = self.len();
        while chunk_pos > 0 {
            let begin = self.file.seek(chunk_pos - 1, Which::Before)?;
            if begin >= chunk_pos {
                return Err(RecordsError::Corrupt {
                    file: self.file.name.clone(),
                    offset: begin,
                    detail: format!("no chunk found before position {chunk_pos}"),
                });
            }
            let chunk = self.file.chunk_at(begin)?;
            if chunk.header.num_records > 0 {
                let decoded = self.decoded(&chunk)?;
                let index = decoded.len() - 1;
                return Ok((chunk.begin + index, decoded.record(index as usize)));
            }
            chunk_pos = begin;
        }
        Err(RecordsError::NoRecords {
            file: self.file.name.clone(),
        })
    }

    /// Size of the record at (or first after) `pos`, reading only the record
    /// sizes of a simple chunk, not its values. The chunk's data hash is
    /// still checked (once per chunk).
    pub fn record_len_at(&self, pos: u64) -> Result<u64, RecordsError> {
        if let Some((decoded, index)) = self.cached_record(pos) {
            return Ok(decoded.record_len(index));
        }
        let (chunk, index) = self.locate(pos)?;
        if chunk.header.chunk_type != ChunkType::Simple {
            return Ok(self.decoded(&chunk)?.record_len(index as usize));
        }
        self.verify(&chunk)?;
        let limits = SimpleLayout::parse(&self.file.data_of(&chunk))
            .and_then(|layout| {
                layout.limits(chunk.header.num_records, chunk.header.decoded_data_size)
            })
            .map_err(|e| e.at(&self.file.name, chunk.begin))?;
        let i = index as usize;
        Ok(limits[i] - if i == 0 { 0 } else { limits[i - 1] })
    }

    /// Streams the record at (or first after) `pos` into `out`, returning the
    /// number of bytes written. A chunk holding only this record is
    /// decompressed incrementally (or, uncompressed, copied from the file
    /// piece by piece), never held whole in memory; so is a compressed chunk of several
    /// records declaring more than 64 MiB (decoded as a stream up to the end of the record).
    /// Not bound by the [`DecodeLimits`]: memory stays one decoder buffer.
    pub fn copy_record_to(&self, pos: u64, out: &mut dyn Write) -> Result<u64, RecordsError> {
        self.copy_record_part_to(pos, 0, None, out)
    }

    /// Streams `len` bytes of the record at (or first after) `pos`, from its byte `offset`,
    /// into `out`, as [`copy_record_to`](Self::copy_record_to) streams a whole record: a
    /// value inside a large record (a tensor inside a chunk parsed as it streams). Stored
    /// (uncompressed) bytes are read where they lie; compressed ones are decompressed up to
    /// the range's end, the bytes before it discarded. A range past the record's end is an
    /// error, naming the file.
    pub fn copy_record_range_to(
        &self,
        pos: u64,
        offset: u64,
        len: u64,
        out: &mut dyn Write,
    ) -> Result<u64, RecordsError> {
        self.copy_record_part_to(pos, offset, Some(len), out)
    }

    /// [`copy_record_range_to`](Self::copy_record_range_to), up to the record's end when `len`
    /// is `None`.
    fn copy_record_part_to(
        &self,
        pos: u64,
        offset: u64,
        len: Option<u64>,
        out: &mut dyn Write,
    ) -> Result<u64, RecordsError> {
        let name = &self.file.name;
        let io = |source| RecordsError::Io {
            file: name.clone(),
            source,
        };
        // The part `(offset, len)` of a record of `record_len` bytes, checked.
        let part = |record_len: u64, at: u64| -> Result<(u64, u64), RecordsError> {
            let len = len.unwrap_or(record_len.saturating_sub(offset));
            match offset.checked_add(len) {
                Some(end) if end <= record_len => Ok((offset, len)),
                _ => Err(RecordsError::Corrupt {
                    file: name.clone(),
                    offset: at,
                    detail: format!(
                        "{len} bytes at byte {offset} of a record of {record_len} bytes: past its end"
                    ),
                }),
            }
        };
        if let Some((decoded, index)) = self.cached_record(pos) {
            let (offset, len) = part(decoded.record_len(index), pos)?;
            decoded
                .write_record_range(index, offset, len, out)
                .map_err(io)?;
            return Ok(len);
        }
        let (chunk, index) = self.locate(pos)?;
        let whole = chunk.header.chunk_type != ChunkType::Simple
            || (chunk.header.num_records != 1
                && (self.whole_decode_need(&chunk) == 0
                    || (chunk.header.decoded_data_size <= WHOLE_DECODE_FOR_COPY
                        && self.admit(&chunk).is_ok())));
        if whole {
            let decoded = self.decoded(&chunk)?;
            let index = index as usize;
            let (offset, len) = part(decoded.record_len(index), chunk.begin)?;
            decoded
                .write_record_range(index, offset, len, out)
                .map_err(io)?;
            return Ok(len);
        }
        self.verify(&chunk)?;
        let at = |e: crate::error::DecodeFault| e.at(name, chunk.begin);
        let layout = SimpleLayout::parse(&self.file.data_of(&chunk)).map_err(at)?;
        let limits = layout
            .limits(chunk.header.num_records, chunk.header.decoded_data_size)
            .map_err(at)?;
        let (size, stream) = layout.values_stream().map_err(at)?;
        if size != chunk.header.decoded_data_size {
            return Err(at(crate::error::corrupt(format!(
                "values buffer declares {size} bytes but the chunk header declares {}",
                chunk.header.decoded_data_size
            ))));
        }
        let i = index as usize;
        let start = if i == 0 { 0 } else { limits[i - 1] };
        let (offset, len) = part(limits[i] - start, chunk.begin)?;
        if chunk.header.num_records == 1 && offset == 0 && len == size {
            compression::decompress_into(layout.compression, &stream, size, out).map_err(at)?;
            self.decompressed_whole.insert(chunk.begin);
        } else {
            compression::decompress_range(
                layout.compression,
                &stream,
                size,
                start + offset,
                len,
                out,
            )
            .map_err(at)?;
        }
        Ok(len)
    }

    /// Whether the one record of the chunk beginning at `begin` was decompressed whole
    /// without fault, streamed ([`RecordReader::copy_record_to`]) or decoded
    /// ([`RecordReader::read_record_at`]): its decompression is then checked.
    pub fn decompressed_whole(&self, begin: u64) -> bool {
        self.decompressed_whole.contains(begin)
    }

    /// Checks the chunk beginning at file position `begin` as completely as reading all its
    /// records would (block headers, data hash, framing, record sizes, decompression to
    /// exactly the declared size) and returns the length of each of its records, without
    /// holding its decoded data: simple chunks are decoded as a stream into a counter, so a
    /// chunk truthfully declaring 16 GiB of zeros costs time, not memory. Transposed chunks
    /// can only be decoded whole and are bound by the [`DecodeLimits`]. Chunks without records
    /// give an empty list.
    pub fn check_chunk(&self, begin: u64) -> Result<Vec<u64>, RecordsError> {
        let chunk = self.file.chunk_at(begin)?;
        let h = chunk.header;
        if h.chunk_type != ChunkType::Simple {
            let decoded = self.decoded(&chunk)?;
            return Ok((0..decoded.len() as usize)
                .map(|i| decoded.record_len(i))
                .collect());
        }
        self.verify(&chunk)?;
        let at = |e: crate::error::DecodeFault| e.at(&self.file.name, chunk.begin);
        let layout = SimpleLayout::parse(&self.file.data_of(&chunk)).map_err(at)?;
        let limits = layout
            .limits(h.num_records, h.decoded_data_size)
            .map_err(at)?;
        let (size, stream) = layout.values_stream().map_err(at)?;
        if size != h.decoded_data_size {
            return Err(at(crate::error::corrupt(format!(
                "values buffer declares {size} bytes but the chunk header declares {}",
                h.decoded_data_size
            ))));
        }
        let streamed = h.num_records == 1 && self.decompressed_whole.contains(chunk.begin);
        if !streamed {
            compression::check_decompresses(layout.compression, &stream, size).map_err(at)?;
        }
        let mut previous = 0;
        Ok(limits
            .into_iter()
            .map(|end| {
                let len = end - previous;
                previous = end;
                len
            })
            .collect())
    }

    /// Iterates over all records in file order with their numeric positions.
    /// Stops after the first error.
    pub fn records(&self) -> impl Iterator<Item = Result<(u64, Bytes), RecordsError>> + '_ {
        Records {
            reader: self,
            next_chunk: 0,
            current: None,
            done: false,
        }
    }

    /// Summary of the chunk holding the record at (or first after) `pos`: lets a caller judge
    /// how costly reading it is (compression, stored versus decoded size) before reading it.
    pub fn chunk_of(&self, pos: u64) -> Result<ChunkSummary, RecordsError> {
        let (chunk, _) = self.locate(pos)?;
        Ok(self.summary(&chunk))
    }

    /// Iterates over the chunk headers in file order (the signature chunk
    /// first). Stops after the first error.
    pub fn chunks(&self) -> impl Iterator<Item = Result<ChunkSummary, RecordsError>> + '_ {
        let mut next = 0u64;
        let mut done = false;
        std::iter::from_fn(move || {
            if done || next >= self.len() {
                return None;
            }
            match self.file.chunk_at(next) {
                Ok(chunk) => {
                    next = chunk.end;
                    Some(Ok(self.summary(&chunk)))
                }
                Err(e) => {
                    done = true;
                    Some(Err(e))
                }
            }
        })
    }

    /// Builds the summary of a located chunk.
    fn summary(&self, chunk: &Chunk) -> ChunkSummary {
        let h = &chunk.header;
        let compression = match h.chunk_type {
            ChunkType::Simple | ChunkType::Transposed | ChunkType::FileMetadata => self
                .file
                .data_of(chunk)
                .byte_at(0)
                .and_then(CompressionType::from_byte),
            _ => None,
        };
        ChunkSummary {
            begin: chunk.begin,
            end: chunk.end,
            chunk_type: h.chunk_type,
            num_records: h.num_records,
            data_size: h.data_size,
            decoded_data_size: h.decoded_data_size,
            compression,
        }
    }

    /// Gives the file pages of the chunk holding the record at `pos` back to the kernel
    /// ([`unbound_io::release_pages`]), for a reader done with that chunk: a pass over a
    /// file larger than the memory it should use releases each chunk once read, so its
    /// resident memory is a window rather than the file. The pages stay in the page cache
    /// and a later read maps them back with the same bytes. Does nothing for a reader over
    /// bytes in memory or a `pos` past the end. Returns the number of bytes released.
    pub fn release_chunk_pages(&self, pos: u64) -> usize {
        match self.locate(pos) {
            Ok((chunk, _)) => {
                let len = self.file.data.len() as u64;
                let (begin, end) = (chunk.begin.min(len), chunk.end.min(len));
                unbound_io::release_pages(&self.file.data[begin as usize..end as usize])
            }
            Err(_) => 0,
        }
    }

    /// The cached decoded chunk and record index for `pos`, if the cached
    /// chunk holds a record at exactly that position.
    fn cached_record(&self, pos: u64) -> Option<(Arc<DecodedChunk>, usize)> {
        let guard = self.cache.lock().ok()?;
        let (begin, decoded) = guard.as_ref()?;
        if pos >= *begin && pos - begin < decoded.len() {
            return Some((decoded.clone(), (pos - begin) as usize));
        }
        None
    }

    /// Finds the chunk and index of the first record at or after `pos`.
    fn locate(&self, pos: u64) -> Result<(Chunk, u64), RecordsError> {
        let past_end = || RecordsError::PastEnd {
            file: self.file.name.clone(),
            pos,
        };
        if pos >= self.len() {
            return Err(past_end());
        }
        let mut begin = self.file.seek(pos, Which::Containing)?;
        loop {
            if begin >= self.len() {
                return Err(past_end());
            }
            let chunk = self.file.chunk_at(begin)?;
            let index = pos.saturating_sub(begin);
            if index < chunk.header.num_records {
                return Ok((chunk, index));
            }
            begin = chunk.end;
        }
    }

    /// Decoded bytes decoding `chunk` whole holds: its declared decoded size, except for
    /// chunks whose records are read in place (uncompressed simple chunks) or that hold none.
    fn whole_decode_need(&self, chunk: &Chunk) -> u64 {
        let h = &chunk.header;
        match h.chunk_type {
            ChunkType::Transposed => h.decoded_data_size,
            ChunkType::Simple => {
                let ct = self.file.data_of(chunk).byte_at(0);
                if ct == Some(CompressionType::None.to_byte()) {
                    0
                } else {
                    h.decoded_data_size
                }
            }
            _ => 0,
        }
    }

    /// Refuses to decode `chunk` whole when that would pass the [`DecodeLimits`].
    fn admit(&self, chunk: &Chunk) -> Result<(), RecordsError> {
        let need = self.whole_decode_need(chunk);
        if need == 0 {
            return Ok(());
        }
        let held = self.held.get();
        let fail = |limit, reason| RecordsError::DecodeLimit {
            file: self.file.name.clone(),
            offset: chunk.begin,
            declared: need,
            held,
            limit,
            reason,
        };
        if need > self.limits.max_chunk {
            return Err(fail(self.limits.max_chunk, DecodeLimitKind::Chunk));
        }
        let budget = self.limits.budget;
        if held.saturating_add(need) > budget {
            return Err(fail(budget, DecodeLimitKind::Held));
        }
        Ok(())
    }

    /// Checks the chunk's data hash and block headers, once per chunk.
    fn verify(&self, chunk: &Chunk) -> Result<(), RecordsError> {
        if self.verified.contains(chunk.begin) {
            return Ok(());
        }
        self.file.verify_data(chunk)?;
        self.verified.insert(chunk.begin);
        Ok(())
    }

    /// The decoded records of `chunk`, from the cache or freshly decoded
    /// (and then cached).
    fn decoded(&self, chunk: &Chunk) -> Result<Arc<DecodedChunk>, RecordsError> {
        if let Ok(guard) = self.cache.lock() {
            if let Some((begin, decoded)) = guard.as_ref() {
                if *begin == chunk.begin {
                    return Ok(decoded.clone());
                }
            }
        }
        // The cached chunk is about to be replaced: let go of it before judging what is held.
        if let Ok(mut guard) = self.cache.lock() {
            *guard = None;
        }
        self.admit(chunk)?;
        self.verify(chunk)?;
        let mut decoded = chunk_decoder::decode(&chunk.header, &self.file.data_of(chunk))
            .map_err(|e| e.at(&self.file.name, chunk.begin))?;
        if let crate::chunk_decoder::Values::Buffer(b) = &mut decoded.values {
            *b = self.held.track(std::mem::take(b));
        }
        if decoded.len() != chunk.header.num_records {
            return Err(RecordsError::Corrupt {
                file: self.file.name.clone(),
                offset: chunk.begin,
                detail: "record count differs from the chunk header".into(),
            });
        }
        if chunk.header.chunk_type == ChunkType::Simple && chunk.header.num_records == 1 {
            // Decompressed to exactly its declared size: what `check_chunk` would learn.
            self.decompressed_whole.insert(chunk.begin);
        }
        let decoded = Arc::new(decoded);
        if let Ok(mut guard) = self.cache.lock() {
            *guard = Some((chunk.begin, decoded.clone()));
        }
        Ok(decoded)
    }
}

/// Iterator behind [`RecordReader::records`].
struct Records<'a> {
    reader: &'a RecordReader,
    next_chunk: u64,
    current: Option<(u64, Arc<DecodedChunk>, usize)>,
    done: bool,
}

impl Iterator for Records<'_> {
    type Item = Result<(u64, Bytes), RecordsError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            if let Some((begin, decoded, index)) = &mut self.current {
                if (*index as u64) < decoded.len() {
                    let item = (*begin + *index as u64, decoded.record(*index));
                    *index += 1;
                    return Some(Ok(item));
                }
                self.current = None;
            }
            if self.next_chunk >= self.reader.len() {
                self.done = true;
                return None;
            }
            let step = self
                .reader
                .file
                .chunk_at(self.next_chunk)
                .and_then(|chunk| {
                    self.next_chunk = chunk.end;
                    if chunk.header.num_records == 0 {
                        return Ok(None);
                    }
                    Ok(Some((chunk.begin, self.reader.decoded(&chunk)?)))
                });
            match step {
                Ok(Some((begin, decoded))) => self.current = Some((begin, decoded, 0)),
                Ok(None) => {}
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

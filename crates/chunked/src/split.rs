//! The generic Splitter side: collecting chunks and the `ChunkedMessage` that places them.
//!
//! This mirrors TensorFlow's Python `ComposableSplitter`: a root [`ChunkSink`] owns the chunk
//! list and a flat list of chunked fields with absolute paths; splitters for parts of the
//! message add chunks through a [`Scope`] that prefixes their own position in the parent
//! (`fields_in_parent`). A chunk may be inserted at an index instead of appended; indices in the
//! metadata are fixed up when the sink is finished, by chunk identity, as `_fix_chunks` does.

use std::sync::OnceLock;

use bytes::Bytes;
use prost_reflect::MessageDescriptor;
use unbound_proto::tensorflow::proto_splitter::{ChunkedField, ChunkedMessage};

use crate::error::Result;
use crate::tags::{field_tags, PathElem};
use unbound_wire::{Payload, WireMessage};

/// One chunk: a message (serialized when written) or raw bytes.
#[derive(Clone, Debug)]
pub enum Chunk {
    /// A message chunk (`ChunkInfo.Type.MESSAGE`).
    Message(WireMessage),
    /// A message chunk given already serialized (written as is, without re-encoding).
    SerializedMessage(Payload),
    /// A bytes chunk (`ChunkInfo.Type.BYTES`).
    Bytes(Payload),
}

impl Chunk {
    /// Size of the chunk's record.
    pub fn len(&self) -> u64 {
        match self {
            Chunk::Message(m) => m.encoded_len(),
            Chunk::SerializedMessage(p) | Chunk::Bytes(p) => p.len(),
        }
    }

    /// Whether the chunk's record is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The chunk's record as consecutive pieces (their concatenation is the record): what the
    /// writer writes and what a fingerprint of the split hashes, without joining a message's
    /// fields into one buffer; runs of fields that lie as they are in one of `sources` are
    /// shared slices of it ([`WireMessage::to_segments_within`]).
    pub fn segments_within(&self, sources: &[Bytes]) -> Result<Vec<Bytes>> {
        Ok(match self {
            Chunk::Message(m) => m.to_segments_within(sources)?,
            Chunk::SerializedMessage(p) | Chunk::Bytes(p) => vec![p.bytes()?],
        })
    }
}

impl From<Bytes> for Chunk {
    fn from(b: Bytes) -> Self {
        Chunk::Bytes(Payload::Inline(b))
    }
}

/// Identity of a chunk inside a sink, stable across insertions.
type ChunkId = usize;

/// A chunk added to a sink, whose content may still be replaced ([`ChunkSink::set_chunk`]):
/// splitters that fill a chunk after placing it (TensorFlow's repeated-field splitter) use it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkHandle(ChunkId);

/// The root of a split: the chunk list and the chunked fields.
pub struct ChunkSink {
    descriptor: MessageDescriptor,
    /// Chunks by id; id 0 is reserved for the base message when it is the initial chunk.
    chunks: Vec<Option<Chunk>>,
    /// Chunk ids in file order.
    order: Vec<ChunkId>,
    /// Chunked fields; their `chunk_index` values (nested ones too) hold chunk ids, turned into
    /// file positions when the sink is finished.
    fields: Vec<ChunkedField>,
    base_is_initial_chunk: bool,
}

/// What a finished split produced.
pub struct SplitOutput {
    /// Chunks in file order; the base message, if it is a chunk, comes first.
    pub chunks: Vec<Chunk>,
    /// The metadata placing them.
    pub message: ChunkedMessage,
    /// Buffers the split message was parsed from (a mapped model file, say): fields of a
    /// chunk that lie in one of them as they are written are written and hashed from there
    /// ([`Chunk::segments_within`]). Empty when unknown.
    pub sources: Vec<Bytes>,
    /// Chunk `i`'s record, once found to be one piece (a run of fields lying as they are in
    /// one of `sources`), or `None` once found not to be: see [`SplitOutput::segments_at`].
    whole: Vec<OnceLock<Option<Bytes>>>,
}

impl SplitOutput {
    /// The split made of `chunks` in file order, placed by `message`.
    pub fn new(chunks: Vec<Chunk>, message: ChunkedMessage) -> Self {
        let whole = chunks.iter().map(|_| OnceLock::new()).collect();
        Self {
            chunks,
            message,
            sources: Vec::new(),
            whole,
        }
    }

    /// The split, with `sources` as the buffers its message was parsed from.
    pub fn within(self, sources: Vec<Bytes>) -> Self {
        Self { sources, ..self }
    }

    /// Chunk `chunk`'s record as consecutive pieces ([`Chunk::segments_within`] its
    /// [`SplitOutput::sources`]).
    pub fn segments(&self, chunk: &Chunk) -> Result<Vec<Bytes>> {
        chunk.segments_within(&self.sources)
    }

    /// Whether `piece` lies in one of the split's sources.
    fn holds(&self, piece: &[u8]) -> bool {
        let at = piece.as_ptr() as usize;
        self.sources.iter().any(|source| {
            let start = source.as_ptr() as usize;
            at >= start && at + piece.len() <= start + source.len()
        })
    }

    /// [`SplitOutput::segments`] of chunk `index`, found once for every reader when the
    /// record is one piece lying in a source (a run of nodes in place in the model file):
    /// `split` writes the chunks and fingerprints them side by side, and each finding the
    /// pieces of millions of nodes was a twentieth of it (issue 15). Any other record (of
    /// several pieces, or read or built for the purpose) is found again on each call, so that
    /// nothing it needed is held after it is written. The chunks must not change once read.
    pub fn segments_at(&self, index: usize) -> Result<Vec<Bytes>> {
        let chunk = self
            .chunks
            .get(index)
            .ok_or_else(|| out_of_range(self, index))?;
        let Some(slot) = self.whole.get(index) else {
            return self.segments(chunk);
        };
        let mut found = None;
        let whole = slot.get_or_init(|| {
            let segments = self.segments(chunk);
            // Kept only when it costs no memory: a piece of a source, not bytes read or
            // built for it (a constant's lazy record, say, is read again by each reader).
            let one = match &segments {
                Ok(pieces) => match &pieces[..] {
                    [one] if self.holds(one) => Some(one.clone()),
                    _ => None,
                },
                Err(_) => None,
            };
            found = Some(segments);
            one
        });
        match (found, whole) {
            (Some(segments), _) => segments,
            (None, Some(one)) => Ok(vec![one.clone()]),
            (None, None) => self.segments(chunk),
        }
    }

    /// Whether the split chunked anything (else it is written as one `.pb`:
    /// [`SplitOutput::into_unchunked`]).
    pub fn chunks_anything(&self) -> bool {
        !self.message.chunked_fields.is_empty()
    }

    /// The whole message, when the split chunked nothing (it is then written as one `.pb`);
    /// the split itself otherwise.
    pub fn into_unchunked(self) -> std::result::Result<WireMessage, SplitOutput> {
        if self.chunks_anything() {
            return Err(self);
        }
        let base = self.chunks.into_iter().next().and_then(|c| match c {
            Chunk::Message(m) => Some(m),
            _ => None,
        });
        Ok(base.unwrap_or_default())
    }
}

/// The fault of a chunk index past the end of `split`.
fn out_of_range(split: &SplitOutput, index: usize) -> crate::ChunkedError {
    crate::ChunkedError::Metadata {
        source_name: crate::ChunkSource::name(split).to_string(),
        fault: format!(
            "chunk index {index} is out of range for {} chunks",
            split.chunks.len()
        ),
    }
}

/// A split read back from memory, as a [`crate::Merger`] reads a `.cpb`'s chunks: chunk `i`
/// is `chunks[i]`, serialized. Lets a fingerprint of the `.cpb` about to be written be computed
/// from the split itself, while it is written, instead of reading the file back.
impl crate::ChunkSource for SplitOutput {
    fn name(&self) -> &str {
        "split in memory"
    }

    fn len(&self) -> usize {
        self.chunks.len()
    }

    fn bytes(&self, index: u64) -> Result<Bytes> {
        let index = usize::try_from(index).unwrap_or(usize::MAX);
        let mut segments = self.segments_at(index)?;
        Ok(if segments.len() == 1 {
            segments.pop().unwrap_or_default()
        } else {
            Bytes::from(segments.concat())
        })
    }

    fn declared_size(&self, index: u64) -> Option<u64> {
        let i = usize::try_from(index).ok()?;
        self.chunks.get(i).map(Chunk::len)
    }

    /// A chunk held as a built message, when written in its field order: a merge copies its
    /// fields instead of parsing them back out of the bytes it is written as (issue 15: a third
    /// of the fingerprint of a split of millions of nodes).
    fn built(&self, index: u64) -> Option<&WireMessage> {
        match self.chunks.get(usize::try_from(index).ok()?)? {
            Chunk::Message(m) if m.written_in_place() => Some(m),
            _ => None,
        }
    }
}

impl ChunkSink {
    /// A sink for a message of type `descriptor`. With `base_is_initial_chunk` (TensorFlow's
    /// `proto_as_initial_chunk`), the message itself becomes chunk 0 when finished and the root
    /// `ChunkedMessage` has `chunk_index: 0`; without it the root has no chunk index.
    pub fn new(descriptor: MessageDescriptor, base_is_initial_chunk: bool) -> Self {
        let (chunks, order) = if base_is_initial_chunk {
            (vec![None], vec![0])
        } else {
            (Vec::new(), Vec::new())
        };
        Self {
            descriptor,
            chunks,
            order,
            fields: Vec::new(),
            base_is_initial_chunk,
        }
    }

    /// The message type being split.
    pub fn descriptor(&self) -> &MessageDescriptor {
        &self.descriptor
    }

    /// Number of chunks so far, the base included.
    pub fn chunk_count(&self) -> usize {
        self.order.len()
    }

    /// Whether any chunked field was added.
    pub fn has_chunked_fields(&self) -> bool {
        !self.fields.is_empty()
    }

    /// A scope at the root of the message.
    pub fn root(&mut self) -> Scope<'_> {
        Scope {
            sink: self,
            prefix: Vec::new(),
        }
    }

    /// Adds `chunk` for the field at `path` (absolute). With `insert_at`, the chunk is inserted
    /// at that position of the chunk list instead of appended.
    pub fn add_chunk(
        &mut self,
        chunk: Chunk,
        path: &[PathElem],
        insert_at: Option<usize>,
    ) -> Result<ChunkHandle> {
        let tags = field_tags(&self.descriptor, path)?;
        let id = self.chunks.len();
        self.chunks.push(Some(chunk));
        match insert_at {
            Some(at) => self.order.insert(at.min(self.order.len()), id),
            None => self.order.push(id),
        }
        self.fields.push(ChunkedField {
            field_tag: tags,
            message: Some(ChunkedMessage {
                chunk_index: Some(id as u64),
                chunked_fields: Vec::new(),
            }),
        });
        Ok(ChunkHandle(id))
    }

    /// Adds the finished split of a part of the message at `path` (absolute) as one chunked
    /// field with its own nested `ChunkedMessage`: on merge the part's base chunk is merged first
    /// and its own chunked fields are applied inside it, so their order never depends on how the
    /// Merger sorts paths through map keys.
    pub fn add_nested(&mut self, part: SplitOutput, path: &[PathElem]) -> Result<()> {
        let tags = field_tags(&self.descriptor, path)?;
        let first_id = self.chunks.len();
        for chunk in part.chunks {
            self.order.push(self.chunks.len());
            self.chunks.push(Some(chunk));
        }
        let mut message = part.message;
        remap(&mut message, &|position| position + first_id as u64);
        self.fields.push(ChunkedField {
            field_tag: tags,
            message: Some(message),
        });
        Ok(())
    }

    /// Replaces the content of a chunk added earlier.
    pub fn set_chunk(&mut self, handle: ChunkHandle, chunk: Chunk) {
        self.chunks[handle.0] = Some(chunk);
    }

    /// Finishes the split with the (now reduced) base message.
    pub fn finish(mut self, base: WireMessage) -> SplitOutput {
        if self.base_is_initial_chunk {
            self.chunks[0] = Some(Chunk::Message(base));
        }
        let mut position = vec![0u64; self.chunks.len()];
        for (pos, &id) in self.order.iter().enumerate() {
            position[id] = pos as u64;
        }
        let mut chunked_fields = self.fields;
        for field in &mut chunked_fields {
            if let Some(m) = field.message.as_mut() {
                remap(m, &|id| position[id as usize]);
            }
        }
        let mut slots = self.chunks;
        let chunks = self
            .order
            .iter()
            .map(|&id| slots[id].take().expect("every chunk id is placed once"))
            .collect();
        SplitOutput::new(
            chunks,
            ChunkedMessage {
                chunk_index: self.base_is_initial_chunk.then_some(0),
                chunked_fields,
            },
        )
    }
}

/// Rewrites every chunk index in `message` and below with `f`.
fn remap(message: &mut ChunkedMessage, f: &dyn Fn(u64) -> u64) {
    if let Some(i) = message.chunk_index.as_mut() {
        *i = f(*i);
    }
    for field in &mut message.chunked_fields {
        if let Some(m) = field.message.as_mut() {
            remap(m, f);
        }
    }
}

/// A splitter's view of the sink: paths it gives are relative to its own message.
pub struct Scope<'a> {
    sink: &'a mut ChunkSink,
    prefix: Vec<PathElem>,
}

impl Scope<'_> {
    /// `path` relative to this scope, made absolute.
    fn full_path(&self, path: &[PathElem]) -> Vec<PathElem> {
        let mut full = self.prefix.clone();
        full.extend_from_slice(path);
        full
    }

    /// Adds a chunk at `path` relative to this scope.
    pub fn add_chunk(
        &mut self,
        chunk: Chunk,
        path: &[PathElem],
        insert_at: Option<usize>,
    ) -> Result<ChunkHandle> {
        let full = self.full_path(path);
        self.sink.add_chunk(chunk, &full, insert_at)
    }

    /// A scope for the part of this message at `path` (a child splitter's `fields_in_parent`).
    pub fn child(&mut self, path: &[PathElem]) -> Scope<'_> {
        let prefix = self.full_path(path);
        Scope {
            sink: self.sink,
            prefix,
        }
    }

    /// Replaces the content of a chunk added earlier.
    pub fn set_chunk(&mut self, handle: ChunkHandle, chunk: Chunk) {
        self.sink.set_chunk(handle, chunk)
    }

    /// Adds a finished split of the part at `path` relative to this scope, nested
    /// ([`ChunkSink::add_nested`]).
    pub fn add_nested(&mut self, part: SplitOutput, path: &[PathElem]) -> Result<()> {
        let full = self.full_path(path);
        self.sink.add_nested(part, &full)
    }

    /// Number of chunks in the sink so far.
    pub fn chunk_count(&self) -> usize {
        self.sink.chunk_count()
    }

    /// The message type at the root of the sink.
    pub fn root_descriptor(&self) -> &MessageDescriptor {
        self.sink.descriptor()
    }
}

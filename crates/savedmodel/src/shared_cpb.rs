//! [`SharedCpb`]: one `saved_model.cpb` opened once for every reader in a command, its
//! message chunks decoded once (issue 15).
//!
//! `verify` (and so `split` and `merge`, which verify first) reads a `.cpb` four times: the
//! complete check of its records, the merge, and on a second thread the fingerprint's hash of
//! every chunk and its merge of the graph. Given one `SharedCpb`, all four take each message
//! chunk from one [`unbound_chunked::ChunkCache`]: the first to need a chunk decodes it, the
//! others (on either thread) wait for it and share its bytes. The merged model holds those
//! bytes anyway, so peak memory does not grow. BYTES chunks (tensor contents) are kept too when
//! all the compressed chunks together decode to at most [`KEEP_ALL_MAX`] bytes (a model that
//! large can be merged into one `.pb` anyway): the lazy values of the merged model then read
//! them from the cache, and the check, both fingerprints' hashes and the write of a `merge`
//! share one decode instead of making five (issue 15: the TensorFlow-style Brotli `.cpb` of the
//! 1.6 GB big-constants model merged in 34.7 s, five times its time before verification).
//! Past that, BYTES chunks are not kept and stream as before, so memory stays bounded.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};

use unbound_canonical::farmhash::Fingerprint64;
use unbound_chunked::prune::{tag_field, tag_index};
use unbound_chunked::{BothTaps, FileChunks, StreamTap, StreamedChunk, TapSink, TapThread};
use unbound_proto::fields::tensorflow::{graph_def, meta_graph_def, saved_model};
use unbound_proto::tensorflow::proto_splitter::ChunkMetadata;
use unbound_wire::FieldsApart;

use crate::dir::SavedModel;

/// The most decoded bytes of compressed chunks kept when every chunk is kept: 2 GiB, the
/// largest model that merges into one `.pb`, so never more than a merge writes.
pub(crate) const KEEP_ALL_MAX: u64 = 2 << 30;

/// A `.cpb` open for sharing: its chunks (message chunks kept decoded) and its metadata.
pub(crate) struct SharedCpb {
    /// The file.
    pub(crate) path: PathBuf,
    /// Its chunks, with the message chunks kept once decoded.
    pub(crate) chunks: FileChunks,
    /// Its chunk metadata.
    pub(crate) metadata: ChunkMetadata,
    /// The `Fingerprint64` of each chunk a merge streamed, learnt as it streamed.
    pub(crate) prints: Arc<StreamPrints>,
}

impl SharedCpb {
    /// Opens the model file of `model` (a `.cpb`) for sharing, from its mapping, or `None` when
    /// it cannot be: the file does not open, its metadata does not fit its records, or its
    /// message chunks together declare more decoded bytes than the reader may hold
    /// ([`FileChunks::keep_decoded`]). Each reader then opens the file on its own, as without
    /// sharing, and reports what it finds there in its own words. `tap`, if any, sees the
    /// chunks merges stream beside the fingerprint's hashes.
    pub(crate) fn open(model: &SavedModel, tap: Option<Arc<dyn StreamTap>>) -> Option<Self> {
        let path = &model.model_file().path;
        let (mut chunks, metadata) = model.chunks().ok()?;
        let all = 0..chunks.infos().len() as u64;
        let kept = chunks.keep_decoded_up_to(all, KEEP_ALL_MAX) || {
            let messages = chunks.message_chunks();
            chunks.keep_decoded(messages)
        };
        let mut prints = StreamPrints::default();
        prints.set_apart_in(graph_chunks(&metadata));
        let prints = Arc::new(prints);
        // The hashes (and the caller's tap) take the bytes on a thread of their own: the
        // fingerprint's thread waits for the merge meanwhile, so the core is free.
        let print_tap = Arc::clone(&prints) as Arc<dyn StreamTap>;
        chunks.set_stream_tap(Arc::new(TapThread(match tap {
            Some(tap) => Arc::new(BothTaps(print_tap, tap)),
            None => print_tap,
        })));
        // The chunks the merge streams are streamed on both cores.
        if let (Ok(root), Some(message)) = (
            crate::dir::saved_model_descriptor(),
            metadata.message.as_ref(),
        ) {
            chunks.stream_ahead(&root, message);
        }
        kept.then(|| Self {
            path: path.to_path_buf(),
            chunks,
            metadata,
            prints,
        })
    }
}

/// The graph's own chunks: merged whole into `meta_graphs[0].graph_def`, with nothing chunked
/// below them.
fn graph_chunks(metadata: &ChunkMetadata) -> Vec<u64> {
    let graph_tags = [
        tag_field(saved_model::META_GRAPHS),
        tag_index(0),
        tag_field(meta_graph_def::GRAPH_DEF),
    ];
    let Some(root) = &metadata.message else {
        return Vec::new();
    };
    root.chunked_fields
        .iter()
        .filter(|cf| cf.field_tag == graph_tags)
        .filter_map(|cf| cf.message.as_ref())
        .filter(|m| m.chunked_fields.is_empty())
        .filter_map(|m| m.chunk_index)
        .collect()
}

/// The `Fingerprint64` of each chunk a merge of a [`SharedCpb`] streamed (a chunk too large to
/// keep decoded: [`FileChunks::streams_chunk_at`]), hashed as it went by ([`StreamTap`]), for
/// the fingerprint's hash of every chunk: `verify` streamed such a chunk once for its merge
/// and once more for that hash (a model of gigabytes of constants decompressed twice). A
/// print is of the bytes of that chunk of that file; a chunk whose stream failed has none.
///
/// The fingerprint runs on another thread while `verify` merges: it waits for the merge
/// ([`StreamPrints::wait_for_merge`]) when one is announced ([`StreamPrints::merge_ahead`]),
/// and hashes itself what the merge did not stream.
///
/// Of the graph's own chunks ([`StreamPrints::set_apart_in`]), the fields other than nodes
/// are set apart too as they stream ([`FieldsApart`]), for a fingerprint that takes the
/// nodes from elsewhere (`fingerprint/pending.rs`) and would otherwise decode each chunk again.
#[derive(Default)]
pub(crate) struct StreamPrints {
    /// Shared with the sinks hashing streams in progress.
    prints: Arc<Mutex<HashMap<u64, u64>>>,
    /// The chunks whose fields other than nodes are set apart.
    apart_in: HashSet<u64>,
    /// Those fields, by chunk, once its stream is whole (`None`: not read as whole fields).
    apart: Arc<Mutex<HashMap<u64, Option<Vec<u8>>>>>,
    /// Whether a merge is announced and not finished yet.
    merging: Mutex<bool>,
    merged: Condvar,
}

impl StreamPrints {
    /// Sets apart the fields other than nodes of the chunks `indices` as they stream (the
    /// graph's own chunks), before any does.
    pub(crate) fn set_apart_in(&mut self, indices: impl IntoIterator<Item = u64>) {
        self.apart_in = indices.into_iter().collect();
    }

    /// The fields other than nodes of chunk `index`, as its stream set them apart: handed
    /// over once (`None` when it was not set apart, or was already taken).
    pub(crate) fn take_apart(&self, index: u64) -> Option<Vec<u8>> {
        self.apart.lock().ok()?.remove(&index).flatten()
    }

    /// The print of chunk `index`, if a merge streamed it whole.
    pub(crate) fn print(&self, index: u64) -> Option<u64> {
        self.prints.lock().ok()?.get(&index).copied()
    }

    /// Announces a merge of the chunks: until the returned guard is dropped (the merge has
    /// ended, however it ended), [`StreamPrints::wait_for_merge`] waits.
    pub(crate) fn merge_ahead(&self) -> MergeAhead<'_> {
        if let Ok(mut merging) = self.merging.lock() {
            *merging = true;
        }
        MergeAhead(self)
    }

    /// Returns once no announced merge is running.
    pub(crate) fn wait_for_merge(&self) {
        let Ok(mut merging) = self.merging.lock() else {
            return;
        };
        while *merging {
            merging = match self.merged.wait(merging) {
                Ok(m) => m,
                Err(_) => return,
            };
        }
    }
}

/// A merge announced by [`StreamPrints::merge_ahead`]; its end is announced when dropped.
pub(crate) struct MergeAhead<'a>(&'a StreamPrints);

impl Drop for MergeAhead<'_> {
    fn drop(&mut self) {
        if let Ok(mut merging) = self.0.merging.lock() {
            *merging = false;
        }
        self.0.merged.notify_all();
    }
}

impl StreamTap for StreamPrints {
    fn begin(&self, chunk: StreamedChunk) -> Option<Box<dyn TapSink>> {
        let index = chunk.index;
        if self.print(index).is_some() {
            return None;
        }
        let apart = self.apart_in.contains(&index).then(|| {
            (
                FieldsApart::new(graph_def::NODE, APART_LIMIT),
                Arc::clone(&self.apart),
            )
        });
        Some(Box::new(PrintSink {
            index,
            print: Fingerprint64::new(),
            prints: Arc::clone(&self.prints),
            apart,
        }))
    }
}

/// The most bytes of a graph chunk's fields other than nodes set apart as it streams (past
/// it, the chunk is read again when they are wanted).
const APART_LIMIT: usize = 64 << 20;

/// The fields set apart of a chunk as it streams, and where they go once it is whole.
type Apart = (FieldsApart, Arc<Mutex<HashMap<u64, Option<Vec<u8>>>>>);

/// Hashes one chunk as it streams; its print is kept once the stream is whole. Of a graph's
/// chunk, sets its fields other than nodes apart too.
struct PrintSink {
    index: u64,
    print: Fingerprint64,
    prints: Arc<Mutex<HashMap<u64, u64>>>,
    apart: Option<Apart>,
}

impl std::io::Write for PrintSink {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.print.update(data);
        if let Some((fields, _)) = &mut self.apart {
            fields.update(data);
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl TapSink for PrintSink {
    fn finish(self: Box<Self>) {
        if let Some((fields, apart)) = self.apart {
            if let Ok(mut apart) = apart.lock() {
                apart.insert(self.index, fields.finish());
            }
        }
        if let Ok(mut prints) = self.prints.lock() {
            prints.insert(self.index, self.print.finish());
        }
    }
}

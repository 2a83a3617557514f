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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use unbound_canonical::farmhash::Fingerprint64;
use unbound_chunked::prune::{tag_field, tag_index};
use unbound_chunked::{BothTaps, FileChunks, StreamTap, StreamedChunk, TapSink, TapThread};
use unbound_proto::fields::tensorflow::{graph_def, meta_graph_def, saved_model};
use unbound_proto::tensorflow::proto_splitter::{ChunkMetadata, FieldIndex};
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
    let graph_tags = meta_graph_tags(meta_graph_def::GRAPH_DEF);
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
    /// Those fields, by chunk, once its stream is whole (`None`: not read as whole fields, or
    /// past the file's budget).
    apart: Arc<Mutex<HashMap<u64, Option<Vec<u8>>>>>,
    /// Bytes of such fields the file may still set apart: [`APART_LIMIT`] in all, whatever
    /// the number of chunks.
    apart_left: Arc<AtomicUsize>,
    /// Whether a merge is announced and not finished yet.
    merging: Mutex<bool>,
    merged: Condvar,
}

impl StreamPrints {
    /// Sets apart the fields other than nodes of the chunks `indices` as they stream (the
    /// graph's own chunks), before any does.
    pub(crate) fn set_apart_in(&mut self, indices: impl IntoIterator<Item = u64>) {
        self.apart_in = indices.into_iter().collect();
        self.apart_left = Arc::new(AtomicUsize::new(APART_LIMIT));
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
        let apart = self.apart_in.contains(&index).then(|| Apart {
            // At most what the file has left; taken from it once the chunk is whole.
            fields: FieldsApart::new(graph_def::NODE, self.apart_left.load(Ordering::Acquire)),
            kept: Arc::clone(&self.apart),
            left: Arc::clone(&self.apart_left),
        });
        Some(Box::new(PrintSink {
            index,
            print: Fingerprint64::new(),
            prints: Arc::clone(&self.prints),
            apart,
        }))
    }
}

/// The most bytes of the graph chunks' fields other than nodes a file sets apart as they
/// stream, all its chunks together (past it, a chunk is read again when they are wanted).
const APART_LIMIT: usize = 64 << 20;

/// The fields set apart of a chunk as it streams, and where they go once it is whole.
struct Apart {
    fields: FieldsApart,
    kept: Arc<Mutex<HashMap<u64, Option<Vec<u8>>>>>,
    /// The file's budget ([`StreamPrints::apart_left`]).
    left: Arc<AtomicUsize>,
}

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
        if let Some(apart) = &mut self.apart {
            apart.fields.update(data);
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl TapSink for PrintSink {
    fn finish(self: Box<Self>) {
        if let Some(apart) = self.apart {
            // Kept only while the file's budget covers it (chunks streamed at once each began
            // with what was left then).
            let fields = apart.fields.finish().filter(|fields| {
                apart
                    .left
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                        left.checked_sub(fields.len())
                    })
                    .is_ok()
            });
            if let Ok(mut kept) = apart.kept.lock() {
                kept.insert(self.index, fields);
            }
        }
        if let Ok(mut prints) = self.prints.lock() {
            prints.insert(self.index, self.print.finish());
        }
    }
}

/// The field tags of `field` of the first meta graph in a SavedModel's chunk metadata:
/// `[meta_graphs, 0, field]`.
pub(crate) fn meta_graph_tags(field: u32) -> Vec<FieldIndex> {
    vec![
        tag_field(saved_model::META_GRAPHS),
        tag_index(0),
        tag_field(field),
    ]
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// A graph chunk: one empty node (field 1), then `other` bytes of field 4 (`versions`),
    /// a field other than nodes.
    fn graph_chunk(other: usize) -> Vec<u8> {
        let mut out = vec![0x0a, 0x02, 0x0a, 0x00];
        out.push(0x22);
        let mut n = other as u64;
        while n >= 0x80 {
            out.push((n as u8) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
        out.resize(out.len() + other, 7);
        out
    }

    fn stream(prints: &StreamPrints, index: u64, bytes: &[u8]) {
        let chunk = StreamedChunk {
            index,
            position: 0,
            len: bytes.len() as u64,
            start: 0,
        };
        let mut sink = prints.begin(chunk).expect("a chunk not streamed yet");
        for piece in bytes.chunks(1 << 20) {
            sink.write_all(piece).unwrap();
        }
        sink.finish();
    }

    #[test]
    fn the_fields_set_apart_share_one_budget_for_the_file() {
        let mut prints = StreamPrints::default();
        prints.set_apart_in([3, 4, 5]);
        let big = graph_chunk(40 << 20);
        stream(&prints, 3, &big);
        // The second 40 MiB would pass the file's 64 MiB: not kept, read again when wanted.
        stream(&prints, 4, &big);
        let small = graph_chunk(1000);
        stream(&prints, 5, &small);
        let first = prints.take_apart(3).expect("within the budget");
        assert_eq!(first.len(), big.len() - 4, "all but the node");
        assert_eq!(prints.take_apart(4), None);
        assert_eq!(prints.take_apart(5).map(|f| f.len()), Some(small.len() - 4));
        // Every chunk has its print, kept or not.
        assert!(prints.print(4).is_some());
        // Handed over once.
        assert_eq!(prints.take_apart(3), None);
    }

    #[test]
    fn only_the_chunks_named_are_set_apart() {
        let mut prints = StreamPrints::default();
        prints.set_apart_in([1]);
        stream(&prints, 2, &graph_chunk(10));
        assert_eq!(prints.take_apart(2), None);
        assert!(prints.print(2).is_some());
    }
}

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

use std::path::PathBuf;

use unbound_chunked::FileChunks;
use unbound_proto::tensorflow::proto_splitter::ChunkMetadata;

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
}

impl SharedCpb {
    /// Opens the model file of `model` (a `.cpb`) for sharing, from its mapping, or `None` when
    /// it cannot be: the file does not open, its metadata does not fit its records, or its
    /// message chunks together declare more decoded bytes than the reader may hold
    /// ([`FileChunks::keep_decoded`]). Each reader then opens the file on its own, as without
    /// sharing, and reports what it finds there in its own words.
    pub(crate) fn open(model: &SavedModel) -> Option<Self> {
        let path = &model.model_file().path;
        let (mut chunks, metadata) = model.chunks().ok()?;
        let all = 0..chunks.infos().len() as u64;
        let kept = chunks.keep_decoded_up_to(all, KEEP_ALL_MAX) || {
            let messages = chunks.message_chunks();
            chunks.keep_decoded(messages)
        };
        kept.then(|| Self {
            path: path.to_path_buf(),
            chunks,
            metadata,
        })
    }
}

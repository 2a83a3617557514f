//! [`SharedCpb`]: one `saved_model.cpb` opened once for every reader in a command, its
//! message chunks decoded once (issue 15).
//!
//! `verify` (and so `split` and `merge`, which verify first) reads a `.cpb` four times: the
//! complete check of its records, the merge, and on a second thread the fingerprint's hash of
//! every chunk and its merge of the graph. Given one `SharedCpb`, all four take each message
//! chunk from one [`unbound_chunked::ChunkCache`]: the first to need a chunk decodes it, the
//! others (on either thread) wait for it and share its bytes. The merged model holds those
//! bytes anyway, so peak memory does not grow; BYTES chunks (tensor contents) are not kept and
//! stream as before.

use std::path::{Path, PathBuf};

use unbound_chunked::FileChunks;
use unbound_proto::tensorflow::proto_splitter::ChunkMetadata;

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
    /// Opens `path` for sharing, or `None` when it cannot be: the file does not open, its
    /// metadata does not fit its records, or its message chunks together declare more decoded
    /// bytes than the reader may hold ([`FileChunks::keep_decoded`]). Each reader then opens
    /// the file on its own, as without sharing, and reports what it finds there in its own
    /// words.
    pub(crate) fn open(path: &Path) -> Option<Self> {
        let (mut chunks, metadata) = FileChunks::open(path).ok()?;
        let messages = chunks.message_chunks();
        chunks.keep_decoded(messages).then(|| Self {
            path: path.to_path_buf(),
            chunks,
            metadata,
        })
    }
}

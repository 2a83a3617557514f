//! Hugging Face's sharded safetensors layout, declared once: file names, the index, the
//! metadata keys unbound writes, and PyTorch DCP's.

/// The one file of a model that fits in one.
pub const SINGLE_FILE: &str = "model.safetensors";
/// The index of a model in several files.
pub const INDEX_FILE: &str = "model.safetensors.index.json";
/// Metadata key of the framework (`huggingface_hub` and transformers read `"format"`).
pub const META_FORMAT: &str = "format";
/// Our value of [`META_FORMAT`].
pub const FORMAT_TF: &str = "tf";
/// Metadata key of the JSON object from each tensor name of the file to its checkpoint key.
pub const META_KEYS: &str = "unbound.keys";
/// Metadata key of PyTorch Distributed Checkpoint's Hugging Face writer (`torch.distributed.
/// checkpoint._hf_utils.CUSTOM_METADATA_KEY`): a JSON object from each tensor of the file
/// to `{"saved_offsets": [...]}`, where its piece starts in the whole tensor.
pub const META_DCP_SHARDING: &str = "DCP_SHARDING_INFO";
/// Key of a piece's offsets in [`META_DCP_SHARDING`].
pub const DCP_SAVED_OFFSETS: &str = "saved_offsets";
/// The directory DCP's Hugging Face writer puts the ranks' files in when it consolidates
/// them afterwards (`torch.distributed.checkpoint._hf_utils.SHARDED_DIR_NAME`).
pub const DCP_SHARDED_DIR: &str = "sharded";
/// Largest safetensors header read (the `safetensors` crate's and Python package's limit).
pub const MAX_HEADER: u64 = 100_000_000;
/// Bytes moved at once per worker.
pub const BLOCK: usize = 8 << 20;

/// The name of file `i` (from 0) of `n` (`model-00001-of-00003.safetensors`), or
/// [`SINGLE_FILE`] when `n` is 1.
pub fn file_name(i: usize, n: usize) -> String {
    if n == 1 {
        SINGLE_FILE.to_string()
    } else {
        format!("model-{:05}-of-{n:05}.safetensors", i + 1)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn file_names_are_huggingface_s() {
        assert_eq!(super::file_name(0, 1), "model.safetensors");
        assert_eq!(super::file_name(1, 3), "model-00002-of-00003.safetensors");
    }
}

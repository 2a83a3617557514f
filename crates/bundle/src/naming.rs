//! File names of a bundle (`tensorflow/core/util/tensor_bundle/naming.cc`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut s = OsString::from(prefix.as_os_str());
    s.push(suffix);
    PathBuf::from(s)
}

/// `PREFIX.index`.
pub fn index_path(prefix: &Path) -> PathBuf {
    with_suffix(prefix, ".index")
}

/// `PREFIX.data-SSSSS-of-NNNNN`.
pub fn data_path(prefix: &Path, shard: i32, num_shards: i32) -> PathBuf {
    with_suffix(prefix, &format!(".data-{shard:05}-of-{num_shards:05}"))
}

/// The bundle prefix of a SavedModel directory: `DIR/variables/variables`.
pub fn saved_model_prefix(dir: &Path) -> PathBuf {
    dir.join("variables").join("variables")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let p = Path::new("/m/variables/variables");
        assert_eq!(index_path(p), Path::new("/m/variables/variables.index"));
        assert_eq!(
            data_path(p, 1, 12),
            Path::new("/m/variables/variables.data-00001-of-00012")
        );
        assert_eq!(saved_model_prefix(Path::new("/m")), p);
    }
}

//! What a conversion is asked to do: direction, shard size, naming, workers.

use serde::Serialize;

use crate::error::{ConvertError, Result};

/// The ecosystem's default largest file (`huggingface_hub`'s `max_shard_size="5GB"`).
pub const DEFAULT_MAX_SHARD_SIZE: u64 = 5_000_000_000;

/// The format written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// Hugging Face's layout of safetensors files.
    Safetensors,
    /// A TensorFlow checkpoint (tensor bundle).
    Tf,
}

/// What the safetensors tensors are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Names {
    /// Object paths (`dense/kernel`) where the checkpoint's object graph gives a variable
    /// one of its own; the checkpoint key otherwise.
    Paths,
    /// Checkpoint keys (`dense/kernel/.ATTRIBUTES/VARIABLE_VALUE`).
    Keys,
}

impl Names {
    /// `paths` or `keys`.
    pub fn parse(text: &str) -> Result<Self> {
        match text {
            "paths" => Ok(Self::Paths),
            "keys" => Ok(Self::Keys),
            _ => Err(ConvertError::Usage(format!(
                "--names {text}: expected paths or keys"
            ))),
        }
    }
}

/// Options of a conversion.
#[derive(Debug, Clone)]
pub struct ConvertOptions {
    /// The format written; `None`: the other one than the source's.
    pub to: Option<Target>,
    /// Largest safetensors file, in bytes of tensor data (a tensor larger than that alone in
    /// its file).
    pub max_shard_size: u64,
    /// What the safetensors tensors are named.
    pub names: Names,
    /// Worker threads: each writes whole files (to safetensors) or whole data shards (to a
    /// checkpoint).
    pub jobs: usize,
    /// Plan only: report what would be written, write nothing.
    pub dry_run: bool,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        Self {
            to: None,
            max_shard_size: DEFAULT_MAX_SHARD_SIZE,
            names: Names::Paths,
            jobs: 2,
            dry_run: false,
        }
    }
}

/// A size as `huggingface_hub` reads `max_shard_size`: a number of bytes, or with a unit
/// `KB`/`MB`/`GB`/`TB` (powers of 1000) or `KiB`/`MiB`/`GiB`/`TiB` (powers of 1024), case
/// not minding, `B` optional.
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim().to_ascii_lowercase();
    let mult: f64 = match unit.as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => f64::NAN,
    };
    let n: f64 = num.parse().unwrap_or(f64::NAN);
    let bytes = (n * mult).round();
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
        return Err(ConvertError::Usage(format!(
            "--max-shard-size {text}: expected a positive size such as 5GB, 500MB or 2GiB"
        )));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_huggingface_hub_reads_them() {
        assert_eq!(parse_size("5GB").unwrap(), 5_000_000_000);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("100").unwrap(), 100);
        assert_eq!(parse_size("1.5kb").unwrap(), 1500);
        assert!(parse_size("0").is_err());
        assert!(parse_size("5 parsecs").is_err());
        assert!(parse_size("").is_err());
    }
}

//! What the TPU rewrite is asked to do: [`TpuOptions`] (cluster and metadata attributes) and
//! [`BatchOptions`] (the `BatchFunction` around the TPU call), parsed from the CLI's
//! `--batch K=V,...` text.

use bytes::Bytes;
use serde::Serialize;

use crate::error::{Result, TpuError};

/// How each chosen function is placed in its TPU cluster.
#[derive(Debug, Clone)]
pub struct TpuOptions {
    /// `TPUReplicateMetadata.num_cores_per_replica` (1: one core per replica).
    pub num_cores_per_replica: i64,
    /// `TPUReplicateMetadata.use_spmd_for_xla_partitioning` (TensorFlow's `XLAOptions`
    /// default is true, and `tpu.rewrite` writes it so).
    pub use_spmd_for_xla_partitioning: bool,
    /// One `_tpu_replicate` name for every cluster (the converter's
    /// `enable_shared_replicate_cluster_name`) instead of one per function.
    pub shared_cluster_name: bool,
    /// `TPUReplicateMetadata.topology`: a serialized `TopologyProto`, when given.
    pub topology: Option<Bytes>,
    /// `TPUReplicateMetadata.device_assignment`: the flattened core assignment, when given.
    pub device_assignment: Vec<i64>,
}

impl Default for TpuOptions {
    fn default() -> Self {
        Self {
            num_cores_per_replica: 1,
            use_spmd_for_xla_partitioning: true,
            shared_cluster_name: false,
            topology: None,
            device_assignment: Vec::new(),
        }
    }
}

/// The `BatchFunction` wrapped around a TPU call: `BatchFunction`'s attributes, and which
/// function it is for (all chosen functions when `function` is `None`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchOptions {
    /// The alias, concrete function or signature these options batch; `None`: all.
    pub function: Option<String>,
    /// `num_batch_threads` (default 1).
    pub num_batch_threads: i64,
    /// `max_batch_size` (required).
    pub max_batch_size: i64,
    /// `batch_timeout_micros` (default 0).
    pub batch_timeout_micros: i64,
    /// `allowed_batch_sizes`: increasing, the last equal to `max_batch_size` (default: any).
    pub allowed_batch_sizes: Vec<i64>,
    /// `max_enqueued_batches` (default 10, the OpDef's).
    pub max_enqueued_batches: i64,
    /// `enable_large_batch_splitting` (default true, as `tf.nondifferentiable_batch_function`
    /// sets it).
    pub enable_large_batch_splitting: bool,
}

impl BatchOptions {
    /// Parses `max_batch_size=16,batch_timeout_micros=1000,allowed_batch_sizes=4,8,16,...`.
    /// A bare number continues the list of `allowed_batch_sizes`; `function=NAME` limits the
    /// options to one function; `disable_large_batch_splitting=true` turns splitting off.
    pub fn parse(text: &str) -> Result<Self> {
        let bad = |fault: String| TpuError::BadBatchOption {
            text: text.to_string(),
            fault,
        };
        let mut out = Self {
            function: None,
            num_batch_threads: 1,
            max_batch_size: 0,
            batch_timeout_micros: 0,
            allowed_batch_sizes: Vec::new(),
            max_enqueued_batches: 10,
            enable_large_batch_splitting: true,
        };
        let mut saw_max = false;
        let mut last_key = String::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim().to_string(), v.trim()),
                None if last_key == "allowed_batch_sizes" => (last_key.clone(), item),
                None => return Err(bad(format!("{item:?} is not KEY=VALUE"))),
            };
            let int = |v: &str| {
                v.parse::<i64>()
                    .ok()
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| bad(format!("{key}: {v:?} is not a non-negative integer")))
            };
            match key.as_str() {
                "function" => out.function = Some(value.to_string()),
                "num_batch_threads" => out.num_batch_threads = int(value)?,
                "max_batch_size" => {
                    out.max_batch_size = int(value)?;
                    saw_max = true;
                }
                "batch_timeout_micros" => out.batch_timeout_micros = int(value)?,
                "max_enqueued_batches" => out.max_enqueued_batches = int(value)?,
                "allowed_batch_sizes" => out.allowed_batch_sizes.push(int(value)?),
                "disable_large_batch_splitting" => {
                    out.enable_large_batch_splitting = match value {
                        "true" | "1" => false,
                        "false" | "0" => true,
                        _ => return Err(bad(format!("{key}: {value:?} is not true or false"))),
                    }
                }
                _ => {
                    return Err(bad(format!(
                        "unknown key {key:?} (function, num_batch_threads, max_batch_size, \
                         batch_timeout_micros, allowed_batch_sizes, max_enqueued_batches, \
                         disable_large_batch_splitting)"
                    )))
                }
            }
            last_key = key;
        }
        if !saw_max || out.max_batch_size == 0 {
            return Err(bad("max_batch_size is required and must be positive".into()));
        }
        if out.num_batch_threads == 0 {
            return Err(bad("num_batch_threads must be positive".into()));
        }
        let sizes = &out.allowed_batch_sizes;
        if sizes.windows(2).any(|w| w[0] >= w[1]) || sizes.first() == Some(&0) {
            return Err(bad(
                "allowed_batch_sizes must be positive and increasing".into()
            ));
        }
        if let Some(last) = sizes.last() {
            if *last != out.max_batch_size {
                return Err(bad(format!(
                    "the last allowed batch size ({last}) must equal max_batch_size ({}), as \
                     BatchFunction requires",
                    out.max_batch_size
                )));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_defaults() {
        let b = BatchOptions::parse(
            "max_batch_size=16,batch_timeout_micros=500,allowed_batch_sizes=4,8,16,num_batch_threads=2",
        )
        .unwrap();
        assert_eq!(b.allowed_batch_sizes, vec![4, 8, 16]);
        assert_eq!(b.max_batch_size, 16);
        assert_eq!(b.batch_timeout_micros, 500);
        assert_eq!(b.num_batch_threads, 2);
        assert_eq!(b.max_enqueued_batches, 10);
        assert!(b.enable_large_batch_splitting);
        assert_eq!(b.function, None);
        let b = BatchOptions::parse("function=serve,max_batch_size=8").unwrap();
        assert_eq!(b.function.as_deref(), Some("serve"));
    }

    #[test]
    fn refuses_what_batch_function_would() {
        for bad in [
            "batch_timeout_micros=5",
            "max_batch_size=0",
            "max_batch_size=8,allowed_batch_sizes=4,2,8",
            "max_batch_size=8,allowed_batch_sizes=4",
            "max_batch_size=x",
            "max_batch_size=8,colour=red",
            "max_batch_size=8,7",
        ] {
            assert!(BatchOptions::parse(bad).is_err(), "{bad}");
        }
    }
}

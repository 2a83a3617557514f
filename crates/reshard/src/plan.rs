//! The plan: for every variable of the source, its target layout and the target slices, each
//! with the data shard that stores it, and the source bytes writing each shard reads. Made by
//! [`crate::plan()`], its reads counted by the rules the engine reads by, carried out by
//! [`crate::run`].

use serde::Serialize;
use unbound_bundle::StoredVariable;

/// Bytes read and written per block: what bounds the memory of each worker (the engine
/// reads and writes in blocks of this size, and a plan's reads are counted by it).
pub(crate) const BLOCK: usize = 8 << 20;

/// One entry a target shard stores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum TargetItem {
    /// A tensor copied as stored (whole, any dtype).
    Whole {
        /// The checkpoint key.
        key: String,
    },
    /// A box of a variable (the whole of it when it covers it).
    Slice {
        /// Index of the variable in [`Plan::variables`].
        variable: usize,
        /// Start and length per dimension.
        region: Vec<(u64, u64)>,
    },
}

/// What one target data shard stores, in order.
#[derive(Debug, Clone, Serialize)]
pub struct ShardPlan {
    /// The shard number.
    pub shard: i32,
    /// Its entries.
    pub items: Vec<TargetItem>,
    /// Bytes of data it will hold (for strings, an estimate: the source bytes).
    pub bytes: u64,
    /// Bytes of the source read to write it (see [`Plan::read_amplification`]).
    pub read: u64,
}

/// One variable placed.
#[derive(Debug, Clone, Serialize)]
pub struct VariablePlan {
    /// The checkpoint key.
    pub key: String,
    /// The object path, when known.
    pub object_path: Option<String>,
    /// dtype name.
    pub dtype: String,
    /// The full shape.
    pub shape: Vec<i64>,
    /// How the source stores it: `whole`, or its grid (`2x4`) or `slices`.
    pub from: String,
    /// The target layout's specs; `None` when it stays whole outside the mesh.
    pub to: Option<Vec<String>>,
    /// The stored source, checked.
    #[serde(skip)]
    pub stored: StoredVariable,
}

/// The whole plan.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// The target mesh.
    pub mesh: String,
    /// Number of target data shards (devices + 1).
    pub num_shards: i32,
    /// The variables placed on the mesh or kept whole, in key order.
    pub variables: Vec<VariablePlan>,
    /// The shards.
    pub shards: Vec<ShardPlan>,
    /// Source bytes read once more to check the checksums of pieces read only in part.
    pub checksum_read: u64,
}

impl Plan {
    /// Total bytes to write.
    pub fn bytes(&self) -> u64 {
        self.shards.iter().map(|s| s.bytes).sum()
    }

    /// Total source bytes read: every shard's reads and the checksum re-reads.
    pub fn read(&self) -> u64 {
        self.shards.iter().map(|s| s.read).sum::<u64>() + self.checksum_read
    }

    /// Read amplification: source bytes read per byte written (in total; 0 when nothing is
    /// written). Counted from the plan, by the rules the engine reads by.
    pub fn read_amplification(&self) -> f64 {
        ratio(self.read(), self.bytes())
    }
}

/// `read / written`, or 0 when nothing is written.
pub fn ratio(read: u64, written: u64) -> f64 {
    if written == 0 {
        0.0
    } else {
        read as f64 / written as f64
    }
}

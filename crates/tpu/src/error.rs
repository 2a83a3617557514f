//! [`TpuError`]: what can go wrong listing or changing tag-sets and rewriting a model for TPU
//! inference (or back to CPU). Every variant names the model directory and the fault.

use std::path::PathBuf;

use unbound_savedmodel::SavedModelError;

/// An error of the tag-set operations or the TPU rewrite. Nothing is written when one occurs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TpuError {
    /// The SavedModel could not be read or the result written.
    #[error(transparent)]
    Model(#[from] SavedModelError),
    /// A part of the model does not decode as what the schema says it is.
    #[error("{}: {part} is not valid protobuf: {fault}", dir.display())]
    Decode {
        /// The model directory.
        dir: PathBuf,
        /// Which part (`meta_graphs[0].graph_def.node[3]`, ...).
        part: String,
        /// The decoder's message.
        fault: String,
    },
    /// The model has no MetaGraphDef at all.
    #[error("{}: the SavedModel has no MetaGraphDef", dir.display())]
    NoMetaGraph {
        /// The model directory.
        dir: PathBuf,
    },
    /// No MetaGraphDef has the tag-set asked for.
    #[error("{}: no MetaGraphDef is tagged {{{}}} (it has {})", dir.display(), tags.join(","), describe_tag_sets(available))]
    NoSuchTagSet {
        /// The model directory.
        dir: PathBuf,
        /// The tag-set asked for.
        tags: Vec<String>,
        /// The tag-sets the model has.
        available: Vec<Vec<String>>,
    },
    /// Several MetaGraphDefs could be meant and none was named.
    #[error("{}: the SavedModel has {count} MetaGraphDefs and none is tagged {{serve}}: name one with --source-tags", dir.display())]
    AmbiguousMetaGraph {
        /// The model directory.
        dir: PathBuf,
        /// How many MetaGraphDefs it has.
        count: usize,
    },
    /// The tag-set to create already exists (loaders match tag-sets exactly, so two equal
    /// ones would make the model ambiguous).
    #[error("{}: a MetaGraphDef tagged {{{}}} already exists", dir.display(), tags.join(","))]
    TagSetExists {
        /// The model directory.
        dir: PathBuf,
        /// The tag-set.
        tags: Vec<String>,
    },
    /// A tag-set argument is empty or holds an empty or repeated tag.
    #[error("bad tag-set {text:?}: {fault}")]
    BadTagSet {
        /// The text given.
        text: String,
        /// What is wrong with it.
        fault: String,
    },
    /// `--function` named no alias, concrete function or signature of the model.
    #[error("{}: no function alias, concrete function or signature is named {name:?} ({hint})", dir.display())]
    UnknownFunction {
        /// The model directory.
        dir: PathBuf,
        /// The name given.
        name: String,
        /// What names exist.
        hint: String,
    },
    /// The chosen functions cannot be rewritten as asked.
    #[error("{}: {fault}", dir.display())]
    Unsupported {
        /// The model directory.
        dir: PathBuf,
        /// What prevents the rewrite.
        fault: String,
    },
    /// A `--batch` option is malformed.
    #[error("bad --batch {text:?}: {fault}")]
    BadBatchOption {
        /// The text given.
        text: String,
        /// What is wrong with it.
        fault: String,
    },
    /// A structural check of the rewritten graph failed: a defect of the rewrite or of the
    /// input model; nothing was written.
    #[error("{}: the rewritten MetaGraphDef {{{}}} fails a structural check: {fault}", dir.display(), tags.join(","))]
    Check {
        /// The model directory.
        dir: PathBuf,
        /// The MetaGraphDef's tags.
        tags: Vec<String>,
        /// The check that failed and where (boxed: it is large, and rare).
        fault: Box<CheckFault>,
    },
}

/// A structural check of a graph that failed ([`crate::check::check_graph`]), naming where.
/// A node is named `scope/name`, the scope being `graph` or the function that holds it; a call
/// node `scope/name (op)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckFault {
    /// Two functions of the library share a name.
    #[error("the library has two functions named {function}")]
    DuplicateFunction {
        /// The name.
        function: String,
    },
    /// A node names (as its op or in a `func` attribute) a function that does not exist.
    #[error("{node} names function {function}, which does not exist")]
    MissingFunction {
        /// The node.
        node: String,
        /// The function it names.
        function: String,
    },
    /// A `TPUReplicateMetadata` node names no cluster.
    #[error("{node} has no {attr}")]
    MetadataWithoutCluster {
        /// The node.
        node: String,
        /// The cluster attribute it lacks.
        attr: &'static str,
    },
    /// A fan-in, fan-out or compilation-result node inside the cluster it serves.
    #[error("{node} ({op}) must be outside its cluster")]
    InsideCluster {
        /// The node.
        node: String,
        /// Its op.
        op: String,
    },
    /// A node of a cluster reads or writes a variable.
    #[error(
        "{node} ({op}) touches a variable inside cluster {cluster}: variables must reach the TPU \
         computation as resource arguments"
    )]
    VariableInCluster {
        /// The node.
        node: String,
        /// Its op.
        op: String,
        /// The cluster.
        cluster: String,
    },
    /// A `TPUReplicatedInput` of a resource.
    #[error("{node} replicates a resource")]
    ReplicatedResource {
        /// The node.
        node: String,
    },
    /// A cluster without exactly one `TPUReplicateMetadata` node in its scope.
    #[error("{scope}: cluster {cluster} has {count} TPUReplicateMetadata nodes (one expected)")]
    MetadataCount {
        /// The scope.
        scope: String,
        /// The cluster.
        cluster: String,
        /// How many it has.
        count: usize,
    },
    /// A pivot or compilation-status attribute naming a cluster its scope does not have.
    #[error("{node} names cluster {cluster} in {attr}, which has no TPUReplicateMetadata here")]
    UnknownCluster {
        /// The node.
        node: String,
        /// The cluster it names.
        cluster: String,
        /// The attribute that names it.
        attr: &'static str,
    },
    /// A call without its function attribute `f`.
    #[error("{call} has no function attribute f")]
    NoFunctionAttr {
        /// The call node.
        call: String,
    },
    /// A call of a function that does not exist.
    #[error("{call} calls {callee}, which does not exist")]
    MissingCallee {
        /// The call node.
        call: String,
        /// The function it calls.
        callee: String,
    },
    /// A `BatchFunction` with an empty `Tin` or `Tout`.
    #[error("{call}: BatchFunction needs Tin and Tout of length >= 1")]
    EmptyBatchTypes {
        /// The call node.
        call: String,
    },
    /// A `BatchFunction` whose `Tin` and `Tcaptured` are not its function's arguments.
    #[error("{call}: Tin+Tcaptured {inputs:?} do not match {callee}'s arguments {arguments:?}")]
    BatchArguments {
        /// The call node.
        call: String,
        /// Its `Tin` then `Tcaptured` (`DataType` numbers).
        inputs: Vec<i32>,
        /// The function it calls.
        callee: String,
        /// The function's argument types.
        arguments: Vec<i32>,
    },
    /// A `BatchFunction` attribute that differs from the batch options asked for.
    #[error("{call}: attribute {attr} is not what was asked")]
    BatchAttr {
        /// The call node.
        call: String,
        /// The attribute.
        attr: &'static str,
    },
    /// A call whose `Tin` is not its function's argument types.
    #[error("{call}: Tin {tin:?} but {callee} takes {arguments:?}")]
    Arguments {
        /// The call node.
        call: String,
        /// Its `Tin` (`DataType` numbers).
        tin: Vec<i32>,
        /// The function it calls.
        callee: String,
        /// The function's argument types.
        arguments: Vec<i32>,
    },
    /// A call whose `Tout` is not its function's result types.
    #[error("{call}: Tout {tout:?} but {callee} returns {results:?}")]
    Results {
        /// The call node.
        call: String,
        /// Its `Tout` (`DataType` numbers).
        tout: Vec<i32>,
        /// The function it calls.
        callee: String,
        /// The function's result types.
        results: Vec<i32>,
    },
    /// A call with another number of data inputs than its types (and ordinal) need.
    #[error("{call} has {found} data inputs, {expected} expected")]
    DataInputs {
        /// The call node.
        call: String,
        /// Its data inputs.
        found: usize,
        /// The number expected.
        expected: usize,
    },
    /// A `TPUPartitionedCall` whose last data input is not a `TPUOrdinalSelector`.
    #[error("{call}: the last data input ({input}) is not a TPUOrdinalSelector")]
    NoOrdinalSelector {
        /// The call node.
        call: String,
        /// The last data input.
        input: String,
    },
    /// A function that reaches itself through calls or function attributes.
    #[error("functions form a cycle: {function} reaches {next}, which reaches {function}")]
    FunctionCycle {
        /// A function on the cycle.
        function: String,
        /// The function it reaches, which reaches it back.
        next: String,
    },
    /// A clustered node reaching a function that holds a cluster of its own.
    #[error(
        "{node} is in a TPU cluster and reaches {function}, which holds another: TPU \
         computations cannot be nested"
    )]
    Nested {
        /// The clustered node.
        node: String,
        /// The function holding another cluster.
        function: String,
    },
}

/// A node the rewrite back to CPU ([`crate::to_cpu::rewrite_to_cpu`]) cannot turn back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CpuFault {
    /// A node that consumes the data output of a TPU-only node the rewrite removes.
    #[error("{node} ({op}) uses the output of {input}, which has no CPU equivalent")]
    NoCpuEquivalent {
        /// The node, as `scope/name`.
        node: String,
        /// Its op.
        op: String,
        /// The removed node it reads.
        input: String,
    },
    /// A `TPUPartitionedCall` without its ordinal input.
    #[error("{node} (TPUPartitionedCall) has no ordinal input")]
    NoOrdinal {
        /// The node.
        node: String,
    },
    /// A replicated input or output of more than one replica.
    #[error(
        "{node} ({op}) has {replicas:?} replicas; only one-replica models turn back into \
         CPU models"
    )]
    Replicas {
        /// The node.
        node: String,
        /// Its op.
        op: String,
        /// Its replica count (`N` or `num_replicas`), when set.
        replicas: Option<i64>,
    },
}

/// `{serve}, {serve,tpu}` or `none`.
fn describe_tag_sets(sets: &[Vec<String>]) -> String {
    if sets.is_empty() {
        return "none".to_string();
    }
    sets.iter()
        .map(|s| format!("{{{}}}", s.join(",")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Results of this crate.
pub type Result<T, E = TpuError> = std::result::Result<T, E>;

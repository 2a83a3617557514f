//! Graph statistics from a wire-level `MetaGraphDef.graph_def`: node count, the ops used, the
//! library's functions. Nodes are decoded one level at a time; tensor values are never read.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashSet;

use crate::recent_bytes::RecentBytes;
use crate::{Result, SavedModelError};
use unbound_proto::fields::tensorflow::{
    attr_value, function_def, function_def_library, graph_def, meta_graph_def, name_attr_list,
    node_def, op_def, version_def,
};
use unbound_wire::codec::{read_field, RawField, WireType};
use unbound_wire::{DecodeError, Payload, WireMessage, WireValue};

use super::load_order::{load_order, NodeOps};
use super::plain_entries::PlainEntries;
use super::unmerged::UNMERGED;
use super::wire::{self, messages, string, varint};

/// What `show` reports about a graph.
pub struct GraphStats {
    /// Number of nodes.
    pub nodes: u64,
    /// `versions.producer`.
    pub producer: i64,
    /// Ops used, as TensorFlow's `ops_used_by_graph_def` computes them, sorted.
    pub ops: Vec<String>,
    /// Library function names, in order.
    pub functions: Vec<String>,
    /// Nodes in all library functions.
    pub function_nodes: u64,
    /// The library functions in the order TensorFlow's loader imports them.
    pub load_order: Vec<String>,
}

/// Statistics of the `graph_def` of `mg` (all its occurrences, as protobuf merges them).
///
/// Graphs of millions of nodes repeat a few ops: each node's fields are scanned in place
/// (no message built per node) and only distinct [`NodeOps`] are kept, per function and for
/// the graph, which is all [`ops_used`] and [`load_order`] need (both work on sets).
///
/// What `scanned` found of the chunks left unmerged in `mg` is taken instead of reading them
/// again.
pub(crate) fn graph_stats(
    mg: &WireMessage,
    file: &str,
    scanned: Option<&ScannedChunks>,
) -> Result<GraphStats> {
    let mut stats = Collected::default();
    for field in mg
        .fields
        .iter()
        .filter(|f| f.number == meta_graph_def::GRAPH_DEF)
    {
        match &field.value {
            WireValue::Bytes(p) => stats.scan_graph(&p.bytes()?, file)?,
            WireValue::Message(graph) => stats.add_graph(graph, file, scanned)?,
            // A known number of another wire type: an unknown field to protobuf C++.
            _ => {}
        }
    }
    let Collected {
        nodes,
        node_count,
        functions,
        function_nodes,
        producer,
    } = stats;
    Ok(GraphStats {
        nodes: node_count,
        producer: producer.unwrap_or(0),
        ops: ops_used(&nodes.list, &functions),
        load_order: load_order(&functions),
        functions: functions.iter().map(|(n, _)| n.clone()).collect(),
        function_nodes,
    })
}

/// Bytes scanned between two [`unbound_io::release_pages`] calls: the resident window of a
/// scan over a mapped `.pb`.
const RELEASE_STEP: usize = 16 << 20;

/// A scan over serialized bytes that gives back the pages it has passed, so that the scan of a
/// mapped model file holds a window of it, not all of it (only pages of a mapped file are
/// released; see [`unbound_io::release_pages`]).
struct Passed<'a> {
    bytes: &'a [u8],
    released: usize,
}

impl<'a> Passed<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, released: 0 }
    }

    /// Everything before `pos` has been read.
    fn at(&mut self, pos: usize) {
        if pos - self.released >= RELEASE_STEP {
            unbound_io::release_pages(&self.bytes[self.released..pos]);
            self.released = pos;
        }
    }
}

/// What `show` finds in the chunks of a graph or of its library left unmerged
/// ([`UNMERGED`]), each scanned by a reader that had its bytes decoded anyway (`verify`, as
/// it checks the chunk: issue 29, one decompression of each chunk where the check and `show`
/// made one each), by the chunk's record position in its file. A scan is taken (once) only
/// for the model merged from that same file, which verify's show check is: the position is
/// of those very bytes.
#[derive(Default)]
pub(crate) struct ScannedChunks(std::sync::Mutex<std::collections::HashMap<u64, Collected>>);

impl ScannedChunks {
    /// Scans `bytes`, the chunk at record position `position`, as the serialized fields of a
    /// message of type `ty` it merges into, and keeps what it found for `show` to take: only
    /// a graph's or a library's chunk is scanned, and one whose scan fails is not kept
    /// (`show`, reading it again, reports the fault in its words).
    pub(crate) fn scan(&self, position: u64, ty: &str, bytes: &bytes::Bytes) {
        let scan = match ty {
            "tensorflow.GraphDef" => Collected::scan_graph,
            "tensorflow.FunctionDefLibrary" => Collected::scan_library,
            _ => return,
        };
        let mut collected = Collected::default();
        if scan(&mut collected, bytes, "").is_ok() {
            if let Ok(mut kept) = self.0.lock() {
                kept.insert(position, collected);
            }
        }
    }

    /// How many chunks' scans are kept, not taken yet.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.lock().map_or(0, |kept| kept.len())
    }

    /// What [`ScannedChunks::scan`] found of the chunk at `position`, handed over once.
    fn take(&self, position: u64) -> Option<Collected> {
        self.0.lock().ok()?.remove(&position)
    }
}

/// What [`graph_stats`] gathers over every occurrence of `graph_def`.
#[derive(Default)]
struct Collected {
    nodes: Distinct,
    node_count: u64,
    functions: Vec<(String, Vec<NodeOps>)>,
    function_nodes: u64,
    /// `versions.producer` of the last `versions` met, if any.
    producer: Option<i64>,
}

impl Collected {
    /// A serialized GraphDef, scanned in place: no field list is built for its nodes (a
    /// million-node graph would need 48 MB for it), and the pages passed are released.
    fn scan_graph(&mut self, graph: &bytes::Bytes, file: &str) -> Result<()> {
        let mut passed = Passed::new(graph);
        for field in raw_fields(graph) {
            let field = field.map_err(|e| SavedModelError::malformed(file, e))?;
            let value = &graph[field.start..field.end];
            let is_len = field.wire_type == WireType::Len;
            match field.number {
                graph_def::NODE if is_len => {
                    self.node_count += 1;
                    self.nodes.add_serialized(value, file, false)?;
                }
                // A known number of another wire type: an unknown field to protobuf C++.
                graph_def::NODE => {}
                graph_def::LIBRARY if is_len => {
                    self.scan_library(&graph.slice(field.start..field.end), file)?
                }
                graph_def::VERSIONS if is_len => {
                    let versions = WireMessage::parse(&graph.slice(field.start..field.end), None)
                        .map_err(|e| SavedModelError::malformed(file, e))?;
                    self.producer = Some(varint(&versions, version_def::PRODUCER) as i64);
                }
                _ => {}
            }
            passed.at(field.end);
        }
        Ok(())
    }

    /// A serialized FunctionDefLibrary, one function at a time.
    fn scan_library(&mut self, library: &bytes::Bytes, file: &str) -> Result<()> {
        let mut passed = Passed::new(library);
        for field in raw_fields(library) {
            let field = field.map_err(|e| SavedModelError::malformed(file, e))?;
            if field.number != function_def_library::FUNCTION {
                continue;
            }
            if field.wire_type != WireType::Len {
                // An unknown field to protobuf C++.
                continue;
            }
            let function = WireMessage::parse(&library.slice(field.start..field.end), None)
                .map_err(|e| SavedModelError::malformed(file, e))?;
            self.add_function(&function, file)?;
            passed.at(field.end);
        }
        Ok(())
    }

    /// A GraphDef already decoded one level (from a `.cpb`'s chunks), its fields taken in
    /// order; the chunks `show` left unmerged in it ([`UNMERGED`]) are scanned where they
    /// stand, as their fields would have been.
    fn add_graph(
        &mut self,
        graph: &WireMessage,
        file: &str,
        scanned: Option<&ScannedChunks>,
    ) -> Result<()> {
        let mut left = summarize_unmerged(graph, Self::scan_graph, file, scanned)?.into_iter();
        // With nothing left unmerged, nodes are the only fields that add nodes: they are
        // taken apart from the others, on every core.
        let nodes_apart = left.len() == 0;
        if nodes_apart {
            self.add_nodes(graph, file)?;
        }
        // What the library's chunks left unmerged hold: their functions come after those of
        // every `library` of the graph, where the merge puts them (`unmerged.rs`).
        let mut library_chunks = Vec::new();
        for field in &graph.fields {
            match field.number {
                graph_def::NODE if nodes_apart => {}
                graph_def::NODE => {
                    self.node_count += 1;
                    self.nodes.add(&field.value, file, false)?;
                }
                graph_def::LIBRARY => match &field.value {
                    WireValue::Message(library) => {
                        self.add_library(library, file, scanned, &mut library_chunks)?
                    }
                    WireValue::Bytes(p) => self.scan_library(&p.bytes()?, file)?,
                    // A known number of another wire type: an unknown field to protobuf C++.
                    _ => {}
                },
                graph_def::VERSIONS => {
                    let versions = match &field.value {
                        WireValue::Message(versions) => Cow::Borrowed(versions),
                        WireValue::Bytes(p) => Cow::Owned(wire::parse(p, file)?),
                        _ => continue,
                    };
                    self.producer = Some(varint(&versions, version_def::PRODUCER) as i64);
                }
                UNMERGED => self.absorb(left.next().expect("one summary per chunk left")),
                _ => {}
            }
        }
        for summary in library_chunks {
            self.absorb(summary);
        }
        Ok(())
    }

    /// The nodes of `graph`, a GraphDef decoded one level, in stretches on as many threads as
    /// the machine has, each stretch gathered on its own and absorbed in order (the same as
    /// gathering them in one go; the first fault in order is the error). A graph of millions
    /// of nodes merged by `verify` is shown this way while its schema is checked: one core
    /// took 1.5 s of a merge of the non-canonical 3M-node `.cpb` (issue 29).
    fn add_nodes(&mut self, graph: &WireMessage, file: &str) -> Result<()> {
        let nodes = values_of(graph, graph_def::NODE);
        let gathered = gathered_in_stretches(&nodes, NODES_PER_STRETCH, |collected, node| {
            collected.node_count += 1;
            collected.nodes.add(node, file, false)
        });
        for stretch in gathered {
            self.absorb(stretch?);
        }
        Ok(())
    }

    /// A FunctionDefLibrary already decoded one level, its functions taken in order; what its
    /// chunks left unmerged hold is added to `chunks`, for the graph to take after the
    /// functions of all its libraries.
    fn add_library(
        &mut self,
        library: &WireMessage,
        file: &str,
        scanned: Option<&ScannedChunks>,
        chunks: &mut Vec<Collected>,
    ) -> Result<()> {
        chunks.extend(summarize_unmerged(
            library,
            Self::scan_library,
            file,
            scanned,
        )?);
        // Functions in stretches on every core, as the graph's nodes (`add_nodes`).
        let functions = values_of(library, function_def_library::FUNCTION);
        let gathered =
            gathered_in_stretches(&functions, FUNCTIONS_PER_STRETCH, |collected, function| {
                match function {
                    WireValue::Message(function) => collected.add_function(function, file),
                    WireValue::Bytes(p) => collected.add_function(&wire::parse(p, file)?, file),
                    // A known number of another wire type: an unknown field to protobuf C++.
                    _ => Ok(()),
                }
            });
        for stretch in gathered {
            let stretch = stretch?;
            self.functions.extend(stretch.functions);
            self.function_nodes += stretch.function_nodes;
        }
        Ok(())
    }

    /// Adds what `other`, gathered over the fields that follow this one's, found: the same as
    /// gathering over all of them in one go.
    fn absorb(&mut self, other: Collected) {
        self.node_count += other.node_count;
        for ops in other.nodes.list {
            self.nodes.insert(ops);
        }
        self.functions.extend(other.functions);
        self.function_nodes += other.function_nodes;
        if other.producer.is_some() {
            self.producer = other.producer;
        }
    }

    fn add_function(&mut self, function: &WireMessage, file: &str) -> Result<()> {
        let mut name = String::new();
        for sig in messages(function, function_def::SIGNATURE, file) {
            name = string(&*sig?, op_def::NAME)?;
        }
        let mut body = Distinct::default();
        for field in function
            .fields
            .iter()
            .filter(|f| f.number == function_def::NODE_DEF)
        {
            self.function_nodes += 1;
            body.add(&field.value, file, true)?;
        }
        self.functions.push((name, body.list));
        Ok(())
    }
}

/// The values of the fields numbered `number` of `message`, in order.
fn values_of(message: &WireMessage, number: u32) -> Vec<&WireValue> {
    message
        .fields
        .iter()
        .filter(|f| f.number == number)
        .map(|f| &f.value)
        .collect()
}

/// `items` cut into stretches of at least `min_per` (about four per thread), each gathered
/// into a [`Collected`] of its own by `gather` on as many threads as the machine has, in
/// order: absorbed in that order, they give what gathering all in one go gives, and the first
/// fault in order is the error.
fn gathered_in_stretches<T: Sync>(
    items: &[T],
    min_per: usize,
    gather: impl Fn(&mut Collected, &T) -> Result<()> + Sync,
) -> Vec<Result<Collected>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per = items.len().div_ceil(threads * 4).max(min_per);
    let stretches: Vec<&[T]> = items.chunks(per).collect();
    unbound_io::each_in_order(&stretches, threads, |stretch| {
        let mut collected = Collected::default();
        for item in stretch.iter() {
            gather(&mut collected, item)?;
        }
        Ok(collected)
    })
}

/// The fewest nodes a stretch of [`Collected::add_nodes`] holds: below it, a thread costs
/// more than it saves.
const NODES_PER_STRETCH: usize = 1 << 16;

/// The fewest functions a stretch of [`Collected::add_library`] holds.
const FUNCTIONS_PER_STRETCH: usize = 256;

/// What each chunk left unmerged in `message` ([`UNMERGED`] fields) holds, in their order,
/// each read and scanned with `scan` (as serialized fields of `message`'s type) on as many
/// threads as the machine has, one chunk per thread at a time, then let go: memory holds a
/// chunk per thread, never the graph. The first chunk that fails, in order, is the error.
/// What `scanned` found of a chunk is taken instead of reading it.
fn summarize_unmerged(
    message: &WireMessage,
    scan: fn(&mut Collected, &bytes::Bytes, &str) -> Result<()>,
    file: &str,
    scanned: Option<&ScannedChunks>,
) -> Result<Vec<Collected>> {
    let left: Vec<&Payload> = message
        .fields
        .iter()
        .filter(|f| f.number == UNMERGED)
        .filter_map(|f| match &f.value {
            WireValue::Bytes(p) => Some(p),
            _ => None,
        })
        .collect();
    let summarize = |payload: &Payload| -> Result<Collected> {
        let found = match (scanned, payload) {
            (Some(scanned), Payload::Record(record)) => scanned.take(record.position),
            _ => None,
        };
        if let Some(found) = found {
            return Ok(found);
        }
        let mut collected = Collected::default();
        scan(&mut collected, &payload.bytes()?, file)?;
        Ok(collected)
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    unbound_io::each_in_order(&left, threads, |payload| summarize(payload))
        .into_iter()
        .collect()
}

/// The distinct [`NodeOps`] of a list of nodes, in first-seen order.
#[derive(Default)]
struct Distinct {
    /// Ops of nodes that name no function (most nodes), to skip repeats without allocating.
    plain: FxHashSet<Vec<u8>>,
    /// Attribute entries found naming no function, skipped when met again.
    plain_entries: PlainEntries,
    /// The last few ops in `plain`, found without hashing (a graph repeats a few ops).
    recent_plain: RecentBytes<(), (), 32>,
    /// Every distinct entry.
    seen: FxHashSet<NodeOps>,
    list: Vec<NodeOps>,
}

impl Distinct {
    /// Adds the node `value` holds (serialized bytes, scanned in place, or an expanded
    /// message).
    fn add(&mut self, value: &WireValue, file: &str, all_funcs: bool) -> Result<()> {
        let ops = match value {
            // Borrowed, not cloned: a clone is a count update on the chunk every node shares,
            // which other threads are updating too.
            WireValue::Bytes(Payload::Inline(b)) => return self.add_serialized(b, file, all_funcs),
            WireValue::Bytes(p) => return self.add_serialized(&p.bytes()?, file, all_funcs),
            WireValue::Message(m) => node_ops(m, file, all_funcs)?,
            // A known number of another wire type: an unknown field to protobuf C++.
            _ => return Ok(()),
        };
        self.insert(ops);
        Ok(())
    }

    /// Adds a serialized node, scanned in place.
    fn add_serialized(&mut self, bytes: &[u8], file: &str, all_funcs: bool) -> Result<()> {
        let ops = {
            {
                match scan_node(bytes, all_funcs, &mut self.plain_entries) {
                    Ok(Scanned::Plain(op)) => {
                        if self.recent_plain.find((), op).is_some() {
                            return Ok(());
                        }
                        if self.plain.contains(op) {
                            self.recent_plain.remember((), op, ());
                            return Ok(());
                        }
                        self.plain.insert(op.to_vec());
                        NodeOps {
                            op: String::from_utf8_lossy(op).into_owned(),
                            called: None,
                            funcs: Vec::new(),
                        }
                    }
                    Ok(Scanned::Full(ops)) => ops,
                    Err(error) => return Err(SavedModelError::malformed(file, error)),
                }
            }
        };
        self.insert(ops);
        Ok(())
    }

    fn insert(&mut self, ops: NodeOps) {
        if self.seen.insert(ops.clone()) {
            self.list.push(ops);
        }
    }
}

/// What a scan of a serialized node found.
enum Scanned<'a> {
    /// A node that names no function: its op.
    Plain(&'a [u8]),
    /// A node that does.
    Full(NodeOps),
}

/// The fields of a serialized message, in order.
fn raw_fields(buf: &[u8]) -> impl Iterator<Item = std::result::Result<RawField, DecodeError>> + '_ {
    let mut pos = 0;
    std::iter::from_fn(move || (pos < buf.len()).then(|| read_field(buf, &mut pos)))
}

/// The last length-delimited field `number` of `buf`, as protobuf reads a singular field.
fn last_len(buf: &[u8], number: u32) -> std::result::Result<Option<&[u8]>, DecodeError> {
    let mut last = None;
    for f in raw_fields(buf) {
        let f = f?;
        if f.number == number && f.wire_type == WireType::Len {
            last = Some(&buf[f.start..f.end]);
        }
    }
    Ok(last)
}

/// [`node_ops`] on a serialized node, scanning it in place. Attribute entries equal to one
/// `plain` holds are skipped (they name no function); those found naming none with
/// `all_funcs` (the wider search, so none without it either) are added there.
fn scan_node<'a>(
    node: &'a [u8],
    all_funcs: bool,
    plain: &mut PlainEntries,
) -> std::result::Result<Scanned<'a>, DecodeError> {
    let op = last_len(node, node_def::OP)?.unwrap_or_default();
    let partitioned = op == b"PartitionedCall" || op == b"StatefulPartitionedCall";
    let mut called = None;
    let mut funcs = Vec::new();
    if partitioned || all_funcs {
        let name_of = |func: &[u8]| -> std::result::Result<String, DecodeError> {
            let name = last_len(func, name_attr_list::NAME)?.unwrap_or_default();
            Ok(String::from_utf8_lossy(name).into_owned())
        };
        for entry in raw_fields(node) {
            let entry = entry?;
            if entry.number != node_def::ATTR || entry.wire_type != WireType::Len {
                continue;
            }
            let entry = &node[entry.start..entry.end];
            if plain.find((), entry).is_some() {
                continue;
            }
            let found_before = funcs.len();
            let is_f = last_len(entry, node_def::attr_entry::KEY)? == Some(b"f".as_slice());
            for value in raw_fields(entry) {
                let value = value?;
                if value.number != node_def::attr_entry::VALUE || value.wire_type != WireType::Len {
                    continue;
                }
                let value = &entry[value.start..value.end];
                for f in raw_fields(value) {
                    let f = f?;
                    if f.wire_type != WireType::Len {
                        continue;
                    }
                    let inner = &value[f.start..f.end];
                    if f.number == attr_value::FUNC {
                        let name = name_of(inner)?;
                        if partitioned && is_f {
                            called = Some(name.clone());
                        }
                        funcs.push(name);
                    } else if f.number == attr_value::LIST && all_funcs {
                        for g in raw_fields(inner) {
                            let g = g?;
                            if g.number == attr_value::list_value::FUNC
                                && g.wire_type == WireType::Len
                            {
                                funcs.push(name_of(&inner[g.start..g.end])?);
                            }
                        }
                    }
                }
            }
            if all_funcs && funcs.len() == found_before {
                plain.remember((), entry, ());
            }
        }
    }
    if called.is_none() && funcs.is_empty() {
        return Ok(Scanned::Plain(op));
    }
    Ok(Scanned::Full(NodeOps {
        op: String::from_utf8_lossy(op).into_owned(),
        called,
        funcs,
    }))
}

/// TensorFlow's `meta_graph.ops_used_by_graph_def`: the ops of the graph's nodes and of the
/// functions they reach (by op name, or by `attr["f"]` of a partitioned call), function names
/// excluded.
fn ops_used(nodes: &[NodeOps], functions: &[(String, Vec<NodeOps>)]) -> Vec<String> {
    let by_name: BTreeMap<&str, &[NodeOps]> = functions
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    let mut used: BTreeSet<&str> = BTreeSet::new();
    let mut pending: Vec<&[NodeOps]> = vec![nodes];
    while let Some(list) = pending.pop() {
        for n in list {
            for op in std::iter::once(n.op.as_str()).chain(n.called.as_deref()) {
                if used.insert(op) {
                    if let Some(body) = by_name.get(op) {
                        pending.push(body);
                    }
                }
            }
        }
    }
    used.into_iter()
        .filter(|op| !by_name.contains_key(op))
        .map(str::to_string)
        .collect()
}

/// The op of a node, the function a partitioned call names, and with `all_funcs` every
/// function its attributes name.
fn node_ops(node: &WireMessage, file: &str, all_funcs: bool) -> Result<NodeOps> {
    let op = string(node, node_def::OP)?;
    let partitioned = op == "PartitionedCall" || op == "StatefulPartitionedCall";
    let mut called = None;
    let mut funcs = Vec::new();
    if partitioned || all_funcs {
        for entry in messages(node, node_def::ATTR, file) {
            let entry = entry?;
            let is_f = string(&entry, node_def::attr_entry::KEY)? == "f";
            for value in messages(&entry, node_def::attr_entry::VALUE, file) {
                let value = value?;
                for func in messages(&value, attr_value::FUNC, file) {
                    let name = string(&*func?, name_attr_list::NAME)?;
                    if partitioned && is_f {
                        called = Some(name.clone());
                    }
                    funcs.push(name);
                }
                if all_funcs {
                    for list in messages(&value, attr_value::LIST, file) {
                        for func in messages(&*list?, attr_value::list_value::FUNC, file) {
                            funcs.push(string(&*func?, name_attr_list::NAME)?);
                        }
                    }
                }
            }
        }
    }
    Ok(NodeOps { op, called, funcs })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;
    use unbound_proto::tensorflow::{attr_value, AttrValue, NameAttrList, NodeDef};

    fn node(op: &str, attrs: &[(&str, AttrValue)]) -> Vec<u8> {
        NodeDef {
            name: "n".into(),
            op: op.into(),
            attr: attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            ..Default::default()
        }
        .encode_to_vec()
    }

    fn funcs(scanned: Scanned<'_>) -> Vec<String> {
        match scanned {
            Scanned::Plain(_) => Vec::new(),
            Scanned::Full(ops) => ops.funcs,
        }
    }

    /// Entries remembered as naming no function are skipped on later nodes; an entry that
    /// names one is never remembered, so every node repeating it still names the function.
    #[test]
    fn a_repeated_entry_that_names_a_function_is_found_on_every_node() {
        let dtype = AttrValue {
            value: Some(attr_value::Value::Type(1)),
        };
        let func = AttrValue {
            value: Some(attr_value::Value::Func(NameAttrList {
                name: "inner".into(),
                attr: Default::default(),
            })),
        };
        let both = node("Op", &[("T", dtype.clone()), ("g", func)]);
        let plain_only = node("Op", &[("T", dtype)]);
        let mut plain = PlainEntries::default();
        for _ in 0..3 {
            assert_eq!(
                funcs(scan_node(&both, true, &mut plain).unwrap()),
                ["inner"]
            );
            assert!(funcs(scan_node(&plain_only, true, &mut plain).unwrap()).is_empty());
        }
    }

    /// A graph held decoded one level (as `verify` merges a `.cpb`) is gathered in stretches
    /// on every core: the same statistics as the scan of its serialized bytes in one go, on
    /// a graph past several stretches of nodes and of library functions, whose ops and called
    /// functions first appear in later stretches too.
    #[test]
    fn a_held_graph_gathered_on_threads_equals_its_scan_in_one_go() {
        use unbound_proto::tensorflow::{FunctionDef, FunctionDefLibrary, GraphDef, OpDef};
        let call = |name: String| AttrValue {
            value: Some(attr_value::Value::Func(NameAttrList {
                name,
                attr: Default::default(),
            })),
        };
        let nodes = 3 * NODES_PER_STRETCH + 123;
        let functions = 3 * FUNCTIONS_PER_STRETCH + 7;
        let graph = GraphDef {
            node: (0..nodes)
                .map(|i| {
                    let op = format!("Op{}", i * 7 / NODES_PER_STRETCH);
                    let attrs: Vec<(&str, AttrValue)> = match i % 50_000 {
                        0 => vec![("f", call(format!("fn_{}", i % functions)))],
                        _ => Vec::new(),
                    };
                    NodeDef::decode(&node(&op, &attrs)[..]).unwrap()
                })
                .collect(),
            library: Some(FunctionDefLibrary {
                function: (0..functions)
                    .map(|i| FunctionDef {
                        signature: Some(OpDef {
                            name: format!("fn_{i}"),
                            ..Default::default()
                        }),
                        node_def: (0..3)
                            .map(|k| {
                                let op = format!("Body{}", (i * 3 + k) % 500);
                                NodeDef::decode(&node(&op, &[])[..]).unwrap()
                            })
                            .collect(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
        .encode_to_vec();
        let graph = bytes::Bytes::from(graph);
        let desc = unbound_proto::descriptor_pool()
            .get_message_by_name("tensorflow.GraphDef")
            .unwrap();
        // Held: the graph and its library decoded one level, nodes and functions as slices.
        let mut held = WireMessage::parse(&graph, Some(desc)).unwrap();
        for field in &mut held.fields {
            if field.number == graph_def::LIBRARY {
                if let WireValue::Bytes(p) = &field.value {
                    field.value = WireValue::Message(wire::parse(p, "test").unwrap());
                }
            }
        }
        let stats = |graph: WireValue| {
            let meta_graph = WireMessage {
                descriptor: None,
                fields: vec![unbound_wire::WireField {
                    number: meta_graph_def::GRAPH_DEF,
                    value: graph,
                }],
            };
            graph_stats(&meta_graph, "test", None).unwrap()
        };
        let threaded = stats(WireValue::Message(held));
        let scanned = stats(WireValue::Bytes(Payload::Inline(graph)));
        assert_eq!(threaded.nodes, nodes as u64);
        assert_eq!(threaded.nodes, scanned.nodes);
        assert_eq!(threaded.ops, scanned.ops);
        assert!(threaded.ops.len() >= 22, "{}", threaded.ops.len());
        assert_eq!(threaded.functions, scanned.functions);
        assert_eq!(threaded.functions.len(), functions);
        assert_eq!(threaded.function_nodes, scanned.function_nodes);
        assert_eq!(threaded.load_order, scanned.load_order);
    }
}

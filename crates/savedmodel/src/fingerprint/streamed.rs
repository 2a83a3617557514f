//! The canonical form of a serialized model that is not in canonical form, by the encoder of
//! `unbound_canonical`: its bytes are read where they lie, with no message built (issue 29: the
//! general path, which lists every field of every message, made a non-canonical model ten
//! times slower to fingerprint than a canonical one). The fingerprint is then that of the
//! canonical form, hashed as a canonical model is.

use std::sync::OnceLock;

use std::collections::HashMap;
use std::sync::Mutex;

use prost_reflect::MessageDescriptor;
use unbound_canonical::{CanonicalError, Schema};
use unbound_proto::fields::tensorflow::graph_def;
use unbound_wire::codec::{read_field, WireType};

use super::canonical::Source;
use super::farmhash;
use super::{model_fault, Result};
use crate::dir::message_descriptor as descriptor;
use crate::SavedModelError;

/// The compiled schema of `tensorflow.SavedModel` (and every type it reaches), built once.
fn schema() -> Result<&'static Schema> {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    if let Some(schema) = SCHEMA.get() {
        return Ok(schema);
    }
    let desc = descriptor("tensorflow.SavedModel")?;
    Ok(SCHEMA.get_or_init(|| Schema::new(&desc)))
}

/// The error of a fault the encoder found, named as the general path names it.
fn encoding_error(error: CanonicalError) -> SavedModelError {
    match error {
        CanonicalError::Malformed { type_name, error } => {
            SavedModelError::malformed(format!("{type_name} being fingerprinted"), error)
        }
        CanonicalError::TooDeep { type_name, limit } => SavedModelError::TooDeep {
            source_name: format!("{type_name} being fingerprinted"),
            limit,
        },
        error @ (CanonicalError::NotRepeatedMessage { .. } | CanonicalError::NotUtf8 { .. }) => {
            model_fault(error.to_string())
        }
    }
}

/// The deterministic serialization of the `SavedModel` serialized in `bytes`, in memory (a
/// buffer of its size: a `.pb` is under 2 GiB), made in one pass on every core. Refuses what
/// protobuf C++ refuses to parse, also in what the canonical form leaves out
/// ([`unbound_canonical::encode_to_vec_validated`]): what it returns is the canonical form
/// of a model TensorFlow parses, and it parses too, with no second check
/// ([`crate::SavedModel::canonicalized`]).
pub fn canonical_model(bytes: &[u8]) -> Result<Vec<u8>> {
    let schema = schema()?;
    unbound_canonical::encode_to_vec_validated(schema, schema.root(), &[bytes])
        .map_err(encoding_error)
}

/// Inputs up to this size are encoded in memory, in one pass on every core; larger ones in two
/// streaming passes (memory: a few buffers).
const IN_MEMORY_UP_TO: usize = 1 << 30;

/// FarmHash `Fingerprint64` of the deterministic serialization of the message of type `desc`
/// made of `sources`: slices are read where they lie, a split's chunk taken as the pieces it
/// is written as when each is whole fields, and a built message written out first
/// (losslessly: as the bytes it was built from). `None` when a chunk's pieces cut a field (a
/// large value written as a piece of its own after its key): the byte encoder reads whole
/// fields only, so the caller takes the general encoder.
pub fn fingerprint64(sources: &[Source<'_>], desc: &MessageDescriptor) -> Result<Option<u64>> {
    let Some(written) = parts_of(sources)? else {
        return Ok(None);
    };
    let schema = schema_of(desc)?;
    let parts = parts(sources, &written);
    let input: usize = parts.iter().map(|p| p.len()).sum();
    let root = schema.root();
    if input <= IN_MEMORY_UP_TO {
        let bytes =
            unbound_canonical::encode_to_vec(&schema, root, &parts).map_err(encoding_error)?;
        return Ok(Some(farmhash::fingerprint64(&bytes)));
    }
    unbound_canonical::fingerprint64(&schema, root, &parts)
        .map(Some)
        .map_err(encoding_error)
}

/// FarmHash `Fingerprint64` of the deterministic serialization of the `GraphDef` made of
/// `base` (its fields from the model's own chunk) and then the serialized GraphDef fields of
/// each chunk of `chunks`, in order, each read by `read` when its turn comes; with the
/// `Fingerprint64` of each chunk's bytes, which `HashFields` needs too. `None` when a source of
/// `base` is made of pieces that cut a field (as [`fingerprint64`]).
///
/// A `.cpb`'s graph of millions of nodes was held whole for its hash: its chunks decoded, and
/// its canonical form made in memory (1.8 GB for the 3M-node `.cpb`; issue 29 asks a reading
/// command for half the decoded model at most). The canonical form of a `GraphDef` is its
/// nodes (field 1, the lowest number) in the order read, each in canonical form, then the
/// canonical form of the message its other fields make. So the nodes are encoded a chunk at
/// a time and hashed ([`unbound_canonical::encode_elements_to_vec`]), every other field is
/// set aside as read (a graph's library, versions, unknown fields: small next to its nodes),
/// and that message is encoded last. Memory: the chunk being encoded and the next one, which
/// a second thread reads meanwhile, the nodes' encoding, and the fields set aside.
pub fn chunked_graph_fingerprint64(
    base: &[Source<'_>],
    chunks: &[u64],
    read: &(dyn Fn(u64) -> Result<bytes::Bytes> + Sync),
) -> Result<Option<GraphHash>> {
    let schema = graph_schema()?;
    let Some((graph, prints)) = read_graph(&schema, Take::Both, base, chunks, read)? else {
        return Ok(None);
    };
    Ok(Some(GraphHash {
        hash: graph.finish()?,
        prints,
    }))
}

/// [`chunked_graph_fingerprint64`] but for the nodes, for a caller that has their canonical
/// form already (`merge`, which makes the whole model's: `pending.rs`): the canonical form of
/// the graph's other fields, and the prints of the chunks. The nodes are not encoded. What
/// `learnt` knows of a chunk (its print and its fields other than nodes, set apart as a merge
/// streamed it: `shared_cpb.rs`) is taken; any other chunk is read, on every core (a few at a
/// time: each is scanned, its other fields copied, and let go).
pub fn chunked_graph_others(
    base: &[Source<'_>],
    chunks: &[u64],
    learnt: &(dyn Fn(u64) -> Option<(u64, Vec<u8>)> + Sync),
    read: &(dyn Fn(u64) -> Result<bytes::Bytes> + Sync),
) -> Result<Option<GraphOthers>> {
    let schema = graph_schema()?;
    let Some(written) = parts_of(base)? else {
        return Ok(None);
    };
    let mut graph = GraphInParts::new(&schema, Take::Others)?;
    for part in parts(base, &written) {
        graph.take(part, None)?;
    }
    let order: Vec<(usize, u64)> = chunks.iter().copied().enumerate().collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut found = unbound_io::run_until_error(&order, threads, |&(at, index), _| {
        if let Some((print, others)) = learnt(index) {
            return Ok((at, index, print, others));
        }
        let bytes = read(index)?;
        let mut chunk = GraphInParts::new(&schema, Take::Others)?;
        chunk.take(&bytes, None)?;
        Ok::<_, SavedModelError>((at, index, farmhash::fingerprint64(&bytes), chunk.others))
    })?;
    found.sort_unstable_by_key(|&(at, ..)| at);
    let mut prints = Vec::with_capacity(found.len());
    for (_, index, print, others) in found {
        prints.push((index, print));
        graph.others.extend_from_slice(&others);
    }
    Ok(Some(GraphOthers {
        canonical: graph.others_canonical()?,
        prints,
    }))
}

/// `Fingerprint64` of the canonical form of a `GraphDef`'s `nodes` (each a serialized
/// `NodeDef`, in order) followed by `others` (the canonical form of its other fields:
/// [`chunked_graph_others`]). The nodes are taken a batch at a time: a batch of canonical
/// nodes (the fast check of `already_canonical.rs`, node by node) is hashed as it lies, any
/// other encoded on every core, hashed and let go: memory holds one batch's encoding.
pub fn graph_nodes_then(nodes: &[bytes::Bytes], others: &[u8]) -> Result<u64> {
    let schema = graph_schema()?;
    let node_desc = descriptor("tensorflow.NodeDef")?;
    let mut check = super::canonical::Encoder::new();
    let mut hash = farmhash::Fingerprint64::new();
    let mut start = 0;
    while start < nodes.len() {
        let mut end = start;
        let mut bytes = 0;
        while end < nodes.len() && bytes < NODE_BATCH {
            bytes += nodes[end].len();
            end += 1;
        }
        let batch = &nodes[start..end];
        if batch
            .iter()
            .all(|node| check.is_canonical(node, &node_desc))
        {
            for node in batch {
                let (head, n) =
                    unbound_wire::codec::len_field_head(graph_def::NODE, node.len() as u64);
                hash.update(&head[..n]);
                hash.update(node);
            }
        } else {
            let slices: Vec<&[u8]> = batch.iter().map(|node| &node[..]).collect();
            let encoded = unbound_canonical::encode_elements_to_vec(
                &schema,
                schema.root(),
                graph_def::NODE,
                &slices,
            )
            .map_err(encoding_error)?;
            hash.update(&encoded);
        }
        start = end;
    }
    hash.update(others);
    Ok(hash.finish())
}

/// Bytes of nodes [`graph_nodes_then`] encodes at a time.
const NODE_BATCH: usize = 32 << 20;

/// The compiled schema of `tensorflow.GraphDef`.
fn graph_schema() -> Result<std::sync::Arc<Schema>> {
    schema_of(&descriptor("tensorflow.GraphDef")?)
}

/// A graph [`read_graph`] read, and the `Fingerprint64` of each of its chunks by index.
type GraphRead<'s> = (GraphInParts<'s>, Vec<(u64, u64)>);

/// Reads the graph made of `base` and then of each chunk of `chunks`, read by `read`, into a
/// [`GraphInParts`] taking `take`; with the `Fingerprint64` of each chunk. `None` when a
/// source of `base` is made of pieces that cut a field.
fn read_graph<'s>(
    schema: &'s Schema,
    take: Take,
    base: &[Source<'_>],
    chunks: &[u64],
    read: &(dyn Fn(u64) -> Result<bytes::Bytes> + Sync),
) -> Result<Option<GraphRead<'s>>> {
    let Some(written) = parts_of(base)? else {
        return Ok(None);
    };
    let mut graph = GraphInParts::new(schema, take)?;
    for part in parts(base, &written) {
        graph.take(part, None)?;
    }
    let mut prints = Vec::with_capacity(chunks.len());
    std::thread::scope(|s| -> Result<()> {
        // Each chunk read on a thread of its own while the one before is encoded, and handed
        // over once that is done: two chunks are held at most.
        let (sender, received) = std::sync::mpsc::sync_channel::<Result<(u64, bytes::Bytes)>>(0);
        s.spawn(move || {
            for &index in chunks {
                let chunk = read(index).map(|bytes| (index, bytes));
                let failed = chunk.is_err();
                if sender.send(chunk).is_err() || failed {
                    return;
                }
            }
        });
        for chunk in received {
            let (index, bytes) = chunk?;
            prints.push((index, farmhash::fingerprint64(&bytes)));
            graph.take(&bytes, Some(&bytes))?;
        }
        Ok(())
    })?;
    if prints.len() != chunks.len() {
        return Err(model_fault("a chunk of the graph was not read".to_string()));
    }
    Ok(Some((graph, prints)))
}

/// What [`chunked_graph_others`] finds.
pub struct GraphOthers {
    /// The canonical form of the message the graph's fields other than nodes make.
    pub canonical: Vec<u8>,
    /// The `Fingerprint64` of each chunk's bytes, by chunk index.
    pub prints: Vec<(u64, u64)>,
}

/// Which of a graph's fields a [`GraphInParts`] takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Take {
    /// The nodes, hashed, and the others, set aside.
    Both,
    /// The other fields only.
    Others,
}

/// What [`chunked_graph_fingerprint64`] finds.
pub struct GraphHash {
    /// The graph's `Fingerprint64`.
    pub hash: u64,
    /// The `Fingerprint64` of each chunk's bytes, by chunk index.
    pub prints: Vec<(u64, u64)>,
}

/// How many of a part's first nodes [`GraphInParts::first_nodes_canonical`] checks.
const PROBED_NODES: usize = 16;

/// A `GraphDef` read part by part ([`chunked_graph_fingerprint64`]): its nodes encoded and
/// hashed as they come, its other fields set aside.
struct GraphInParts<'s> {
    schema: &'s Schema,
    take: Take,
    hash: farmhash::Fingerprint64,
    /// The fields other than nodes, as read (keys included).
    others: Vec<u8>,
    /// The fast check of canonical bytes (`already_canonical.rs`), and the type it checks.
    check: super::canonical::Encoder,
    desc: MessageDescriptor,
}

impl<'s> GraphInParts<'s> {
    fn new(schema: &'s Schema, take: Take) -> Result<Self> {
        Ok(Self {
            schema,
            take,
            hash: farmhash::Fingerprint64::new(),
            others: Vec::new(),
            check: super::canonical::Encoder::new(),
            desc: descriptor("tensorflow.GraphDef")?,
        })
    }

    /// Takes the serialized GraphDef fields `part`: `chunk`, a chunk of the file, when it is
    /// one (its nodes are then taken as they lie when they are canonical already).
    fn take(&mut self, part: &[u8], chunk: Option<&bytes::Bytes>) -> Result<()> {
        let malformed = |error| {
            encoding_error(CanonicalError::Malformed {
                type_name: "tensorflow.GraphDef".to_string(),
                error,
            })
        };
        let mut nodes = Vec::new();
        let mut pos = 0;
        let others_before = self.others.len();
        while pos < part.len() {
            let at = pos;
            let field = read_field(part, &mut pos).map_err(malformed)?;
            if field.number == graph_def::NODE && field.wire_type == WireType::Len {
                if self.take != Take::Others {
                    nodes.push(&part[field.start..field.end]);
                }
            } else {
                // A node number of another wire type is an unknown field: set aside with the
                // others, in the order read.
                self.others.extend_from_slice(&part[at..pos]);
            }
        }
        if self.take == Take::Others {
            return Ok(());
        }
        // Nodes only, in canonical form already (TensorFlow's and unbound's own writers): the
        // part is its own encoding, hashed as it lies. A few nodes decide whether to look.
        if let Some(chunk) = chunk.filter(|_| self.others.len() == others_before) {
            if self.first_nodes_canonical(&nodes)? && self.check.is_canonical(chunk, &self.desc) {
                self.hash.update(part);
                return Ok(());
            }
        }
        let encoded = unbound_canonical::encode_elements_to_vec(
            self.schema,
            self.schema.root(),
            graph_def::NODE,
            &nodes,
        )
        .map_err(encoding_error)?;
        self.hash.update(&encoded);
        Ok(())
    }

    /// Whether the first few of `nodes` are in canonical form.
    fn first_nodes_canonical(&self, nodes: &[&[u8]]) -> Result<bool> {
        let Some(node) = self.schema.type_id("tensorflow.NodeDef") else {
            return Ok(false);
        };
        for bytes in nodes.iter().take(PROBED_NODES) {
            if !unbound_canonical::is_canonical(self.schema, node, bytes).map_err(encoding_error)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The hash, once the fields set aside are encoded after the nodes.
    fn finish(mut self) -> Result<u64> {
        let rest = self.others_canonical()?;
        self.hash.update(&rest);
        Ok(self.hash.finish())
    }

    /// The canonical form of the fields set aside.
    fn others_canonical(&self) -> Result<Vec<u8>> {
        unbound_canonical::encode_to_vec(self.schema, self.schema.root(), &[&self.others])
            .map_err(encoding_error)
    }
}

/// The messages of `sources` held built, written out for [`parts`] to read; `None` when a
/// split's chunk among them is made of pieces that cut a field (the byte encoder reads whole
/// fields only).
fn parts_of(sources: &[Source<'_>]) -> Result<Option<Vec<Vec<u8>>>> {
    for source in sources {
        if let Source::Written(_, pieces) = source {
            if !pieces.iter().all(|piece| whole_fields(piece)) {
                return Ok(None);
            }
        }
    }
    let mut written: Vec<Vec<u8>> = Vec::new();
    for source in sources {
        if let Source::Ref(m) = source {
            written.push(m.to_vec().map_err(|e| model_fault(e.to_string()))?);
        }
    }
    Ok(Some(written))
}

/// The serialized parts `sources` are made of, in order: slices where they lie, a message
/// held built as `written` holds it ([`parts_of`]), a split's chunk as its pieces.
fn parts<'a>(sources: &'a [Source<'_>], written: &'a [Vec<u8>]) -> Vec<&'a [u8]> {
    let mut written = written.iter();
    let mut parts: Vec<&[u8]> = Vec::with_capacity(sources.len());
    for source in sources {
        match source {
            Source::Slice(buf, start, end) => parts.push(&buf[*start..*end]),
            Source::Raw(buf) => parts.push(buf),
            Source::Ref(_) => parts.push(written.next().expect("written by parts_of")),
            Source::Written(_, pieces) => parts.extend(pieces.iter().map(|p| &p[..])),
        }
    }
    parts
}

/// Whether `piece` is a run of whole fields: its keys and lengths, read one after another,
/// end exactly at its end. (A piece that cuts a field ends inside it: the field's length, or
/// its varint, runs past the end.)
fn whole_fields(piece: &[u8]) -> bool {
    let mut pos = 0;
    while pos < piece.len() {
        if read_field(piece, &mut pos).is_err() {
            return false;
        }
    }
    true
}

/// The compiled schema of message type `desc`, built once per type.
fn schema_of(desc: &MessageDescriptor) -> Result<std::sync::Arc<Schema>> {
    static SCHEMAS: OnceLock<Mutex<HashMap<String, std::sync::Arc<Schema>>>> = OnceLock::new();
    let schemas = SCHEMAS.get_or_init(|| Mutex::new(HashMap::new()));
    let mut schemas = schemas.lock().unwrap_or_else(|poison| poison.into_inner());
    Ok(schemas
        .entry(desc.full_name().to_string())
        .or_insert_with(|| std::sync::Arc::new(Schema::new(desc)))
        .clone())
}

#[cfg(test)]
mod tests {
    use super::{chunked_graph_fingerprint64, fingerprint64, whole_fields, Source};
    use crate::dir::message_descriptor as descriptor;
    use bytes::Bytes;
    use prost::Message;
    use unbound_proto::tensorflow::{FunctionDef, FunctionDefLibrary, NodeDef, OpDef, VersionDef};
    use unbound_test_support::models::op_node;

    /// Field `number` holding `bytes`.
    fn len_field(number: u32, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        unbound_wire::codec::put_key(number, unbound_wire::codec::WireType::Len, &mut out);
        unbound_wire::codec::put_varint(bytes.len() as u64, &mut out);
        out.extend_from_slice(bytes);
        out
    }

    /// `node` serialized with its fields in reverse order (not canonical).
    fn reversed(node: &NodeDef) -> Vec<u8> {
        let bytes = node.encode_to_vec();
        let mut fields = Vec::new();
        let mut pos = 0;
        while pos < bytes.len() {
            let at = pos;
            unbound_wire::codec::read_field(&bytes, &mut pos).unwrap();
            fields.push(bytes[at..pos].to_vec());
        }
        fields.into_iter().rev().flatten().collect()
    }

    #[test]
    fn a_graph_hashed_a_chunk_at_a_time_hashes_as_the_whole_graph() {
        let node = |name: &str| op_node(name, "AddV2", &["x", "y"]);
        let canonical = |name: &str| len_field(1, &node(name).encode_to_vec());
        let library = FunctionDefLibrary {
            function: vec![FunctionDef {
                signature: Some(OpDef {
                    name: "f".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let versions = VersionDef {
            producer: 5,
            ..Default::default()
        };
        // The base: a node, then `versions` (fields set aside keep their order).
        let base = [canonical("a"), len_field(4, &versions.encode_to_vec())].concat();
        let chunks: Vec<Bytes> = [
            // A node not canonical between an unknown field and a canonical node.
            [
                len_field(1, &reversed(&node("b"))),
                vec![0x98, 0x06, 0x07],
                canonical("c"),
            ]
            .concat(),
            // The library before a node; a node number with another wire type (unknown).
            [
                len_field(2, &library.encode_to_vec()),
                vec![0x08, 0x01],
                canonical("d"),
            ]
            .concat(),
            // Canonical nodes only: hashed as they lie.
            (0..40).flat_map(|i| canonical(&format!("n{i}"))).collect(),
            Vec::new(),
        ]
        .into_iter()
        .map(Bytes::from)
        .collect();
        let whole: Vec<u8> = std::iter::once(&base[..])
            .chain(chunks.iter().map(|c| &c[..]))
            .flatten()
            .copied()
            .collect();
        let graph = descriptor("tensorflow.GraphDef").unwrap();
        let expected = fingerprint64(&[Source::Raw(Bytes::from(whole))], &graph)
            .unwrap()
            .unwrap();

        let indices: Vec<u64> = (10..10 + chunks.len() as u64).collect();
        let read = |index: u64| Ok(chunks[(index - 10) as usize].clone());
        let super::GraphHash { hash, prints } =
            chunked_graph_fingerprint64(&[Source::Raw(Bytes::from(base))], &indices, &read)
                .unwrap()
                .unwrap();
        assert_eq!(hash, expected);
        let expected_prints: Vec<(u64, u64)> = indices
            .iter()
            .zip(&chunks)
            .map(|(&i, c)| (i, super::farmhash::fingerprint64(c)))
            .collect();
        assert_eq!(prints, expected_prints);

        // A chunk that does not read fails the hash, naming why.
        let failing = |index: u64| {
            if index == 11 {
                Err(crate::fingerprint::model_fault(
                    "chunk 11 is damaged".to_string(),
                ))
            } else {
                read(index)
            }
        };
        let error = chunked_graph_fingerprint64(&[], &indices, &failing)
            .err()
            .expect("a damaged chunk fails the hash");
        assert!(error.to_string().contains("chunk 11 is damaged"), "{error}");
    }

    #[test]
    fn pieces_that_cut_a_field_are_not_whole_fields() {
        // Field 1 (length-delimited, 3 bytes), then field 2 (varint 150).
        let fields = [0x0a, 0x03, b'a', b'b', b'c', 0x10, 0x96, 0x01];
        assert!(whole_fields(&fields));
        assert!(whole_fields(&fields[..5]) && whole_fields(&fields[5..]));
        // A key and length without the value (a large value written as a piece of its own).
        assert!(!whole_fields(&fields[..2]));
        // A varint cut in the middle.
        assert!(!whole_fields(&fields[..7]));
    }
}

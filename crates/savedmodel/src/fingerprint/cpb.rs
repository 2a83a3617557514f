//! `CreateFingerprintDefCpb`: the fingerprint of a `saved_model.cpb`, from its chunks
//! (`cc/saved_model/fingerprinting_utils.cc`). No regularization is applied.
//!
//! - `saved_model_checksum` = `Cat(HashFields(root, []), FP64(""))`: every chunk the root's
//!   chunked fields name, raw (the root's own chunk 0 is not hashed; the empty string is the
//!   serialization of the empty SavedModel `HashFields` leaves behind).
//! - The model is read with the metadata pruned to `meta_graphs[0].graph_def`,
//!   `.signature_def` and `.object_graph_def` ([`prune`]), then:
//!   - `graph_def_program_hash` = `Cat(FP64(ser(graph_def)), HashFields(root, [2, 0, 2]))`;
//!   - `saved_object_graph_hash` = `Cat(FP64(ser(object_graph_def)), HashFields(root, [2, 0, 7]))`;
//!   - `signature_def_hash`: for each signature in key order,
//!     `h = Cat(h, Cat(FP64(key), FP64(ser(sig))))` then `h = Cat(h, HashFields(root, [2, 0, 5]))`.
//!
//! TensorFlow's `HashFields` also parses partially matching chunks into a scratch message it
//! never hashes; only its reads can fail, and here the chunk is read the same way.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use unbound_chunked::prune::tag_field;
use unbound_chunked::tags::sort_for_merge;
use unbound_chunked::{ChunkSource, FileChunks, Merger, SplitOutput};
use unbound_proto::fields::tensorflow::{graph_def, meta_graph_def};
use unbound_proto::tensorflow::proto_splitter::{ChunkedField, ChunkedMessage, FieldIndex};
use unbound_records::RecordReader;
use unbound_wire::WireMessage;

use super::canonical::{Encoder, Source};
use super::farmhash::{fingerprint64, fingerprint_cat64, Fingerprint64};
use super::hashes::{
    descriptor, field_sources, field_values, first_meta_graph, hash_message, signature_hashes,
};
use super::{model_fault, Hashes};
use crate::shared_cpb::{meta_graph_tags, StreamPrints};
use crate::{Result, SavedModelError};

/// The hash fields for the chunked SavedModel in `cpb_file`, read on its own.
///
/// No chunk is kept decoded here ([`FileChunks::keep_decoded`]): each graph chunk is hashed as
/// a stream, then decoded again by the pruned merge. Keeping them saved that decode (the
/// fingerprint of the 3M-node `.cpb`: 2.50 → 1.99 s) but moved the whole decodes onto the
/// hashing threads, whose own malloc arenas could not reuse what the main thread had freed:
/// `split`, which fingerprints its output after writing it, peaked 200 MB higher (2040 →
/// 2243 MB; equal with `MALLOC_ARENA_MAX=1`). `verify` shares its chunks
/// (`hashes_of` with a `SharedCpb`), where they save a whole merge's worth of memory.
///
/// The graph's own chunks are not kept either: the graph's hash reads them one at a time, in
/// order, hashing each and its nodes as it goes ([`streamed::chunked_graph_fingerprint64`]),
/// so memory holds a few chunks, not the graph (issue 29: 1.8 GB for the 3M-node `.cpb`).
pub fn hashes(cpb_file: &Path) -> Result<Hashes> {
    let reader = Arc::new(RecordReader::open(cpb_file)?);
    let (chunks, metadata) = FileChunks::from_reader(reader)?;
    // Reading the layout mapped the pages around every block header, which is the whole
    // file: given back, each chunk is mapped again when it is read, then given back again.
    for info in chunks.infos() {
        chunks.reader().release_chunk_pages(info.offset);
    }
    let root = metadata.message.clone().unwrap_or_default();
    hashes_of(&chunks, &root, None, None)
}

/// Another reader of a `.cpb` that takes the chunks its fingerprint decodes, as they are
/// decoded: `verify`, which checks the chunks of a graph it leaves unmerged (issue 29: the
/// check, `show` and the fingerprint each decompressed every chunk of the graph on its own,
/// half of the CPU of a `verify` of a Brotli `.cpb` of millions of nodes).
pub(crate) trait ChunkSeen: Sync {
    /// Whether chunk `index` is wanted: the fingerprint then decodes it whole, where it would
    /// otherwise hash it as a stream.
    fn wants(&self, index: u64) -> bool;
    /// Chunk `index`, decoded whole and of its declared size.
    fn seen(&self, index: u64, bytes: &Bytes);
}

/// [`hashes_of`] of a file's chunks read on their own, each chunk `seen` wants handed to it
/// as it is decoded.
pub(crate) fn hashes_seeing(
    chunks: &FileChunks,
    root: &ChunkedMessage,
    seen: &dyn ChunkSeen,
) -> Result<Hashes> {
    hashes_of(chunks, root, None, Some(seen))
}

/// `[meta_graphs, 0, graph_def]`, `[..., signature_def]`, `[..., object_graph_def]`: what the
/// fingerprint merges and hashes.
fn targets() -> [Vec<FieldIndex>; 3] {
    [
        meta_graph_tags(meta_graph_def::GRAPH_DEF),
        meta_graph_tags(meta_graph_def::SIGNATURE_DEF),
        meta_graph_tags(meta_graph_def::OBJECT_GRAPH_DEF),
    ]
}

/// The hash fields of the chunked SavedModel whose chunks are `chunks` and whose metadata
/// tree is `root`; chunks `chunks` keeps decoded are hashed from its cache (shared with
/// whatever else reads them, `verify` on another thread for one), the others streamed.
///
/// With `streamed`, the prints a merge of the same chunks learnt as it streamed them are taken
/// (after waiting for a merge running on another thread) instead of streaming those chunks
/// again.
///
/// The graph's own chunks are read one at a time for its hash (from the cache when it keeps
/// them, else from the file and given back once decoded): `verify` held them all decoded, and
/// the graph's canonical form besides (3.1 GB for the 3M-node `.cpb`; 6.6 GB, and a slower
/// streaming encoder past 1 GiB, for the 9M-node one).
///
/// With `seen`, each chunk it wants is handed to it once decoded ([`ChunkSeen`]).
pub(crate) fn hashes_of(
    chunks: &FileChunks,
    root: &ChunkedMessage,
    streamed: Option<&StreamPrints>,
    seen: Option<&dyn ChunkSeen>,
) -> Result<Hashes> {
    let read = |index: u64| {
        let bytes = read_graph_chunk(chunks, index)?;
        if let Some(seen) = seen.filter(|seen| seen.wants(index)) {
            seen.seen(index, &bytes);
        }
        Ok(bytes)
    };
    let (hashes, _) = hashes_with(
        chunks,
        root,
        Trust::Nothing,
        GraphHash::Made(Some(&read)),
        |wanted, graph| chunk_prints(chunks, wanted, graph, streamed, seen),
    )?;
    Ok(hashes)
}

/// A chunk of the graph, for its hash to read: from the cache when `chunks` keeps it, else
/// from the file (its compressed pages given back once decoded).
fn read_graph_chunk(chunks: &FileChunks, index: u64) -> Result<Bytes> {
    if chunks.cache().is_some_and(|cache| cache.is_cached(index)) {
        let bytes = chunks.bytes(index)?;
        chunks.check_len(index, bytes.len() as u64)?;
        return Ok(bytes);
    }
    Ok(chunks.read_later(index)?.bytes()?)
}

/// [`hashes_of`], but the canonical form of the graph's nodes left to a caller that has it
/// (`merge`, which makes the whole model's, and compares a `.cpb`'s stored `fingerprint.pb`
/// with the model: it encoded the graph twice, 4 of the 18 s of a merge of the non-canonical
/// 3M-node `.cpb`). Each of the graph's chunks gives its print and its fields other than
/// nodes, which are encoded; the nodes are not. A chunk the merge streamed (too large to
/// keep) gives both from that stream ([`StreamPrints::take_apart`]: hashed and set apart as
/// it went by); any other is read from the cache, where `verify` keeps it, or from the file.
///
/// Only where the nodes of the merged model are those TensorFlow's pruned merge hashes: when
/// every chunk below the graph is one of its library's (whose chunks the pruned merge leaves
/// out, and which hold no nodes), and the graph's own chunks can be read one at a time
/// ([`streamed::chunked_graph_fingerprint64`]'s conditions). Otherwise the hashes are made
/// whole here ([`PendingHashes::Complete`]).
pub(crate) fn hashes_but_nodes_of(
    chunks: &FileChunks,
    root: &ChunkedMessage,
    streamed: Option<&StreamPrints>,
) -> Result<PendingHashes> {
    let read = |index: u64| read_graph_chunk(chunks, index);
    // A chunk the merge streamed: its print and its fields other than nodes, set apart as it
    // went by (`StreamPrints`), rather than decoding it again.
    let learnt = |index: u64| -> Option<(u64, Vec<u8>)> {
        let prints = streamed?;
        let info = chunks.infos().get(usize::try_from(index).ok()?)?;
        if !chunks.streams_chunk_at(info.offset) {
            return None;
        }
        prints.wait_for_merge();
        Some((prints.print(index)?, prints.take_apart(index)?))
    };
    let (hashes, others) = hashes_with(
        chunks,
        root,
        Trust::Nothing,
        GraphHash::NodesElsewhere {
            read: &read,
            learnt: &learnt,
        },
        |wanted, graph| chunk_prints(chunks, wanted, graph, streamed, None),
    )?;
    Ok(match others {
        Some(others) => PendingHashes::NodesElsewhere { hashes, others },
        None => PendingHashes::Complete(hashes),
    })
}

/// The hash fields of a `.cpb`, maybe but for its graph's nodes ([`hashes_but_nodes_of`]).
pub(crate) enum PendingHashes {
    /// Made whole.
    Complete(Hashes),
    /// All but `graph_def_program_hash`, which holds only its `HashFields` part: the
    /// `Fingerprint64` of the graph's canonical form (`FP64(ser(graph_def))`) is to be
    /// combined with it, that form being the canonical form of the graph's nodes, then
    /// `others`.
    NodesElsewhere {
        hashes: Hashes,
        /// The canonical form of the graph's fields other than nodes, as the pruned merge
        /// makes them (without its library's chunks).
        others: Vec<u8>,
    },
}

impl PendingHashes {
    /// The hash fields; `graph_print(others)` is the `Fingerprint64` of the canonical form of
    /// the model's graph's nodes followed by `others`, asked only when the nodes were left.
    pub(crate) fn complete(self, graph_print: impl FnOnce(&[u8]) -> Result<u64>) -> Result<Hashes> {
        match self {
            PendingHashes::Complete(hashes) => Ok(hashes),
            PendingHashes::NodesElsewhere { hashes, others } => Ok(Hashes {
                graph_def_program_hash: fingerprint_cat64(
                    graph_print(&others)?,
                    hashes.graph_def_program_hash,
                ),
                ..hashes
            }),
        }
    }
}

/// The hash fields of the `.cpb` that `split` is written as: the same as [`hashes`] of that
/// file, computed from the split in memory (each chunk hashed a field at a time, never
/// joined, except those the pruned merge reads), so that `split` fingerprints its output
/// while writing it rather than reading it back (issue 15: decompressing it again was a fifth
/// of a split of a model of millions of nodes).
///
/// With `source_canonical` (the split was made of a model read, unedited, from canonical
/// bytes), the messages directly below the merged graph that are held serialized (its nodes,
/// its library and versions unless the splitter edited them) are taken as canonical without a
/// check ([`Encoder::trust_children`]). That holds because each is either a slice of the
/// canonical source or a message the splitter edited and serialized again, and its edits
/// (dropping fields: a constant's value, the library; emptying a message moved to a chunk)
/// keep a canonical message canonical: what is left stays in field order, with minimal
/// lengths.
pub fn hashes_of_split(split: &SplitOutput, source_canonical: bool) -> Result<Hashes> {
    let hashed = |wanted: Vec<u64>, graph: &[u64]| {
        let mut found = ChunkPrints::default();
        for index in wanted {
            let segments = usize::try_from(index)
                .map_err(|_| model_fault(format!("chunk {index} is not in the split")))
                .and_then(|i| Ok(split.segments_at(i)?))?;
            let mut print = Fingerprint64::new();
            for part in &segments {
                print.update(part);
            }
            found.prints.insert(index, print.finish());
            if graph.contains(&index) {
                found.pieces.insert(index, segments);
            }
        }
        Ok(found)
    };
    let trust = if source_canonical {
        Trust::CanonicalChildren
    } else {
        Trust::InMemory
    };
    let (hashes, _) = hashes_with(split, &split.message, trust, GraphHash::Made(None), hashed)?;
    Ok(hashes)
}

/// How [`hashes_with`] comes by the `Fingerprint64` of the graph's canonical form.
#[derive(Clone, Copy)]
enum GraphHash<'r> {
    /// Made there; with a reader of chunks, a graph whose own chunks are all in the file is
    /// hashed reading them one at a time ([`streamed::chunked_graph_fingerprint64`]).
    Made(Option<&'r (dyn Fn(u64) -> Result<Bytes> + Sync)>),
    /// As `Made` with the reader, but the graph's nodes are left to the caller when they can
    /// be ([`hashes_but_nodes_of`]).
    NodesElsewhere {
        read: &'r (dyn Fn(u64) -> Result<Bytes> + Sync),
        /// What a merge learnt of a chunk as it streamed it: its print and its fields other
        /// than nodes.
        learnt: &'r (dyn Fn(u64) -> Option<(u64, Vec<u8>)> + Sync),
    },
}

/// What the graph's hash may take for granted.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Trust {
    /// Nothing: a file's chunks, merged (its built parts are read where they are).
    Nothing,
    /// A split made of a canonical model: its serialized children are canonical.
    CanonicalChildren,
    /// A split held in memory, of a model not known canonical: its built parts may be written
    /// out for the byte encoder (a copy, cheap next to encoding them field by field).
    InMemory,
}

/// What is found of the chunks `HashFields` reads, once each.
#[derive(Default)]
struct ChunkPrints {
    /// The `Fingerprint64` of each.
    prints: HashMap<u64, u64>,
    /// The pieces the serialization of some is made of (a split's chunks merged whole into
    /// the graph: [`SplitOutput::segments_at`]), for the graph's hash to take as they are.
    pieces: HashMap<u64, Vec<Bytes>>,
    /// The bytes of a file's chunks of the graph, decoded once to be fingerprinted, for the
    /// graph's hash to read.
    decoded: HashMap<u64, Bytes>,
}

/// The hash fields of the chunked SavedModel read through `chunks` with metadata tree `root`;
/// `chunk_prints` gives the `Fingerprint64` of each chunk index it is handed first, and may
/// keep the pieces of those among the graph's own chunks it is handed second; the graph's
/// serialized children are trusted to be canonical when `trusted` (see [`hashes_of_split`]).
/// `graph` says how the graph's own hash is come by ([`GraphHash`]); a graph read one chunk at
/// a time fingerprints its chunks too: `chunk_prints` is not handed them. With the canonical
/// form of the graph's fields other than nodes when its nodes were left to the caller
/// (`graph_def_program_hash` is then only the `HashFields` part: [`PendingHashes`]).
fn hashes_with(
    chunks: &dyn ChunkSource,
    root: &ChunkedMessage,
    trust: Trust,
    graph: GraphHash<'_>,
    chunk_prints: impl FnOnce(Vec<u64>, &[u64]) -> Result<ChunkPrints>,
) -> Result<(Hashes, Option<Vec<u8>>)> {
    let graph_tags = meta_graph_tags(meta_graph_def::GRAPH_DEF);
    let (read_graph_chunk, nodes_elsewhere) = match graph {
        GraphHash::Made(read) => (read, false),
        GraphHash::NodesElsewhere { read, .. } => {
            (Some(read), only_library_below(root, &graph_tags))
        }
    };
    let signature_tags = meta_graph_tags(meta_graph_def::SIGNATURE_DEF);
    let object_graph_tags = meta_graph_tags(meta_graph_def::OBJECT_GRAPH_DEF);
    let targets = targets();

    // Every chunk `HashFields` reads, fingerprinted once, in parallel (TensorFlow reads most
    // of them twice: for the checksum and for the graph).
    let mut wanted = BTreeSet::new();
    for tags in std::iter::once(&[][..]).chain(targets.iter().map(Vec::as_slice)) {
        hash_fields(root, tags, &mut |index| {
            wanted.insert(index);
            Ok(0)
        })?;
    }
    let pruned = prune(root, &targets);
    // The graph's own chunks set apart when the rest merges without them, else merged too.
    let apart = graph_chunks_apart(&pruned, &graph_tags, chunks);
    let desc = descriptor("tensorflow.SavedModel")?;
    // Read one at a time for the graph's hash, when they can be: the rest merged first, to
    // know that they follow it.
    let mut streamed_graph = None;
    if let (Some(read), Some((rest, graph_chunks)), Trust::Nothing) =
        (read_graph_chunk, &apart, trust)
    {
        if graph_chunks.iter().all(|(_, built)| built.is_none()) {
            let model = Merger::new(chunks).merge(&desc, rest)?;
            if graph_outside_takes(&model) {
                let indices: Vec<u64> = graph_chunks.iter().map(|&(index, _)| index).collect();
                streamed_graph = Some((model, indices, read));
            }
        }
    }
    let graph_indices: Vec<u64> = match &streamed_graph {
        Some(_) => Vec::new(),
        None => apart
            .iter()
            .flat_map(|(_, graph_chunks)| graph_chunks.iter().map(|&(index, _)| index))
            .collect(),
    };
    let read_with_graph: Vec<u64> = match &streamed_graph {
        Some((_, indices, _)) => wanted
            .iter()
            .copied()
            .filter(|i| !indices.contains(i))
            .collect(),
        None => wanted.iter().copied().collect(),
    };
    let ChunkPrints {
        mut prints,
        pieces,
        mut decoded,
    } = chunk_prints(read_with_graph, &graph_indices)?;
    let mut enc = Encoder::new();
    let mut graph_hash = None;
    let mut others = None;
    if let Some((model, indices, read)) = &streamed_graph {
        let meta_graph = [first_meta_graph(model)?];
        let base = field_sources(&meta_graph, meta_graph_def::GRAPH_DEF)?;
        // The base of a file's merge is held or read where it lies, never in a split's
        // pieces, so its fields are whole.
        let cut = || model_fault("the graph's base is made of pieces that cut fields".to_string());
        if let (true, GraphHash::NodesElsewhere { learnt, .. }) = (nodes_elsewhere, graph) {
            let found = super::streamed::chunked_graph_others(&base, indices, learnt, *read)?
                .ok_or_else(cut)?;
            prints.extend(found.prints);
            others = Some(found.canonical);
        } else {
            let streamed = super::streamed::chunked_graph_fingerprint64(&base, indices, *read)?
                .ok_or_else(cut)?;
            prints.extend(streamed.prints);
            graph_hash = Some(streamed.hash);
        }
    }
    let mut print = |index: u64| {
        prints
            .get(&index)
            .copied()
            .ok_or_else(|| model_fault(format!("chunk {index} was not read")))
    };

    let saved_model_checksum =
        fingerprint_cat64(hash_fields(root, &[], &mut print)?, fingerprint64(b""));

    let apart = match (apart, streamed_graph) {
        (_, Some((model, _, _))) => Some((model, Vec::new())),
        (Some((rest, graph_chunks)), None) => {
            Some((Merger::new(chunks).merge(&desc, &rest)?, graph_chunks))
                .filter(|(model, _)| graph_outside_takes(model))
        }
        (None, None) => None,
    };
    let (model, graph_chunks) = match apart {
        Some(apart) => apart,
        None => (Merger::new(chunks).merge(&desc, &pruned)?, Vec::new()),
    };
    let meta_graph = [first_meta_graph(&model)?];

    // A chunk not held built (a file's) is read as its bytes: serialized GraphDef fields,
    // which the Merger would parse and append to the graph; the byte encoder reads them
    // where they lie instead (issue 29: merged, they went to the general encoder, which a
    // non-canonical model made ten times slower).
    let raw = graph_chunks
        .iter()
        .filter(|(_, chunk)| chunk.is_none())
        .map(|&(index, _)| {
            let bytes = match decoded.remove(&index) {
                Some(bytes) => bytes,
                None => chunks.bytes(index)?,
            };
            chunks.check_len(index, bytes.len() as u64)?;
            Ok((index, bytes))
        })
        .collect::<Result<HashMap<u64, Bytes>>>()?;
    let mut graph = field_sources(&meta_graph, meta_graph_def::GRAPH_DEF)?;
    for &(index, chunk) in &graph_chunks {
        graph.push(match (chunk, pieces.get(&index)) {
            (Some(chunk), Some(pieces)) => Source::Written(chunk, pieces),
            (Some(chunk), None) => Source::Ref(chunk),
            (None, _) => Source::Raw(raw[&index].clone()),
        });
    }
    enc.trust_children(trust == Trust::CanonicalChildren);
    enc.write_out_built(trust == Trust::InMemory);
    let graph_hash = match (graph_hash, &others) {
        (Some(hash), _) => Some(hash),
        // Left to the caller, with `others`.
        (None, Some(_)) => None,
        (None, None) => Some(hash_message(
            &mut enc,
            &graph,
            &descriptor("tensorflow.GraphDef")?,
        )?),
    };
    enc.trust_children(false);
    enc.write_out_built(false);
    let graph_fields = hash_fields(root, &graph_tags, &mut print)?;
    let graph_def_program_hash = match graph_hash {
        Some(hash) => fingerprint_cat64(hash, graph_fields),
        None => graph_fields,
    };

    let signatures = signature_hashes(&mut enc, &meta_graph[0])?;
    let mut signature_def_hash = 0;
    if !signatures.is_empty() {
        let chunked = hash_fields(root, &signature_tags, &mut print)?;
        for (key, sig) in signatures {
            signature_def_hash = fingerprint_cat64(signature_def_hash, fingerprint_cat64(key, sig));
            signature_def_hash = fingerprint_cat64(signature_def_hash, chunked);
        }
    }

    let object_graph = field_sources(&meta_graph, meta_graph_def::OBJECT_GRAPH_DEF)?;
    let saved_object_graph_hash = fingerprint_cat64(
        hash_message(
            &mut enc,
            &object_graph,
            &descriptor("tensorflow.SavedObjectGraph")?,
        )?,
        hash_fields(root, &object_graph_tags, &mut print)?,
    );
    let hashes = Hashes {
        saved_model_checksum,
        graph_def_program_hash,
        signature_def_hash,
        saved_object_graph_hash,
    };
    Ok((hashes, others))
}

/// Whether every chunked field of `root` below the graph (at `graph_tags`) lies in its
/// library: chunks TensorFlow's pruned merge leaves out of the graph it hashes, which hold
/// functions, not nodes. The graph's nodes are then the merged model's.
fn only_library_below(root: &ChunkedMessage, graph_tags: &[FieldIndex]) -> bool {
    let library = tag_field(graph_def::LIBRARY);
    root.chunked_fields.iter().all(|cf| {
        let tags = &cf.field_tag;
        tags.len() <= graph_tags.len()
            || matches(tags, graph_tags) < graph_tags.len()
            || tags[graph_tags.len()] == library
    })
}

/// The graph's own chunks, in merge order: each index, and the message when the source holds
/// it built.
type GraphChunks<'c> = Vec<(u64, Option<&'c WireMessage>)>;

/// The pruned tree `pruned` without the chunks merged whole into the graph (chunked fields at
/// exactly `graph_tags`, each a chunk with nothing chunked below it), and those chunks in merge
/// order ([`sort_for_merge`]) with their indices and, when the source holds them built (a
/// split), the messages: the graph is hashed from them as they are held or written, after what
/// the rest merges into it, instead of having their fields copied into the merged graph first
/// (issue 15: the copy of millions of nodes, and its freeing, were a tenth of the fingerprint
/// of a split). `None` when there are no such chunks, or when another chunked field leads into
/// the graph (a whole meta graph in a chunk, say): the graph is then merged as a whole.
fn graph_chunks_apart<'c>(
    pruned: &ChunkedMessage,
    graph_tags: &[FieldIndex],
    chunks: &'c dyn ChunkSource,
) -> Option<(ChunkedMessage, GraphChunks<'c>)> {
    let mut rest = ChunkedMessage {
        chunk_index: pruned.chunk_index,
        chunked_fields: Vec::new(),
    };
    let mut graph_chunks = Vec::new();
    // In the order the Merger merges them: equal paths by chunk index.
    for field in sort_for_merge(&pruned.chunked_fields).ok()? {
        if field.field_tag == graph_tags {
            let below = field.message.as_ref()?;
            if !below.chunked_fields.is_empty() {
                return None;
            }
            let index = below.chunk_index?;
            graph_chunks.push((index, chunks.built(index)));
        } else if matches(graph_tags, &field.field_tag) == field.field_tag.len() {
            return None;
        } else {
            rest.chunked_fields.push(field.clone());
        }
    }
    (!graph_chunks.is_empty()).then_some((rest, graph_chunks))
}

/// Whether the graph chunks [`graph_chunks_apart`] set apart can follow the graph of `model`
/// (merged without them) as sources of their own: the Merger would have appended their fields
/// to its first meta graph's one `graph_def`, or to a new one.
fn graph_outside_takes(model: &WireMessage) -> bool {
    let Ok(meta_graph) = first_meta_graph(model) else {
        return false;
    };
    field_values(std::slice::from_ref(&meta_graph), meta_graph_def::GRAPH_DEF)
        .is_ok_and(|graphs| graphs.len() <= 1)
}

/// `Fingerprint64` of each chunk in `indices`, on as many threads as there are cores: a chunk
/// `chunks` keeps decoded is hashed from its cache (decoded there once for every reader),
/// any other streamed from the file (a multi-gigabyte chunk is never held whole) unless
/// `seen` wants it: that one is decoded whole and handed over.
fn chunk_prints(
    chunks: &FileChunks,
    indices: Vec<u64>,
    keep: &[u64],
    streamed: Option<&StreamPrints>,
    seen: Option<&dyn ChunkSeen>,
) -> Result<ChunkPrints> {
    let reader = chunks.reader();
    let infos = chunks.infos();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let printed = unbound_io::run_until_error(&indices, threads, |&index, _| {
        let info = usize::try_from(index)
            .ok()
            .and_then(|i| infos.get(i))
            .ok_or_else(|| {
                SavedModelError::invalid(
                    reader.name(),
                    format!(
                        "bad chunk metadata: chunk index {index} is out of range for {} chunks",
                        infos.len()
                    ),
                )
            })?;
        // A chunk a merge streams: hashed by that merge as it streamed it.
        let learnt = streamed
            .filter(|_| chunks.streams_chunk_at(info.offset))
            .and_then(|prints| {
                prints.wait_for_merge();
                prints.print(index)
            });
        if let Some(print) = learnt {
            return Ok((index, print, None));
        }
        let cached = chunks.cache().is_some_and(|cache| cache.is_cached(index));
        // A chunk of the graph is decoded whole here, and kept: the graph's hash reads it
        // next (issue 29: it was decoded a second time for that, a tenth of a `merge` or a
        // `verify` of a Brotli-compressed `.cpb`).
        let seen = seen.filter(|seen| seen.wants(index));
        let decoded = (cached || seen.is_some() || keep.contains(&index))
            .then(|| chunks.bytes(index).ok())
            .flatten();
        if let (Some(seen), Some(bytes)) = (seen, &decoded) {
            if chunks.check_len(index, bytes.len() as u64).is_ok() {
                seen.seen(index, bytes);
            }
        }
        let print = match &decoded {
            Some(bytes) => fingerprint64(bytes),
            // Not kept, or it failed to decode (streamed again, the error then says why).
            None => {
                let mut hasher = HashWriter(Fingerprint64::new());
                reader.copy_record_to(info.offset, &mut hasher)?;
                hasher.0.finish()
            }
        };
        // Hashed once: its mapped pages leave resident memory (the pruned merge below
        // maps back only the chunks of the first graph that were not kept decoded).
        reader.release_chunk_pages(info.offset);
        let kept = decoded.filter(|_| keep.contains(&index));
        Ok::<_, SavedModelError>((index, print, kept))
    })?;
    let mut found = ChunkPrints::default();
    for (index, print, kept) in printed {
        found.prints.insert(index, print);
        if let Some(bytes) = kept {
            found.decoded.insert(index, bytes);
        }
    }
    Ok(found)
}

/// A [`Fingerprint64`] fed through `io::Write`.
struct HashWriter(Fingerprint64);

impl std::io::Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// TensorFlow's `fieldTagMatches(a, b)`: how many leading tags of `a` equal those of `b`.
fn matches(a: &[FieldIndex], b: &[FieldIndex]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// TensorFlow's `HashFields(chunked_message, field_tags)`; `print(i)` is chunk `i`'s
/// `Fingerprint64`.
fn hash_fields(
    cm: &ChunkedMessage,
    tags: &[FieldIndex],
    print: &mut dyn FnMut(u64) -> Result<u64>,
) -> Result<u64> {
    let empty = ChunkedMessage::default();
    let mut h = 0;
    for cf in &cm.chunked_fields {
        let child = cf.message.as_ref().unwrap_or(&empty);
        let m = matches(&cf.field_tag, tags);
        match child.chunk_index {
            // An exact match with a chunk: hash the chunk.
            Some(index) if m == tags.len() => {
                h = fingerprint_cat64(h, print(index)?);
            }
            // An exact match split further: hash its parts.
            None if m == tags.len() => {
                h = fingerprint_cat64(h, hash_fields(child, tags, print)?);
            }
            // A chunk holding the target's parent: TensorFlow merges it into a scratch
            // message (so it must be readable), then looks for the target among its chunked
            // fields.
            Some(index) if m == cf.field_tag.len() => {
                print(index)?;
                h = fingerprint_cat64(h, hash_fields(child, tags, print)?);
            }
            // The target's parent, split further: each part's own chunked fields.
            None if m == cf.field_tag.len() => {
                for part in &child.chunked_fields {
                    let grandchild = part.message.as_ref().unwrap_or(&empty);
                    h = fingerprint_cat64(h, hash_fields(grandchild, tags, print)?);
                }
            }
            _ => {}
        }
    }
    Ok(h)
}

/// TensorFlow's `PruneChunkedMessage`: keeps, at every level, the chunked fields whose tags
/// are a prefix of one of `targets` (compared from the root at every depth, as TensorFlow
/// does), once per target they lead to; fields below a target are dropped (`HashFields`
/// hashes them from their chunks instead).
pub fn prune(cm: &ChunkedMessage, targets: &[Vec<FieldIndex>]) -> ChunkedMessage {
    let empty = ChunkedMessage::default();
    let mut out = ChunkedMessage {
        chunk_index: cm.chunk_index,
        chunked_fields: Vec::new(),
    };
    for cf in &cm.chunked_fields {
        for target in targets {
            if matches(&cf.field_tag, target) == cf.field_tag.len() {
                out.chunked_fields.push(ChunkedField {
                    field_tag: cf.field_tag.clone(),
                    message: Some(prune(cf.message.as_ref().unwrap_or(&empty), targets)),
                });
            }
        }
    }
    out
}

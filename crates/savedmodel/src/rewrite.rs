//! Rewriting the graphs of a SavedModel directory: read the model, hand each MetaGraphDef's
//! graph to a rewrite (graph-optimizer plugins, TPU export, ...), splice the graph it returns
//! back into the lossless copy of the model, and write the output directory with
//! [`write_model_dir`](crate::write::write_model_dir) (split when large, every other file
//! carried over, a fresh fingerprint, atomically).
//!
//! The source is read only when `verify` accepts it ([`crate::verify::verified_model`]), the
//! rule of every command that writes a model.
//!
//! Only `MetaGraphDef.graph_def` changes: every other field of the model (signatures, assets,
//! object graph, fields this schema does not know) is written back byte for byte as read.
//!
//! There is one walk, `rewrite_graphs`: it hands the rewrite the graph as bytes, never
//! decoded, and a graph the rewrite keeps is written back as the very bytes that were read.
//! [`rewrite_serialized_graphs`] (graph-optimizer plugins take bytes) and
//! [`rewrite_meta_graphs`] (a rewrite of the decoded MetaGraphDef, which decodes the graph
//! inside the callback it passes) are thin wrappers over it.

use std::path::Path;

use bytes::Bytes;
use prost::Message;
use prost_reflect::MessageDescriptor;
use unbound_proto::tensorflow::{GraphDef, MetaGraphDef};
use unbound_wire::WireMessage;

use crate::dir::{message_descriptor, SavedModel};
use crate::verify::Keep;
use crate::write::{write_model_dir_known, KnownFingerprint, SplitReport, WriteOptions};
use crate::SavedModelError;

/// Reads the SavedModel in `src`, calls `rewrite` on each of its MetaGraphDefs in order, and
/// writes the model with each MetaGraphDef's graph replaced by what `rewrite` returned to `out`
/// (which must not exist) as `options` say (split into `saved_model.cpb` when it reaches
/// `options.max_size`).
///
/// `rewrite` gets the MetaGraphDef's tags and the MetaGraphDef itself, by value: its graph can
/// be moved out rather than copied, and the model's own copy of the graph is freed before the
/// call, so a graph past 2 GiB is not held twice. Whatever else a rewrite wants to report, it
/// collects in its own state (it is `FnMut`).
///
/// Errors are `rewrite`'s error type `E`, which the errors of reading and writing the model
/// convert into; the first error stops the rewrite and nothing is written.
pub fn rewrite_meta_graphs<E, F>(
    src: &Path,
    out: &Path,
    options: &WriteOptions,
    mut rewrite: F,
) -> Result<SplitReport, E>
where
    E: From<SavedModelError>,
    F: FnMut(&[String], MetaGraphDef) -> Result<GraphDef, E>,
{
    rewrite_graphs(src, out, options, false, |at, mut meta, graph| {
        // Decoding consumes the bytes: the only other holder is the model's own copy, which
        // `rewrite_graphs` has already given up, so the graph is held once, decoded.
        let graph =
            unbound_wire::decode_lenient::<GraphDef>(graph, unbound_proto::descriptor_pool())
                .map_err(|e| {
                    SavedModelError::invalid(
                        at.source_name(),
                        format!("graph_def is not a GraphDef: {e}"),
                    )
                })?;
        meta.graph_def = Some(graph);
        let graph = rewrite(at.tags, meta)?;
        Ok(NewGraph::Replaced(graph.encode_to_vec()))
    })
}

/// Reads the SavedModel in `src`, calls `rewrite` on each of its MetaGraphDefs in order with
/// the MetaGraphDef *without its graph* and the graph's serialization, and writes the model to
/// `out` (which must not exist) as [`rewrite_meta_graphs`] does.
///
/// The graph bytes are a slice of the mapped model when it is a `.pb` whose graph is one field
/// (no copy); otherwise (a `.cpb`, or a graph given in several occurrences) they are the graph
/// serialized once, and the model's own pieces of it are freed before the call. `rewrite`
/// returns `None` to keep the graph (it is written back as those bytes, never decoded or
/// re-encoded) or the serialization of the new graph, which is checked one level deep and
/// spliced in.
pub fn rewrite_serialized_graphs<E, F>(
    src: &Path,
    out: &Path,
    options: &WriteOptions,
    mut rewrite: F,
) -> Result<SplitReport, E>
where
    E: From<SavedModelError>,
    F: FnMut(&[String], &MetaGraphDef, Bytes) -> Result<Option<Vec<u8>>, E>,
{
    // Plugins often return a graph unchanged: the source's fingerprint is computed alongside.
    rewrite_graphs(src, out, options, true, |at, meta, graph| {
        // A clone of `Bytes` shares the buffer: kept for the case the rewrite keeps the graph.
        Ok(match rewrite(at.tags, &meta, graph.clone())? {
            None => NewGraph::Kept(graph),
            Some(new) => NewGraph::Replaced(new),
        })
    })
}

/// Which MetaGraphDef of which model a rewrite is called on.
struct MetaGraphAt<'a> {
    /// The model directory, for error messages.
    src: &'a Path,
    /// The MetaGraphDef's position in `SavedModel.meta_graphs`.
    index: usize,
    /// The MetaGraphDef's tags (`meta_info_def.tags`).
    tags: &'a [String],
}

impl MetaGraphAt<'_> {
    /// The model and MetaGraphDef, as error messages name them.
    fn source_name(&self) -> String {
        format!("{} (meta_graphs[{}])", self.src.display(), self.index)
    }
}

/// What a rewrite returns to [`rewrite_graphs`] for one graph.
enum NewGraph {
    /// The graph bytes the rewrite was handed, written back as they are.
    Kept(Bytes),
    /// The serialization of a new graph, checked one level deep and spliced in.
    Replaced(Vec<u8>),
}

/// The one walk behind [`rewrite_meta_graphs`] and [`rewrite_serialized_graphs`]: reads the
/// model, and for each MetaGraphDef decodes everything but its graph, takes the graph's bytes
/// out of the model (freeing the model's own pieces of it, see [`take_graph_bytes`]), hands
/// both to `rewrite` by value, splices what it returns back where the graph was, and writes
/// the model directory.
///
/// Only a model `verify` accepts is rewritten, as `split` and `merge` do: a damaged one is
/// refused, never written out as broken. The verification is the one reading of the model, and
/// with `fingerprint_source` it keeps the fingerprint it computes of a `.pb` source (on a
/// thread of its own, beside its other checks): when every rewrite keeps its graph, the model
/// written is the source's bytes again, and that fingerprint is reused instead of computing the
/// output's (issue 15: a third of an `optimize` whose plugins change nothing, on a model of
/// millions of nodes).
fn rewrite_graphs<E, F>(
    src: &Path,
    out: &Path,
    options: &WriteOptions,
    fingerprint_source: bool,
    mut rewrite: F,
) -> Result<SplitReport, E>
where
    E: From<SavedModelError>,
    F: FnMut(&MetaGraphAt<'_>, MetaGraphDef, Bytes) -> Result<NewGraph, E>,
{
    let opened = SavedModel::open(src)?;
    let keep = if fingerprint_source {
        Keep::Fingerprint
    } else {
        Keep::Nothing
    };
    let verified = crate::verify::verified_model_keeping(&opened, keep)?;
    let known = verified
        .fingerprint
        .and_then(|def| KnownFingerprint::of_pb_source(&opened, def));
    let mut model = verified.model;
    let all_kept = rewrite_each_graph(src, &mut model, &mut rewrite)?;
    let known = known.filter(|_| all_kept);
    Ok(write_model_dir_known(
        src,
        out,
        model,
        options,
        known.as_ref(),
    )?)
}

/// The loop of [`rewrite_graphs`]: each MetaGraphDef of `model` (read from `src`) handed to
/// `rewrite`, its graph replaced by what comes back. Returns whether every graph was kept.
fn rewrite_each_graph<E, F>(src: &Path, model: &mut WireMessage, rewrite: &mut F) -> Result<bool, E>
where
    E: From<SavedModelError>,
    F: FnMut(&MetaGraphAt<'_>, MetaGraphDef, Bytes) -> Result<NewGraph, E>,
{
    use unbound_proto::fields::tensorflow::meta_graph_def::GRAPH_DEF;
    use unbound_wire::{Payload, WireField, WireValue};

    let mut all_kept = true;
    let saved_model_desc = message_descriptor("tensorflow.SavedModel")?;
    let graph_desc = message_descriptor("tensorflow.GraphDef")?;
    let meta_fd = field(&saved_model_desc, "meta_graphs")?;
    let count = model.message_positions(meta_fd.number()).len();
    for index in 0..count {
        let meta_wire = model
            .repeated_message_mut(&meta_fd, index as u64)
            .map_err(SavedModelError::from)?;
        let source_name = || format!("{} (meta_graphs[{index}])", src.display());
        // The MetaGraphDef without its graph: small, decoded; the graph stays bytes.
        let mut rest = WireMessage::new(meta_wire.descriptor.clone());
        rest.fields = meta_wire
            .fields
            .iter()
            .filter(|f| f.number != GRAPH_DEF)
            .cloned()
            .collect();
        let rest = rest.to_vec().map_err(SavedModelError::from)?;
        let meta =
            unbound_wire::decode_lenient::<MetaGraphDef>(rest, unbound_proto::descriptor_pool())
                .map_err(|e| {
                    SavedModelError::invalid(
                        src.display().to_string(),
                        format!("meta_graphs[{index}] is not a valid MetaGraphDef: {e}"),
                    )
                })?;
        let tags = meta
            .meta_info_def
            .as_ref()
            .map(|m| m.tags.clone())
            .unwrap_or_default();
        let graph = take_graph_bytes(meta_wire, GRAPH_DEF, &source_name())?;
        let at = MetaGraphAt {
            src,
            index,
            tags: &tags,
        };
        let value = match rewrite(&at, meta, graph)? {
            NewGraph::Kept(graph) => WireValue::Bytes(Payload::Inline(graph)),
            NewGraph::Replaced(new) => {
                all_kept = false;
                let new = Bytes::from(new);
                let parsed =
                    WireMessage::parse(&new, Some(graph_desc.clone())).map_err(|error| {
                        SavedModelError::from(unbound_wire::WireError::Malformed {
                            source_name: format!("the rewritten graph of {}", source_name()),
                            error,
                        })
                    })?;
                WireValue::Message(parsed)
            }
        };
        let at = meta_wire
            .fields
            .iter()
            .position(|f| f.number == GRAPH_DEF)
            .unwrap_or(meta_wire.fields.len());
        meta_wire.fields.retain(|f| f.number != GRAPH_DEF);
        meta_wire.fields.insert(
            at.min(meta_wire.fields.len()),
            WireField {
                number: GRAPH_DEF,
                value,
            },
        );
    }
    Ok(all_kept)
}

/// The serialization of field `number` of `message` (all its occurrences, which protobuf
/// merges, concatenated), taken out: each occurrence is left an empty value, so the model does
/// not hold the graph while the rewrite does. A single unexpanded occurrence is returned as its
/// own bytes (a slice of the source, no copy); otherwise the occurrences are serialized into
/// one buffer.
fn take_graph_bytes(
    message: &mut WireMessage,
    number: u32,
    source_name: &str,
) -> Result<Bytes, SavedModelError> {
    use unbound_wire::{Payload, WireValue};
    let mut occurrences = message.fields.iter_mut().filter(|f| f.number == number);
    if let (Some(only), None) = (occurrences.next(), occurrences.next()) {
        if let WireValue::Bytes(Payload::Inline(bytes)) = &mut only.value {
            return Ok(std::mem::take(bytes));
        }
    }
    let mut out = Vec::new();
    for f in message.fields.iter_mut().filter(|f| f.number == number) {
        let value = std::mem::replace(
            &mut f.value,
            WireValue::Bytes(Payload::Inline(Bytes::new())),
        );
        match value {
            WireValue::Bytes(payload) => payload.write_to(&mut out)?,
            WireValue::Message(m) => m.write_to(&mut out)?,
            _ => {
                return Err(SavedModelError::invalid(
                    source_name,
                    "graph_def is not length-delimited (not a GraphDef)",
                ))
            }
        }
    }
    Ok(Bytes::from(out))
}

/// Field `name` of `desc`, or a schema error.
fn field(
    desc: &MessageDescriptor,
    name: &str,
) -> Result<prost_reflect::FieldDescriptor, SavedModelError> {
    desc.get_field_by_name(name).ok_or_else(|| {
        SavedModelError::from(unbound_wire::WireError::Schema {
            message: desc.full_name().to_string(),
            fault: format!("no field {name}"),
        })
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use unbound_proto::tensorflow::{NodeDef, SavedModel};

    use super::*;
    use crate::dir::read_saved_model;
    use unbound_test_support::fingerprint_fields;

    fn testdata(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/models")
            .join(name)
    }

    fn saved_model(dir: &Path) -> SavedModel {
        let bytes = read_saved_model(dir).unwrap().message.to_vec().unwrap();
        SavedModel::decode(bytes.as_slice()).unwrap()
    }

    #[test]
    fn each_graph_is_replaced_and_everything_else_kept() {
        let src = testdata("tf2_multi_sig");
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        let mut seen = Vec::new();
        let report = rewrite_meta_graphs(
            &src,
            &out,
            &WriteOptions::default().with_max_size(u64::MAX),
            |tags, mut meta| {
                seen.push(tags.to_vec());
                let mut graph = meta.graph_def.take().unwrap_or_default();
                graph.node.push(NodeDef {
                    name: "added_by_rewrite".into(),
                    op: "NoOp".into(),
                    ..NodeDef::default()
                });
                Ok::<_, SavedModelError>(graph)
            },
        )
        .unwrap();
        assert!(!report.written.chunked);
        let before = saved_model(&src);
        let after = saved_model(&out);
        assert_eq!(seen.len(), before.meta_graphs.len());
        assert!(!seen.is_empty());
        for ((old, new), tags) in before.meta_graphs.iter().zip(&after.meta_graphs).zip(&seen) {
            assert_eq!(&old.meta_info_def.as_ref().unwrap().tags, tags);
            let mut expected = old.graph_def.clone().unwrap_or_default();
            expected.node.push(NodeDef {
                name: "added_by_rewrite".into(),
                op: "NoOp".into(),
                ..NodeDef::default()
            });
            assert_eq!(new.graph_def.as_ref(), Some(&expected));
            let (mut old, mut new) = (old.clone(), new.clone());
            old.graph_def = None;
            new.graph_def = None;
            assert_eq!(old, new);
        }
        // The variables are carried over.
        assert!(out.join("variables").is_dir());
    }

    #[test]
    fn serialized_graphs_are_kept_as_read_or_replaced() {
        let src = testdata("tf2_multi_sig");
        let tmp = tempfile::tempdir().unwrap();
        let before = saved_model(&src);
        // Kept: the model file is written back byte for byte.
        let kept = tmp.path().join("kept");
        let mut seen = Vec::new();
        rewrite_serialized_graphs(
            &src,
            &kept,
            &WriteOptions::default().with_max_size(u64::MAX),
            |tags, meta, graph| {
                assert!(meta.graph_def.is_none());
                seen.push((tags.to_vec(), GraphDef::decode(graph).unwrap()));
                Ok::<_, SavedModelError>(None)
            },
        )
        .unwrap();
        let read = |dir: &Path| std::fs::read(dir.join("saved_model.pb")).unwrap();
        assert_eq!(read(&kept), read(&src));
        // Its fingerprint, the source's computed alongside the rewrite, is TensorFlow's (the
        // source's fingerprint.pb was written by TensorFlow).
        assert_eq!(
            fingerprint_fields(&crate::fingerprint::read_fingerprint(&kept).unwrap()),
            fingerprint_fields(&crate::fingerprint::read_fingerprint(&src).unwrap())
        );
        assert_eq!(seen.len(), before.meta_graphs.len());
        for ((tags, graph), meta) in seen.iter().zip(&before.meta_graphs) {
            assert_eq!(&meta.meta_info_def.as_ref().unwrap().tags, tags);
            assert_eq!(Some(graph), meta.graph_def.as_ref());
        }
        // Replaced: the new graph, everything else as it was.
        let replaced = tmp.path().join("replaced");
        let small = GraphDef {
            node: vec![NodeDef {
                name: "only".into(),
                op: "NoOp".into(),
                ..NodeDef::default()
            }],
            ..GraphDef::default()
        };
        rewrite_serialized_graphs(
            &src,
            &replaced,
            &WriteOptions::default().with_max_size(u64::MAX),
            |_, _, _| Ok::<_, SavedModelError>(Some(small.encode_to_vec())),
        )
        .unwrap();
        let after = saved_model(&replaced);
        // A changed model gets its own fingerprint, not the source's.
        let written = crate::fingerprint::read_fingerprint(&replaced).unwrap();
        assert_eq!(
            fingerprint_fields(&written),
            fingerprint_fields(&crate::fingerprint::fingerprint_dir(&replaced).unwrap())
        );
        assert_ne!(
            written.graph_def_program_hash,
            crate::fingerprint::read_fingerprint(&src)
                .unwrap()
                .graph_def_program_hash
        );
        for (old, new) in before.meta_graphs.iter().zip(&after.meta_graphs) {
            assert_eq!(new.graph_def.as_ref(), Some(&small));
            let (mut old, mut new) = (old.clone(), new.clone());
            old.graph_def = None;
            new.graph_def = None;
            assert_eq!(old, new);
        }
        // Bytes that are not a message are refused, and nothing is written.
        let bad = tmp.path().join("bad");
        let result = rewrite_serialized_graphs(
            &src,
            &bad,
            &WriteOptions::default().with_max_size(u64::MAX),
            |_, _, _| Ok::<_, SavedModelError>(Some(vec![0xff; 5])),
        );
        assert!(result.is_err());
        assert!(!bad.exists());
    }

    #[test]
    fn a_chunked_models_graphs_are_handed_over_whole() {
        // A .cpb whose graphs are cut into chunks: the decoded rewrite sees each graph as the
        // .pb has it, and writing it back unchanged gives the same model.
        let src = testdata("tf2_multi_sig");
        let tmp = tempfile::tempdir().unwrap();
        let split = tmp.path().join("split");
        let options = WriteOptions::default().with_max_size(20_000);
        let report = crate::write::split_dir(&src, &split, &options, &|_| {}).unwrap();
        assert!(report.written.chunked);
        let before = saved_model(&src);
        let mut seen = Vec::new();
        let out = tmp.path().join("out");
        rewrite_meta_graphs(
            &split,
            &out,
            &options.with_max_size(u64::MAX),
            |_, mut meta| {
                let graph = meta.graph_def.take().unwrap_or_default();
                seen.push(graph.clone());
                Ok::<_, SavedModelError>(graph)
            },
        )
        .unwrap();
        let expected: Vec<_> = before
            .meta_graphs
            .iter()
            .map(|m| m.graph_def.clone().unwrap_or_default())
            .collect();
        assert_eq!(seen, expected);
        assert_eq!(saved_model(&out), before);
    }

    #[test]
    fn a_failing_rewrite_writes_nothing() {
        #[derive(Debug)]
        enum Failed {
            Model,
            Rewrite,
        }
        impl From<SavedModelError> for Failed {
            fn from(_: SavedModelError) -> Self {
                Failed::Model
            }
        }
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        let src = testdata("tf2_multi_sig");
        let options = WriteOptions::default().with_max_size(u64::MAX);
        let result = rewrite_meta_graphs(&src, &out, &options, |_, _| {
            Err::<GraphDef, _>(Failed::Rewrite)
        });
        assert!(matches!(result, Err(Failed::Rewrite)));
        assert!(!out.exists());
        let missing = tmp.path().join("missing");
        let options = WriteOptions::default().with_max_size(u64::MAX);
        let result = rewrite_meta_graphs(&missing, &out, &options, |_, meta| {
            Ok::<_, Failed>(meta.graph_def.unwrap_or_default())
        });
        assert!(matches!(result, Err(Failed::Model)));
        assert!(!out.exists());
    }
}

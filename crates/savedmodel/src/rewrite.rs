//! Rewriting the graphs of a SavedModel directory: [`rewrite_meta_graphs`] reads the model,
//! hands each MetaGraphDef, decoded, to a rewrite (graph-optimizer plugins, TPU export, ...),
//! splices the graph it returns back into the lossless copy of the model, and writes the output
//! directory with [`write_model_dir`] (split when large, every other file carried over, a fresh
//! fingerprint, atomically).
//!
//! Only `MetaGraphDef.graph_def` changes: every other field of the model (signatures, assets,
//! object graph, fields this schema does not know) is written back byte for byte as read.

use std::path::Path;

use bytes::Bytes;
use prost::Message;
use prost_reflect::MessageDescriptor;
use unbound_proto::tensorflow::{GraphDef, MetaGraphDef};
use unbound_records::WriterOptions;
use unbound_wire::WireMessage;

use crate::dir::{message_descriptor, read_saved_model, write_model_dir, SplitReport};
use crate::SavedModelError;

/// Reads the SavedModel in `src`, calls `rewrite` on each of its MetaGraphDefs in order, and
/// writes the model with each MetaGraphDef's graph replaced by what `rewrite` returned to `out`
/// (which must not exist), split into `saved_model.cpb` when it reaches `max_size`.
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
    max_size: u64,
    options: WriterOptions,
    mut rewrite: F,
) -> Result<SplitReport, E>
where
    E: From<SavedModelError>,
    F: FnMut(&[String], MetaGraphDef) -> Result<GraphDef, E>,
{
    let mut model = read_saved_model(src)?.message;
    let saved_model_desc = message_descriptor("tensorflow.SavedModel")?;
    let meta_desc = message_descriptor("tensorflow.MetaGraphDef")?;
    let graph_desc = message_descriptor("tensorflow.GraphDef")?;
    let meta_fd = field(&saved_model_desc, "meta_graphs")?;
    let graph_fd = field(&meta_desc, "graph_def")?;
    let count = model.positions(meta_fd.number()).len();
    for index in 0..count {
        let meta_wire = model
            .repeated_message_mut(&meta_fd, index as u64)
            .map_err(SavedModelError::from)?;
        let meta_bytes = Bytes::from(meta_wire.to_vec().map_err(SavedModelError::from)?);
        let meta = MetaGraphDef::decode(meta_bytes).map_err(|e| {
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
        // The decoded copy is what the rewrite works on: free the wire copy of the graph now
        // (it is replaced below), so a graph past 2 GiB is not held twice meanwhile.
        *meta_wire
            .singular_message_mut(&graph_fd)
            .map_err(SavedModelError::from)? = WireMessage::new(Some(graph_desc.clone()));
        let graph = rewrite(&tags, meta)?;
        let graph_bytes = Bytes::from(graph.encode_to_vec());
        drop(graph);
        let graph_wire =
            WireMessage::parse(&graph_bytes, Some(graph_desc.clone())).map_err(|error| {
                SavedModelError::from(unbound_wire::WireError::Malformed {
                    source_name: format!("the rewritten graph of meta_graphs[{index}]"),
                    error,
                })
            })?;
        *meta_wire
            .singular_message_mut(&graph_fd)
            .map_err(SavedModelError::from)? = graph_wire;
    }
    Ok(write_model_dir(
        src,
        out,
        model,
        max_size,
        options,
        &mut |_| {},
    )?)
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
            u64::MAX,
            WriterOptions::default(),
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
        let options = WriterOptions::default();
        let result = rewrite_meta_graphs(&src, &out, u64::MAX, options, |_, _| {
            Err::<GraphDef, _>(Failed::Rewrite)
        });
        assert!(matches!(result, Err(Failed::Rewrite)));
        assert!(!out.exists());
        let missing = tmp.path().join("missing");
        let options = WriterOptions::default();
        let result = rewrite_meta_graphs(&missing, &out, u64::MAX, options, |_, meta| {
            Ok::<_, Failed>(meta.graph_def.unwrap_or_default())
        });
        assert!(matches!(result, Err(Failed::Model)));
        assert!(!out.exists());
    }
}

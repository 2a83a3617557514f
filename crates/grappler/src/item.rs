//! The grappler item: a graph plus what must survive optimization (fetch nodes, feeds, init
//! ops, save/restore ops, ops to keep). Plugins reach it through `TF_GrapplerItem*` and the
//! util functions in [`crate::util_api`].

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use prost::Message;
use unbound_proto::tensorflow::{
    collection_def, tensor_info, GraphDef, MetaGraphDef, OpList, TensorInfo,
};

use unbound_graph::ops::OpLibrary;

/// Collections whose node lists TensorFlow's item builder treats as init ops
/// (`table_initializer`, the SavedModel main op and the legacy init op).
const INIT_OP_COLLECTIONS: [&str; 3] =
    ["table_initializer", "saved_model_main_op", "legacy_init_op"];

/// One graph to optimize and the node names it must keep.
#[derive(Debug, Clone, Default)]
pub struct GrapplerItem {
    /// What this graph is, for messages: "main graph" or "function NAME".
    pub id: String,
    /// Tensors (or nodes) the caller fetches; may carry `:port`.
    pub fetch: Vec<String>,
    /// Tensors the caller may feed.
    pub feed: Vec<String>,
    /// Ops run once at load time (table initializers, main op).
    pub init_ops: Vec<String>,
    /// Further ops that must not be removed.
    pub keep_ops: Vec<String>,
    /// The saver's save tensor, restore op and filename tensor, when there is a saver.
    pub save_restore: Vec<String>,
    /// The ops the graph can use: OpDefs for lookups, shape inference and functions.
    pub ops: Arc<OpLibrary>,
    /// What `ops` was built from, serialized, for an `--isolate` worker to build the same
    /// (sent once per worker, not with every graph).
    pub sources: Arc<OpSources>,
}

/// The serialized sources of an item's [`OpLibrary`]: the graph's function library and the
/// model's stripped op list, with an id that tells one set of sources from another.
#[derive(Debug, Clone, Default)]
pub struct OpSources {
    /// Unique per value made by [`OpSources::new`] (0: the default, empty sources).
    pub id: u64,
    /// A serialized `FunctionDefLibrary`.
    pub library: Bytes,
    /// A serialized `OpList` (the MetaGraphDef's `stripped_op_list`).
    pub stripped_ops: Bytes,
}

impl OpSources {
    /// Sources with a fresh id.
    pub fn new(library: Bytes, stripped_ops: Option<&OpList>) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            library,
            stripped_ops: stripped_ops
                .map(|ops| Bytes::from(ops.encode_to_vec()))
                .unwrap_or_default(),
        }
    }
}

pub use unbound_graph::tensor_names::node_name;

/// The MetaGraphDef's `stripped_op_list`, if it has one.
pub fn stripped_ops(meta: &MetaGraphDef) -> Option<&OpList> {
    meta.meta_info_def
        .as_ref()
        .and_then(|m| m.stripped_op_list.as_ref())
}

/// The tensor names a signature's `TensorInfo` stands for: its name, a sparse tensor's three
/// tensors, or a composite tensor's components.
fn tensor_names(info: &TensorInfo, out: &mut Vec<String>) {
    match &info.encoding {
        Some(tensor_info::Encoding::Name(name)) => out.push(name.clone()),
        Some(tensor_info::Encoding::CooSparse(coo)) => out.extend([
            coo.values_tensor_name.clone(),
            coo.indices_tensor_name.clone(),
            coo.dense_shape_tensor_name.clone(),
        ]),
        Some(tensor_info::Encoding::CompositeTensor(composite)) => {
            for component in &composite.components {
                tensor_names(component, out);
            }
        }
        None => {}
    }
}

impl GrapplerItem {
    /// The item TensorFlow's `GrapplerItemFromMetaGraphDef` builds for a MetaGraphDef: fetch
    /// every signature's outputs and the `train_op` collection, feed every signature's inputs,
    /// keep the init-op collections and the saver's ops. `graph` is the graph being optimized
    /// (the MetaGraphDef's own, possibly already rewritten).
    pub fn from_meta_graph(meta: &MetaGraphDef, graph: &GraphDef) -> Self {
        let library = graph
            .library
            .as_ref()
            .map(|l| Bytes::from(l.encode_to_vec()))
            .unwrap_or_default();
        let stripped = stripped_ops(meta);
        let sources = Arc::new(OpSources::new(library, stripped));
        let ops = Arc::new(OpLibrary::new(graph.library.as_ref(), stripped));
        Self::with_ops(meta, ops, sources)
    }

    /// [`GrapplerItem::from_meta_graph`] for a graph whose ops are already built (from its
    /// serialized library: see [`unbound_graph::functions::LibraryIndex`]); `meta`'s own
    /// graph is not looked at.
    pub fn with_ops(meta: &MetaGraphDef, ops: Arc<OpLibrary>, sources: Arc<OpSources>) -> Self {
        let mut item = GrapplerItem {
            id: "main graph".to_string(),
            ..Default::default()
        };
        for signature in meta.signature_def.values() {
            for info in signature.outputs.values() {
                tensor_names(info, &mut item.fetch);
            }
            for info in signature.inputs.values() {
                tensor_names(info, &mut item.feed);
            }
        }
        let node_list = |key: &str| -> Vec<String> {
            match meta.collection_def.get(key).and_then(|c| c.kind.as_ref()) {
                Some(collection_def::Kind::NodeList(list)) => list.value.clone(),
                _ => Vec::new(),
            }
        };
        item.fetch.extend(node_list("train_op"));
        for key in INIT_OP_COLLECTIONS {
            item.init_ops.extend(node_list(key));
        }
        if let Some(saver) = &meta.saver_def {
            for name in [
                &saver.save_tensor_name,
                &saver.restore_op_name,
                &saver.filename_tensor_name,
            ] {
                if !name.is_empty() {
                    item.save_restore.push(name.clone());
                }
            }
        }
        item.ops = ops;
        item.sources = sources;
        item
    }

    /// `GrapplerItem::NodesToPreserve`: the node names of fetches, feeds, init ops, keep ops
    /// and the saver's ops, deduplicated and sorted.
    pub fn nodes_to_preserve(&self) -> Vec<String> {
        let all = self
            .fetch
            .iter()
            .chain(&self.feed)
            .chain(&self.init_ops)
            .chain(&self.keep_ops)
            .chain(&self.save_restore);
        let set: BTreeSet<&str> = all
            .map(|t| node_name(t))
            .filter(|n| !n.is_empty())
            .collect();
        set.into_iter().map(str::to_string).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbound_proto::tensorflow::{CollectionDef, SaverDef, SignatureDef};

    #[test]
    fn node_names() {
        assert_eq!(node_name("a:0"), "a");
        assert_eq!(node_name("^ctrl"), "ctrl");
        assert_eq!(node_name("scope/x:12"), "scope/x");
        assert_eq!(node_name("odd:name"), "odd:name");
        assert_eq!(node_name("plain"), "plain");
    }

    #[test]
    fn meta_graph_item_preserves_signature_init_and_saver_nodes() {
        let tensor = |name: &str| TensorInfo {
            encoding: Some(tensor_info::Encoding::Name(name.into())),
            ..Default::default()
        };
        let mut meta = MetaGraphDef::default();
        let mut sig = SignatureDef::default();
        sig.inputs.insert("x".into(), tensor("input:0"));
        sig.outputs.insert("y".into(), tensor("out/BiasAdd:0"));
        meta.signature_def.insert("serving_default".into(), sig);
        meta.collection_def.insert(
            "table_initializer".into(),
            CollectionDef {
                kind: Some(collection_def::Kind::NodeList(collection_def::NodeList {
                    value: vec!["init_all_tables".into()],
                })),
            },
        );
        meta.saver_def = Some(SaverDef {
            save_tensor_name: "save/Identity:0".into(),
            restore_op_name: "save/restore_all".into(),
            filename_tensor_name: "save/Const:0".into(),
            ..Default::default()
        });
        let item = GrapplerItem::from_meta_graph(&meta, &GraphDef::default());
        assert_eq!(item.fetch, vec!["out/BiasAdd:0"]);
        assert_eq!(
            item.nodes_to_preserve(),
            vec![
                "init_all_tables",
                "input",
                "out/BiasAdd",
                "save/Const",
                "save/Identity",
                "save/restore_all"
            ]
        );
    }
}

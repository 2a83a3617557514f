//! Writes a DTensor-style checkpoint for the reshard benchmark (scripts/bench_reshard.sh):
//! VARS float32 variables `m/vNN` of shape [DIM, DIM], each stored as the 2x4 grid of slices
//! the layout `x,y` on the mesh `x=2,y=4` gives (device i's slices in data shard 1 + i,
//! the object graph in shard 0, as `tf.train.Checkpoint.save` numbers them), so TensorFlow
//! can restore it into DVariables of a module `m` with attributes `v00`, `v01`, ... Element
//! (r, c) of variable k is `k * DIM * DIM + r * DIM + c` as float32 (exact below 2^24 per
//! variable, then rounded: only reproducibility matters).
//!
//! usage: make_bench_checkpoint PREFIX [VARS=16] [DIM=8192]

use std::collections::BTreeMap;
use std::path::PathBuf;

use prost::Message;
use unbound_bundle::{
    encode_tensor_name_slice, shape_to_proto, write_index, ShardWriter, SliceSpec, Tensor,
};
use unbound_proto::tensorflow::trackable_object_graph::trackable_object::{
    ObjectReference, SerializedTensor,
};
use unbound_proto::tensorflow::trackable_object_graph::TrackableObject;
use unbound_proto::tensorflow::{BundleEntryProto, DataType, TrackableObjectGraph};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let prefix = PathBuf::from(
        args.get(1)
            .ok_or("usage: make_bench_checkpoint PREFIX [VARS] [DIM]")?,
    );
    let vars: usize = args.get(2).map_or(Ok(16), |s| s.parse())?;
    let dim: usize = args.get(3).map_or(Ok(8192), |s| s.parse())?;
    let (mx, my) = (2usize, 4usize);
    let (rows, cols) = (dim / mx, dim / my);
    let key = |k: usize| format!("m/v{k:02}/.ATTRIBUTES/VARIABLE_VALUE");
    let num_shards = (mx * my + 1) as i32;
    let mut entries = BTreeMap::new();
    // Shard 0: the object graph (root -> m -> v00..).
    let mut nodes = vec![
        TrackableObject {
            children: vec![ObjectReference {
                node_id: 1,
                local_name: "m".into(),
            }],
            ..Default::default()
        },
        TrackableObject {
            children: (0..vars)
                .map(|k| ObjectReference {
                    node_id: 2 + k as i32,
                    local_name: format!("v{k:02}"),
                })
                .collect(),
            ..Default::default()
        },
    ];
    for k in 0..vars {
        nodes.push(TrackableObject {
            attributes: vec![SerializedTensor {
                name: "VARIABLE_VALUE".into(),
                full_name: format!("v{k:02}"),
                checkpoint_key: key(k),
            }],
            ..Default::default()
        });
    }
    let graph = TrackableObjectGraph { nodes };
    let mut host = ShardWriter::create(&prefix, 0, num_shards)?;
    let t = Tensor::strings(vec![], [graph.encode_to_vec()]);
    entries.insert(
        unbound_bundle::OBJECT_GRAPH_KEY.as_bytes().to_vec(),
        host.append_tensor(&t)?,
    );
    let mut finished = vec![host.finish()?];
    let mut row = Vec::with_capacity(cols * 4);
    for pos in 0..mx * my {
        let (x, y) = (pos / my, pos % my);
        let mut w = ShardWriter::create(&prefix, 1 + pos as i32, num_shards)?;
        for k in 0..vars {
            let spec = SliceSpec::new(vec![
                ((x * rows) as i64, Some(rows as i64)),
                ((y * cols) as i64, Some(cols as i64)),
            ]);
            let entry = w.append_with(
                DataType::DtFloat as i32,
                &[rows as i64, cols as i64],
                |sink| {
                    for r in x * rows..(x + 1) * rows {
                        row.clear();
                        for c in y * cols..(y + 1) * cols {
                            let v = (k * dim * dim + r * dim + c) as f32;
                            row.extend_from_slice(&v.to_le_bytes());
                        }
                        sink.write(&row)?;
                    }
                    Ok::<(), unbound_bundle::BundleError>(())
                },
            )?;
            entries.insert(encode_tensor_name_slice(key(k).as_bytes(), &spec), entry);
            let full = entries
                .entry(key(k).into_bytes())
                .or_insert_with(|| BundleEntryProto {
                    dtype: DataType::DtFloat as i32,
                    shape: Some(shape_to_proto(&[dim as i64, dim as i64])),
                    ..Default::default()
                });
            full.slices.push(spec.to_proto());
        }
        finished.push(w.finish()?);
    }
    for f in finished {
        f.persist()?;
    }
    write_index(&prefix, num_shards, &entries)?;
    Ok(())
}

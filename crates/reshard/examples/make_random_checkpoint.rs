//! Writes a DTensor checkpoint from scratch with unbound's writer, for the interop check
//! (interop/reshard/check.py): a random mesh of 8 devices, one variable `m/v_DTYPE` per dtype
//! TensorFlow checkpoints hold (float16/32/64, bfloat16, int8/16/32/64, uint8/16/32/64, bool,
//! complex64/128, string), each of random rank (1 to 3), random layout on the mesh and random
//! shape (divisible by its layout), random values; stored as `tf.train.Checkpoint.save`
//! stores a DTensor checkpoint (each unique slice once, in data shard 1 + the position of the
//! lowest device holding it; the object graph root -> m -> v_DTYPE in shard 0).
//!
//! Beside it, `PREFIX.manifest.json` gives the mesh (`[[name, size], ...]`) and, per
//! variable, its dtype, shape, layout specs and full value (`hex`: the row-major
//! little-endian bytes; for strings, one hex string per element), so the check compares what
//! TensorFlow restores with what was written.
//!
//! usage: make_random_checkpoint PREFIX SEED

use std::path::PathBuf;

use prost::Message;
use unbound_bundle::{BundleWriter, SliceSpec, Tensor};
use unbound_proto::tensorflow::trackable_object_graph::trackable_object::{
    ObjectReference, SerializedTensor,
};
use unbound_proto::tensorflow::trackable_object_graph::TrackableObject;
use unbound_proto::tensorflow::{DataType, TrackableObjectGraph};

/// splitmix64: small, seedable, good enough for test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Every dtype of the check: TensorFlow name, dtype, element size (0: string).
const DTYPES: &[(&str, DataType, usize)] = &[
    ("float16", DataType::DtHalf, 2),
    ("float32", DataType::DtFloat, 4),
    ("float64", DataType::DtDouble, 8),
    ("bfloat16", DataType::DtBfloat16, 2),
    ("int8", DataType::DtInt8, 1),
    ("int16", DataType::DtInt16, 2),
    ("int32", DataType::DtInt32, 4),
    ("int64", DataType::DtInt64, 8),
    ("uint8", DataType::DtUint8, 1),
    ("uint16", DataType::DtUint16, 2),
    ("uint32", DataType::DtUint32, 4),
    ("uint64", DataType::DtUint64, 8),
    ("bool", DataType::DtBool, 1),
    ("complex64", DataType::DtComplex64, 8),
    ("complex128", DataType::DtComplex128, 16),
    ("string", DataType::DtString, 0),
];

/// The meshes of 8 devices to choose from.
const MESHES: &[&[(&str, u64)]] = &[
    &[("x", 8)],
    &[("x", 2), ("y", 4)],
    &[("x", 4), ("y", 2)],
    &[("a", 2), ("b", 2), ("c", 2)],
];

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A random element of `size` bytes of the dtype `name`: random bits, except bool (0 or 1)
/// and floats (finite values, so NaN payloads never matter).
fn element(rng: &mut Rng, name: &str, size: usize, out: &mut Vec<u8>) {
    let r = rng.next();
    match name {
        "bool" => out.push((r & 1) as u8),
        "float16" => out
            .extend_from_slice(&(((r & 0x7bff) as u16) | ((r >> 8) as u16 & 0x8000)).to_le_bytes()),
        "bfloat16" => out
            .extend_from_slice(&(((r & 0x3f7f) as u16) | ((r >> 8) as u16 & 0x8000)).to_le_bytes()),
        "float32" | "complex64" => {
            for _ in 0..size / 4 {
                let v = (rng.next() as i32 as f32) / 1e6;
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        "float64" | "complex128" => {
            for _ in 0..size / 8 {
                let v = (rng.next() as i64 as f64) / 1e12;
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        _ => out.extend_from_slice(&r.to_le_bytes()[..size]),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: make_random_checkpoint PREFIX SEED";
    let prefix = PathBuf::from(args.get(1).ok_or(usage)?);
    let seed: u64 = args.get(2).ok_or(usage)?.parse()?;
    let mut rng = Rng(seed);
    let mesh = MESHES[rng.below(MESHES.len() as u64) as usize];
    let n: u64 = mesh.iter().map(|d| d.1).product();
    let mut w = BundleWriter::with_shards(&prefix, n as i32 + 1)?;
    let mut nodes = vec![
        TrackableObject {
            children: vec![ObjectReference {
                node_id: 1,
                local_name: "m".into(),
            }],
            ..Default::default()
        },
        TrackableObject::default(),
    ];
    let mut manifest = serde_json::Map::new();
    for (i, &(name, dtype, size)) in DTYPES.iter().enumerate() {
        let var = format!("v_{name}");
        let key = format!("m/{var}/.ATTRIBUTES/VARIABLE_VALUE");
        nodes[1].children.push(ObjectReference {
            node_id: 2 + i as i32,
            local_name: var.clone(),
        });
        nodes.push(TrackableObject {
            attributes: vec![SerializedTensor {
                name: "VARIABLE_VALUE".into(),
                full_name: var.clone(),
                checkpoint_key: key.clone(),
            }],
            ..Default::default()
        });
        // A random layout: each axis sharded over an unused mesh dimension or unsharded.
        let rank = 1 + rng.below(3) as usize;
        let mut free: Vec<usize> = (0..mesh.len()).collect();
        let mut specs = Vec::new();
        let mut shape = Vec::new();
        for _ in 0..rank {
            let pick = rng.below(free.len() as u64 + 1) as usize;
            let k = if pick < free.len() {
                let d = free.remove(pick);
                specs.push(mesh[d].0.to_string());
                mesh[d].1
            } else {
                specs.push("unsharded".to_string());
                1
            };
            shape.push((k * (1 + rng.below(3))) as i64);
        }
        let elems: usize = shape.iter().product::<i64>() as usize;
        // The full value, row-major.
        let mut bytes = Vec::new();
        let mut strings: Vec<Vec<u8>> = Vec::new();
        for _ in 0..elems {
            if size == 0 {
                let len = rng.below(12) as usize;
                strings.push((0..len).map(|_| rng.next() as u8).collect());
            } else {
                element(&mut rng, name, size, &mut bytes);
            }
        }
        // Each unique slice once, from the lowest mesh position holding it.
        let mut seen = std::collections::HashSet::new();
        for pos in 0..n {
            let mut coord = vec![0u64; mesh.len()];
            let mut rest = pos;
            for d in (0..mesh.len()).rev() {
                coord[d] = rest % mesh[d].1;
                rest /= mesh[d].1;
            }
            let region: Vec<(u64, u64)> = specs
                .iter()
                .zip(&shape)
                .map(|(s, &len)| match mesh.iter().position(|d| d.0 == s) {
                    Some(d) => {
                        let l = len as u64 / mesh[d].1;
                        (coord[d] * l, l)
                    }
                    None => (0, len as u64),
                })
                .collect();
            if !seen.insert(region.clone()) {
                continue;
            }
            let slice = SliceSpec::new(
                region
                    .iter()
                    .zip(&shape)
                    .map(|(&(s, l), &d)| {
                        if s == 0 && l as i64 == d {
                            (0, None)
                        } else {
                            (s as i64, Some(l as i64))
                        }
                    })
                    .collect(),
            );
            let local: Vec<i64> = region.iter().map(|r| r.1 as i64).collect();
            let t = if size == 0 {
                let picked: Vec<Vec<u8>> = box_elements(&shape, &region)
                    .map(|e| strings[e].clone())
                    .collect();
                Tensor::strings(local, picked)
            } else {
                let mut picked = Vec::new();
                for e in box_elements(&shape, &region) {
                    picked.extend_from_slice(&bytes[e * size..(e + 1) * size]);
                }
                Tensor::raw(dtype, local, picked)
            };
            w.add_slice(pos as i32 + 1, &key, &shape, &slice, &t)?;
        }
        let value = if size == 0 {
            serde_json::Value::from(strings.iter().map(|s| hex(s)).collect::<Vec<_>>())
        } else {
            serde_json::Value::from(hex(&bytes))
        };
        manifest.insert(
            var,
            serde_json::json!({"dtype": name, "shape": shape, "specs": specs, "hex": value}),
        );
    }
    let graph = TrackableObjectGraph { nodes };
    w.add_to_shard(
        0,
        unbound_bundle::OBJECT_GRAPH_KEY,
        &Tensor::strings(vec![], [graph.encode_to_vec()]),
    )?;
    w.finish()?;
    let mesh_json: Vec<(&str, u64)> = mesh.to_vec();
    let text = serde_json::to_string(&serde_json::json!({"mesh": mesh_json, "vars": manifest}))?;
    let mut path = prefix.into_os_string();
    path.push(".manifest.json");
    std::fs::write(path, text)?;
    Ok(())
}

/// The row-major element indices of `region` within a tensor of `shape`.
fn box_elements<'a>(
    shape: &'a [i64],
    region: &'a [(u64, u64)],
) -> impl Iterator<Item = usize> + 'a {
    let total: u64 = region.iter().map(|r| r.1).product();
    (0..total).map(move |mut k| {
        let mut index = 0usize;
        let mut stride = 1usize;
        for d in (0..shape.len()).rev() {
            let i = region[d].0 + k % region[d].1;
            k /= region[d].1;
            index += i as usize * stride;
            stride *= shape[d] as usize;
        }
        index
    })
}

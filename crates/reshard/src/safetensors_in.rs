//! safetensors files as a reshard source: a directory written by
//! [`crate::run_safetensors`] (one file per device, the mesh and layouts in each header's
//! metadata), or plain safetensors files (PyTorch, JAX) whose tensors are taken whole.
//!
//! The files are turned into a sliced checkpoint in a temporary directory (each device's
//! local shard stored once, as TensorFlow stores a DTensor checkpoint's unique slices), which
//! the ordinary plan then reshards. Decision: this costs one extra write of the data to disk,
//! but reuses the checked, streaming engine unchanged; memory stays at the files' maps (pages
//! the kernel can drop) plus one tensor's bookkeeping.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use safetensors::{Dtype, SafeTensors};
use unbound_bundle::{BundleError, BundleWriter, SliceSpec, Tensor};
use unbound_dtensor::{Chunking, Layout, Mesh, Sharding};
use unbound_proto::tensorflow::DataType;

use crate::error::{ReshardError, Result};
use crate::safetensors_check::check_header;
use crate::safetensors_out::{META_DEVICE, META_LAYOUTS, META_MESH, META_OBJECT_GRAPH};

/// The TensorFlow dtype of a safetensors dtype; `None` for those TensorFlow checkpoints do
/// not hold the same way.
pub fn tf_dtype(d: Dtype) -> Option<DataType> {
    Some(match d {
        Dtype::F16 => DataType::DtHalf,
        Dtype::BF16 => DataType::DtBfloat16,
        Dtype::F32 => DataType::DtFloat,
        Dtype::F64 => DataType::DtDouble,
        Dtype::I8 => DataType::DtInt8,
        Dtype::I16 => DataType::DtInt16,
        Dtype::I32 => DataType::DtInt32,
        Dtype::I64 => DataType::DtInt64,
        Dtype::U8 => DataType::DtUint8,
        Dtype::U16 => DataType::DtUint16,
        Dtype::U32 => DataType::DtUint32,
        Dtype::U64 => DataType::DtUint64,
        Dtype::BOOL => DataType::DtBool,
        // safetensors' F8_E4M3 is PyTorch's float8_e4m3fn (no infinities, one NaN).
        Dtype::F8_E5M2 => DataType::DtFloat8E5m2,
        Dtype::F8_E4M3 => DataType::DtFloat8E4m3fn,
        _ => return None,
    })
}

/// The `*.safetensors` files of `dir`, sorted by name.
fn list_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| BundleError::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(ReshardError::Usage(format!(
            "{}: no .safetensors files",
            dir.display()
        )));
    }
    Ok(files)
}

/// A fault in safetensors file `path`.
fn bad(path: &Path, fault: impl std::fmt::Display) -> ReshardError {
    ReshardError::Usage(format!("{}: {fault}", path.display()))
}

/// Writes the safetensors files of `dir` as a checkpoint at `prefix` (its directory must
/// exist): with unbound's metadata, each tensor as the slices of its layout on the mesh
/// (each unique slice once, from the lowest-position device holding it); without, each
/// tensor whole. Fails naming the file and the fault on a file that does not parse, metadata
/// that does not fit the tensors, a tensor name in two plain files, or a dtype TensorFlow
/// checkpoints do not hold.
pub fn import_safetensors(dir: &Path, prefix: &Path) -> Result<()> {
    let files = list_files(dir)?;
    let maps = files
        .iter()
        .map(|f| unbound_io::map_file(f).map_err(ReshardError::from))
        .collect::<Result<Vec<_>>>()?;
    let mut metas = Vec::with_capacity(files.len());
    for (path, map) in files.iter().zip(&maps) {
        check_header(path, map)?;
        let (_, meta) = SafeTensors::read_metadata(map).map_err(|e| bad(path, e))?;
        metas.push(meta.metadata().clone().unwrap_or_default());
    }
    let sharded = metas.iter().any(|m| m.contains_key(META_MESH));
    let mut writer = if sharded {
        let mesh_text = metas[0].get(META_MESH).cloned().unwrap_or_default();
        let mesh = Mesh::parse(&mesh_text).map_err(|e| bad(&files[0], e))?;
        let n = usize::try_from(mesh.size().unwrap_or(0)).unwrap_or(0);
        BundleWriter::with_shards(prefix, n as i32 + 1)?
    } else {
        BundleWriter::create(prefix)?
    };
    if sharded {
        import_sharded(&files, &maps, &metas, &mut writer)?;
    } else {
        let mut seen = BTreeSet::new();
        for (path, map) in files.iter().zip(&maps) {
            let st = SafeTensors::deserialize(map).map_err(|e| bad(path, e))?;
            let mut names: Vec<String> = st.names().into_iter().cloned().collect();
            names.sort();
            for name in names {
                if !seen.insert(name.clone()) {
                    return Err(bad(path, format!("tensor {name:?} is in another file too")));
                }
                let view = st.tensor(&name).map_err(|e| bad(path, e))?;
                let t = to_tensor(path, &name, map, &view, view.shape())?;
                writer.add(&name, &t)?;
            }
        }
    }
    writer.finish()?;
    Ok(())
}

/// The tensor of `view` (a view into `map`), zero-copy.
fn to_tensor(
    path: &Path,
    name: &str,
    map: &bytes::Bytes,
    view: &safetensors::tensor::TensorView<'_>,
    shape: &[usize],
) -> Result<Tensor> {
    let dtype = tf_dtype(view.dtype()).ok_or_else(|| {
        bad(
            path,
            format!(
                "tensor {name:?}: dtype {:?} has no TensorFlow checkpoint dtype",
                view.dtype()
            ),
        )
    })?;
    Ok(Tensor::raw(
        dtype,
        shape.iter().map(|&d| d as i64).collect(),
        map.slice_ref(view.data()),
    ))
}

/// Files written by [`crate::run_safetensors`]: every file must carry the same mesh and
/// layouts and its own device position; each device's local shards become slices.
fn import_sharded(
    files: &[PathBuf],
    maps: &[bytes::Bytes],
    metas: &[std::collections::HashMap<String, String>],
    writer: &mut BundleWriter,
) -> Result<()> {
    let mesh_text = metas[0].get(META_MESH).cloned().unwrap_or_default();
    let layouts_text = metas[0].get(META_LAYOUTS).cloned().unwrap_or_default();
    let layouts: BTreeMap<String, Vec<String>> = serde_json::from_str(&layouts_text)
        .map_err(|e| bad(&files[0], format!("metadata {META_LAYOUTS}: {e}")))?;
    let mesh = Mesh::parse(&mesh_text).map_err(|e| bad(&files[0], e))?;
    let n = usize::try_from(mesh.size().unwrap_or(0)).unwrap_or(0);
    if files.len() != n {
        return Err(ReshardError::Usage(format!(
            "{}: {} safetensors files for mesh {mesh_text} of {n} devices",
            files[0].parent().unwrap_or(Path::new(".")).display(),
            files.len()
        )));
    }
    let mut by_pos: Vec<Option<usize>> = vec![None; n];
    for (i, (path, meta)) in files.iter().zip(metas).enumerate() {
        if meta.get(META_MESH) != Some(&mesh_text) || meta.get(META_LAYOUTS) != Some(&layouts_text)
        {
            return Err(bad(
                path,
                "its mesh or layouts metadata differ from the other files'",
            ));
        }
        if meta.get(META_OBJECT_GRAPH) != metas[0].get(META_OBJECT_GRAPH) {
            return Err(bad(
                path,
                format!(
                    "its object graph ({META_OBJECT_GRAPH}) differs from {}'s",
                    files[0].display()
                ),
            ));
        }
        let pos: usize = meta
            .get(META_DEVICE)
            .and_then(|d| d.parse().ok())
            .filter(|&p: &usize| p < n)
            .ok_or_else(|| {
                bad(
                    path,
                    format!("metadata {META_DEVICE} is not a mesh position"),
                )
            })?;
        if by_pos[pos].replace(i).is_some() {
            return Err(bad(path, format!("device {pos} is in another file too")));
        }
    }
    if let Some(text) = metas[0].get(META_OBJECT_GRAPH) {
        let graph = unhex(text).ok_or_else(|| {
            bad(
                &files[0],
                format!("metadata {META_OBJECT_GRAPH} is not hex"),
            )
        })?;
        writer.add_to_shard(
            0,
            unbound_bundle::OBJECT_GRAPH_KEY,
            &Tensor::strings(vec![], [graph]),
        )?;
    }
    let parsed = maps
        .iter()
        .zip(files)
        .map(|(m, p)| SafeTensors::deserialize(m).map_err(|e| bad(p, e)))
        .collect::<Result<Vec<_>>>()?;
    // A tensor of a device file that the layouts do not name would be left out silently.
    for (st, path) in parsed.iter().zip(files) {
        let mut extra: Vec<&String> = st
            .names()
            .into_iter()
            .filter(|n| !layouts.contains_key(*n))
            .collect();
        extra.sort();
        if let Some(name) = extra.first() {
            return Err(bad(
                path,
                format!("tensor {name:?} has no layout in the {META_LAYOUTS} metadata"),
            ));
        }
    }
    for (name, specs) in &layouts {
        let refs: Vec<&str> = specs.iter().map(String::as_str).collect();
        let layout = Layout::static_on(&refs, &mesh).map_err(|e| bad(&files[0], e))?;
        let sharding =
            Sharding::from_layout(&layout, Chunking::Even).map_err(|e| bad(&files[0], e))?;
        let mut global: Option<Vec<i64>> = None;
        // Each unique box's first copy (file index, dtype, bytes); a replica must equal it.
        let mut seen: BTreeMap<Vec<i64>, (usize, Dtype, &[u8])> = BTreeMap::new();
        for (pos, &fi) in by_pos.iter().enumerate() {
            let Some(fi) = fi else { continue };
            let path = &files[fi];
            let view = parsed[fi]
                .tensor(name)
                .map_err(|e| bad(path, format!("tensor {name:?}: {e}")))?;
            if view.shape().len() != specs.len() {
                return Err(bad(
                    path,
                    format!(
                        "tensor {name:?} has rank {}, its layout {}",
                        view.shape().len(),
                        specs.len()
                    ),
                ));
            }
            // The global shape: each sharded axis times its mesh dimension's size.
            let g: Vec<i64> = view
                .shape()
                .iter()
                .zip(specs)
                .map(|(&l, s)| {
                    let k = mesh
                        .dims()
                        .iter()
                        .find(|d| &d.name == s)
                        .map_or(1, |d| d.size);
                    l as i64 * k
                })
                .collect();
            if global.get_or_insert_with(|| g.clone()) != &g {
                return Err(bad(
                    path,
                    format!("tensor {name:?} has another shape than on device 0"),
                ));
            }
            let b = sharding.box_at(&g, pos as i64).map_err(|e| bad(path, e))?;
            if let Some(&(first, dtype, data)) = seen.get(&b.offset) {
                if view.dtype() != dtype || view.data() != data {
                    return Err(bad(
                        path,
                        format!(
                            "tensor {name:?} is a replica of the copy in {}, but its {} differ",
                            files[first].display(),
                            if view.dtype() != dtype {
                                "dtypes"
                            } else {
                                "values"
                            }
                        ),
                    ));
                }
                continue;
            }
            seen.insert(b.offset.clone(), (fi, view.dtype(), view.data()));
            let slice = SliceSpec::new(
                b.offset
                    .iter()
                    .zip(&b.shape)
                    .zip(&g)
                    .map(|((&o, &l), &d)| {
                        if o == 0 && l == d {
                            (0, None)
                        } else {
                            (o, Some(l))
                        }
                    })
                    .collect(),
            );
            let t = to_tensor(path, name, &maps[fi], &view, view.shape())?;
            writer.add_slice(pos as i32 + 1, name, &g, &slice, &t)?;
        }
    }
    Ok(())
}

/// A checkpoint staged from safetensors files in a temporary directory; removed on drop.
#[derive(Debug)]
pub struct Staged {
    dir: tempfile::TempDir,
}

impl Staged {
    /// The staged checkpoint's prefix.
    pub fn prefix(&self) -> PathBuf {
        self.dir.path().join("staged")
    }
}

/// Stages the safetensors files of `dir` ([`import_safetensors`]) as a checkpoint in a new
/// temporary directory beside the output `dst` (same file system, so the disk it uses is
/// the output's).
pub fn stage_safetensors(dir: &Path, dst: &Path) -> Result<Staged> {
    let parent = dst
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| BundleError::io(parent, e))?;
    let tmp = tempfile::Builder::new()
        .prefix(".unbound-reshard-")
        .tempdir_in(parent)
        .map_err(|e| BundleError::io(parent, e))?;
    let staged = Staged { dir: tmp };
    import_safetensors(dir, &staged.prefix())?;
    Ok(staged)
}

/// The bytes of lowercase or uppercase hex `text`; `None` when it is not hex.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    let b = text.as_bytes();
    if b.len() % 2 != 0 {
        return None;
    }
    b.chunks(2)
        .map(|p| {
            let s = std::str::from_utf8(p).ok()?;
            u8::from_str_radix(s, 16).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn hex_round_trips() {
        let bytes = [0u8, 1, 0xab, 0xff];
        assert_eq!(
            super::unhex(&crate::safetensors_out::hex(&bytes)).unwrap(),
            bytes
        );
        assert!(super::unhex("abc").is_none());
        assert!(super::unhex("zz").is_none());
    }
}

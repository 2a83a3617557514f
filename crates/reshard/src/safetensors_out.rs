//! A plan written as safetensors: one `device_NNNN.safetensors` file per device of the
//! target mesh (mesh position order), each holding that device's local shard of every
//! variable under its checkpoint key.
//!
//! Memory: each file is serialized by the `safetensors` crate from borrowed buffers, and the
//! format puts one header (with every tensor's offsets) before all data, so one device's
//! local data is held at once (the sum of its local shards), by each of `jobs` workers; no
//! variable is ever held whole unless a device holds it whole. Nothing else is buffered.
//!
//! The header's `__metadata__` says how to read the files back: `unbound.mesh` (the mesh
//! string), `unbound.device` (the mesh position), and `unbound.layouts` (a JSON object from
//! each key to its layout specs, e.g. `["x","unsharded"]`; a variable kept whole has all
//! `unsharded` specs: it is replicated on every device), and, when the source has one,
//! `unbound.object_graph` (the checkpoint's object graph, a serialized
//! `TrackableObjectGraph`, in hex) so that a checkpoint made back from the files restores
//! into objects as the source did.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use safetensors::tensor::TensorView;
use safetensors::Dtype;
use unbound_bundle::dtype::{storage, tf_name, Storage};
use unbound_bundle::{BoxReader, BundleError, Variables, OBJECT_GRAPH_KEY};
use unbound_dtensor::{Chunking, Layout, Sharding};

use crate::error::{ReshardError, Result};
use crate::plan::Plan;

/// Metadata key of the mesh string.
pub const META_MESH: &str = "unbound.mesh";
/// Metadata key of the device's mesh position.
pub const META_DEVICE: &str = "unbound.device";
/// Metadata key of the JSON object of layouts (checkpoint key to specs).
pub const META_LAYOUTS: &str = "unbound.layouts";
/// Metadata key of the source's object graph (serialized, in lowercase hex).
pub const META_OBJECT_GRAPH: &str = "unbound.object_graph";

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The file name of the device at mesh position `pos`.
pub fn device_file_name(pos: usize) -> String {
    format!("device_{pos:04}.safetensors")
}

/// What a safetensors export wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SafetensorsReport {
    /// Bytes of tensor data written over all files.
    pub bytes: u64,
    /// The output directory.
    pub dst: String,
    /// Files written (one per device).
    pub files: usize,
    /// Tensors per file.
    pub tensors: usize,
}

/// The safetensors dtype of a TensorFlow dtype; `None` for those safetensors lacks
/// (strings, complex, variants, quantized types).
pub fn safetensors_dtype(dtype: i32) -> Option<Dtype> {
    Some(match tf_name(dtype).as_str() {
        "float16" => Dtype::F16,
        "bfloat16" => Dtype::BF16,
        "float32" => Dtype::F32,
        "float64" => Dtype::F64,
        "int8" => Dtype::I8,
        "int16" => Dtype::I16,
        "int32" => Dtype::I32,
        "int64" => Dtype::I64,
        "uint8" => Dtype::U8,
        "uint16" => Dtype::U16,
        "uint32" => Dtype::U32,
        "uint64" => Dtype::U64,
        "bool" => Dtype::BOOL,
        "float8_e5m2" => Dtype::F8_E5M2,
        "float8_e4m3fn" => Dtype::F8_E4M3,
        _ => return None,
    })
}

/// The specs each exported variable has on the mesh (whole ones: all `unsharded`), the
/// object graph left out. Fails naming the key for a dtype safetensors cannot hold.
fn exported(plan: &Plan) -> Result<Vec<(usize, Vec<String>, Dtype)>> {
    let mut out = Vec::new();
    for (i, v) in plan.variables.iter().enumerate() {
        if v.key == OBJECT_GRAPH_KEY {
            continue;
        }
        let dtype = match (storage(v.stored.dtype), safetensors_dtype(v.stored.dtype)) {
            (Storage::Fixed(_), Some(d)) => d,
            _ => {
                return Err(ReshardError::Variable {
                    key: v.key.clone(),
                    fault: format!("safetensors has no {} dtype", v.dtype),
                })
            }
        };
        let specs =
            v.to.clone()
                .unwrap_or_else(|| vec!["unsharded".to_string(); v.shape.len()]);
        out.push((i, specs, dtype));
    }
    Ok(out)
}

/// Writes `plan` as one safetensors file per device into the new directory `dst`, with
/// `jobs` workers. The files are written into a temporary sibling directory, every source
/// checksum is checked, then it is renamed to `dst`; `dst` must not exist.
pub fn run_safetensors(
    src: &Variables,
    plan: &Plan,
    dst: &Path,
    jobs: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<SafetensorsReport> {
    if dst.exists() {
        return Err(ReshardError::Exists {
            path: dst.to_path_buf(),
        });
    }
    let vars = exported(plan)?;
    let mesh = unbound_dtensor::Mesh::parse(&plan.mesh)?;
    let n = usize::try_from(mesh.size().unwrap_or(0)).unwrap_or(0);
    let mut layouts = BTreeMap::new();
    for (i, specs, _) in &vars {
        layouts.insert(plan.variables[*i].key.clone(), specs.clone());
    }
    let object_graph = match src.reader.entry(OBJECT_GRAPH_KEY.as_bytes()) {
        Some(_) => match src.reader.read(OBJECT_GRAPH_KEY.as_bytes())?.data {
            unbound_bundle::TensorData::Strings(v) if v.len() == 1 => Some(hex(&v[0])),
            _ => {
                return Err(ReshardError::Variable {
                    key: OBJECT_GRAPH_KEY.into(),
                    fault: "not one string".into(),
                })
            }
        },
        None => None,
    };
    let layouts_json = serde_json::to_string(&layouts)
        .map_err(|e| ReshardError::Usage(format!("layouts metadata: {e}")))?;
    let parent = dst
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| BundleError::io(parent, e))?;
    let tmp = TempDir::new(parent, dst)?;
    let boxes = BoxReader::new(&src.reader);
    let devices: Vec<usize> = (0..n).collect();
    let written = unbound_io::run_until_error(&devices, jobs, |&pos, _| {
        let mut meta = HashMap::from([
            (META_MESH.to_string(), plan.mesh.clone()),
            (META_DEVICE.to_string(), pos.to_string()),
            (META_LAYOUTS.to_string(), layouts_json.clone()),
        ]);
        if let Some(g) = &object_graph {
            meta.insert(META_OBJECT_GRAPH.to_string(), g.clone());
        }
        let path = tmp.path.join(device_file_name(pos));
        let b = write_device(plan, &vars, &mesh, pos, &boxes, meta, &path)?;
        progress(b as u64);
        Ok::<_, ReshardError>(b)
    })?;
    let bytes: usize = written.into_iter().sum();
    boxes.finish()?;
    tmp.persist(dst)?;
    Ok(SafetensorsReport {
        bytes: bytes as u64,
        dst: dst.display().to_string(),
        files: n,
        tensors: vars.len(),
    })
}

/// Reads device `pos`'s local shard of every exported variable and writes them to `path`.
/// Returns the data bytes.
fn write_device(
    plan: &Plan,
    vars: &[(usize, Vec<String>, Dtype)],
    mesh: &unbound_dtensor::Mesh,
    pos: usize,
    boxes: &BoxReader<'_>,
    meta: HashMap<String, String>,
    path: &Path,
) -> Result<usize> {
    let mut buffers: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::with_capacity(vars.len());
    for (i, specs, dtype) in vars {
        let v = &plan.variables[*i];
        let var_err = |fault: String| ReshardError::Variable {
            key: v.key.clone(),
            fault,
        };
        let refs: Vec<&str> = specs.iter().map(String::as_str).collect();
        let layout = Layout::static_on(&refs, mesh).map_err(|e| var_err(e.to_string()))?;
        let sharding =
            Sharding::from_layout(&layout, Chunking::Even).map_err(|e| var_err(e.to_string()))?;
        let b = sharding
            .box_at(&v.shape, pos as i64)
            .map_err(|e| var_err(e.to_string()))?;
        let region = b.region();
        let elems: u64 = region.iter().map(|r| r.1).product();
        let len = elems
            .checked_mul(v.stored.element_size().unwrap_or(0) as u64)
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| var_err("its local shard does not fit in memory".into()))?;
        let mut data = vec![0u8; len];
        boxes.read_into(&v.stored, &region, &mut data)?;
        let shape = region.iter().map(|r| r.1 as usize).collect();
        buffers.push((v.key.clone(), *dtype, shape, data));
    }
    let total = buffers.iter().map(|b| b.3.len()).sum();
    let mut views = Vec::with_capacity(buffers.len());
    for (key, dtype, shape, data) in &buffers {
        let view =
            TensorView::new(*dtype, shape.clone(), data).map_err(|e| ReshardError::Variable {
                key: key.clone(),
                fault: format!("safetensors: {e}"),
            })?;
        views.push((key.as_str(), view));
    }
    safetensors::serialize_to_file(views, &Some(meta), path).map_err(|e| {
        ReshardError::Usage(format!(
            "{}: writing safetensors failed: {e}",
            path.display()
        ))
    })?;
    Ok(total)
}

/// A temporary directory beside the output, removed unless persisted.
struct TempDir {
    path: PathBuf,
    kept: bool,
}

impl TempDir {
    fn new(parent: &Path, dst: &Path) -> Result<Self> {
        let name = dst
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "out".into());
        let path = parent.join(format!(".{name}.tmp-{}", std::process::id()));
        std::fs::create_dir(&path).map_err(|e| BundleError::io(&path, e))?;
        Ok(Self { path, kept: false })
    }

    fn persist(mut self, dst: &Path) -> Result<()> {
        std::fs::rename(&self.path, dst).map_err(|e| BundleError::io(dst, e))?;
        self.kept = true;
        Ok(())
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

//! A TensorFlow checkpoint to Hugging Face's layout: whole tensors (a partitioned or
//! DTensor variable assembled from its slices) in `model-0000i-of-0000N.safetensors` files
//! filled up to the largest size asked, `model.safetensors.index.json` naming each tensor's
//! file, or one `model.safetensors` when one file holds everything.
//!
//! The files are written by hand rather than by `safetensors::serialize_to_file`, which
//! takes every tensor's bytes in memory at once: the header (with every offset) is known
//! before any data, so each tensor is streamed from the checkpoint's data files in blocks
//! of [`BLOCK`] bytes, and memory stays at one block per worker whatever the model's size.
//! The header is made of the crate's own `TensorInfo` entries, and every file written is
//! read back through the crate's header check before the directory is renamed into place.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use safetensors::tensor::TensorInfo;
use safetensors::{Dtype, SafeTensors};
use unbound_bundle::dtype::{storage, tf_name, Storage};
use unbound_bundle::{BoxReader, StoredVariable, TensorData, Variables, OBJECT_GRAPH_KEY};
use unbound_io::TempPath;

use crate::error::{ConvertError, Result};
use crate::layout::{file_name, BLOCK, FORMAT_TF, INDEX_FILE, META_FORMAT, META_KEYS};
use crate::options::{ConvertOptions, Names, Target};
use crate::report::{ConvertReport, FileReport, TensorReport};

/// One tensor to write.
struct Item {
    name: String,
    key: String,
    var: StoredVariable,
    dtype: Dtype,
    bytes: u64,
    file: usize,
}

/// The bundle prefix of `src`: a SavedModel directory's `variables/variables`, or `src`.
pub fn source_prefix(src: &Path) -> PathBuf {
    if src.is_dir() {
        unbound_bundle::saved_model_prefix(src)
    } else {
        src.to_path_buf()
    }
}

/// The name of each key: its object path where that is its own (no other key has it), its
/// key otherwise.
fn names_of(vars: &Variables, keys: &[String], names: Names) -> Result<Vec<String>> {
    let mut count: HashMap<&str, usize> = HashMap::new();
    for k in keys {
        if let Some(p) = vars.object_paths.get(k) {
            *count.entry(p.as_str()).or_default() += 1;
        }
    }
    let out: Vec<String> = keys
        .iter()
        .map(|k| match (names, vars.object_paths.get(k)) {
            (Names::Paths, Some(p)) if !p.is_empty() && count[p.as_str()] == 1 => p.clone(),
            _ => k.clone(),
        })
        .collect();
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for (n, k) in out.iter().zip(keys) {
        if let Some(other) = seen.insert(n, k) {
            return Err(ConvertError::Usage(format!(
                "tensors {other} and {k} would both be named {n}; use --names keys"
            )));
        }
    }
    Ok(out)
}

/// The object graph of the checkpoint in hex, when it has one.
fn object_graph_hex(vars: &Variables) -> Result<Option<String>> {
    if vars.reader.entry(OBJECT_GRAPH_KEY).is_none() {
        return Ok(None);
    }
    match vars.reader.read(OBJECT_GRAPH_KEY)?.data {
        TensorData::Strings(v) if v.len() == 1 => Ok(Some(unbound_reshard::hex(&v[0]))),
        _ => Err(ConvertError::Unconvertible {
            tensors: vec![(
                OBJECT_GRAPH_KEY.into(),
                "the object graph is not one string".into(),
            )],
        }),
    }
}

/// Files by Hugging Face's rule (`huggingface_hub.split_state_dict_into_shards_factory`):
/// tensors in order, a new file when the next would take the current one past `max`, a
/// tensor larger than `max` alone in a file of its own. Returns the number of files.
fn assign_files(items: &mut [Item], max: u64) -> usize {
    let mut shards: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut size = 0u64;
    for (i, it) in items.iter().enumerate() {
        if it.bytes > max {
            shards.push(vec![i]);
            continue;
        }
        if !current.is_empty() && size + it.bytes > max {
            shards.push(std::mem::take(&mut current));
            size = 0;
        }
        current.push(i);
        size += it.bytes;
    }
    if !current.is_empty() {
        shards.push(current);
    }
    for (f, shard) in shards.iter().enumerate() {
        for &i in shard {
            items[i].file = f;
        }
    }
    shards.len()
}

/// Converts the checkpoint `src` (a prefix or a SavedModel directory) to Hugging Face's
/// layout in the new directory `dst`. See the module doc.
pub fn to_safetensors(
    src: &Path,
    dst: &Path,
    options: &ConvertOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<ConvertReport> {
    let start = Instant::now();
    let prefix = source_prefix(src);
    let vars = Variables::open(&prefix)?;
    let keys: Vec<String> = vars
        .reader
        .tensor_keys()
        .map(unbound_bundle::display_key)
        .filter(|k| k != OBJECT_GRAPH_KEY)
        .collect();
    let names = names_of(&vars, &keys, options.names)?;
    let mut items = Vec::with_capacity(keys.len());
    let mut refused = Vec::new();
    for (key, name) in keys.iter().zip(names) {
        let var = vars.reader.stored_variable(key.as_bytes())?;
        let dtype = match (
            storage(var.dtype),
            unbound_reshard::safetensors_dtype(var.dtype),
        ) {
            (Storage::Fixed(_), Some(d)) => d,
            _ => {
                refused.push((
                    key.clone(),
                    format!("safetensors has no {} dtype", tf_name(var.dtype)),
                ));
                continue;
            }
        };
        let elems = var
            .shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(u64::try_from(d).ok()?));
        let Some(bytes) = elems.and_then(|e| e.checked_mul(dtype.size() as u64)) else {
            refused.push((key.clone(), "its shape is not valid".into()));
            continue;
        };
        items.push(Item {
            name,
            key: key.clone(),
            var,
            dtype,
            bytes,
            file: 0,
        });
    }
    if !refused.is_empty() {
        return Err(ConvertError::Unconvertible { tensors: refused });
    }
    items.sort_by(|a, b| a.name.cmp(&b.name));
    let nfiles = assign_files(&mut items, options.max_shard_size);
    let graph = object_graph_hex(&vars)?;
    let mut files: Vec<FileReport> = (0..nfiles)
        .map(|i| FileReport {
            name: file_name(i, nfiles),
            tensors: 0,
            bytes: 0,
        })
        .collect();
    for it in &items {
        files[it.file].tensors += 1;
        files[it.file].bytes += it.bytes;
    }
    let report = |dry_run: bool, seconds: f64| ConvertReport {
        to: Target::Safetensors,
        src: src.display().to_string(),
        dst: dst.display().to_string(),
        dry_run,
        bytes: items.iter().map(|i| i.bytes).sum(),
        files: files.clone(),
        tensors: items
            .iter()
            .map(|i| TensorReport {
                name: i.name.clone(),
                key: i.key.clone(),
                dtype: tf_name(i.var.dtype),
                shape: i.var.shape.iter().map(|&d| d as u64).collect(),
                bytes: i.bytes,
                file: files[i.file].name.clone(),
                pieces: i.var.pieces.len(),
            })
            .collect(),
        object_graph: graph.is_some(),
        seconds,
    };
    if dst.exists() {
        return Err(ConvertError::Exists {
            path: dst.to_path_buf(),
        });
    }
    if options.dry_run {
        return Ok(report(true, start.elapsed().as_secs_f64()));
    }
    if let Some(parent) = dst.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| ConvertError::os(parent, e))?;
    }
    let tmp = TempPath::new(dst);
    tmp.create_dir().map_err(|e| ConvertError::os(dst, e))?;
    let boxes = BoxReader::new(&vars.reader);
    let indices: Vec<usize> = (0..nfiles).collect();
    unbound_io::run_until_error(&indices, options.jobs, |&f, _| {
        let path = tmp.path().join(&files[f].name);
        let mine: Vec<&Item> = items.iter().filter(|i| i.file == f).collect();
        write_file(&path, &mine, graph.as_deref(), &boxes, progress)
    })?;
    // Every byte read is covered by the checkpoint's checksums before anything is renamed.
    boxes.finish()?;
    for f in &files {
        check_written(&tmp.path().join(&f.name))?;
    }
    if nfiles > 1 {
        write_index(&tmp.path().join(INDEX_FILE), &items, &files)?;
    }
    tmp.persist()?;
    Ok(report(false, start.elapsed().as_secs_f64()))
}

/// The header of a file holding `items` (in that order), padded to a multiple of 8 bytes
/// with spaces as the `safetensors` crate pads it.
fn header(items: &[&Item], graph: Option<&str>) -> Result<Vec<u8>> {
    let mut map = serde_json::Map::new();
    let keys: BTreeMap<&str, &str> = items
        .iter()
        .map(|i| (i.name.as_str(), i.key.as_str()))
        .collect();
    let mut meta = BTreeMap::from([
        (META_FORMAT.to_string(), FORMAT_TF.to_string()),
        (
            META_KEYS.to_string(),
            serde_json::to_string(&keys).map_err(|e| ConvertError::Usage(e.to_string()))?,
        ),
    ]);
    if let Some(g) = graph {
        meta.insert(
            unbound_reshard::META_OBJECT_GRAPH.to_string(),
            g.to_string(),
        );
    }
    let json = |e: serde_json::Error| ConvertError::Usage(format!("safetensors header: {e}"));
    map.insert(
        "__metadata__".into(),
        serde_json::to_value(&meta).map_err(json)?,
    );
    let mut offset = 0usize;
    for it in items {
        let len = usize::try_from(it.bytes)
            .map_err(|_| ConvertError::Usage(format!("tensor {}: too large", it.key)))?;
        let info = TensorInfo {
            dtype: it.dtype,
            shape: it.var.shape.iter().map(|&d| d as usize).collect(),
            data_offsets: (offset, offset + len),
        };
        offset += len;
        map.insert(it.name.clone(), serde_json::to_value(&info).map_err(json)?);
    }
    let mut bytes = serde_json::to_vec(&map).map_err(json)?;
    bytes.resize(bytes.len().div_ceil(8) * 8, b' ');
    Ok(bytes)
}

/// Writes one safetensors file of `items`, streaming each from the checkpoint, and syncs
/// it.
fn write_file(
    path: &Path,
    items: &[&Item],
    graph: Option<&str>,
    boxes: &BoxReader<'_>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<()> {
    let head = header(items, graph)?;
    let file = File::create(path).map_err(|e| ConvertError::os(path, e))?;
    let mut out = BufWriter::with_capacity(unbound_io::BUFFER_SIZE, file);
    let io = |e| ConvertError::os(path, e);
    out.write_all(&(head.len() as u64).to_le_bytes())
        .map_err(io)?;
    out.write_all(&head).map_err(io)?;
    for it in items {
        let region = it.var.full_box();
        boxes.stream(&it.var, &region, BLOCK, |block| {
            out.write_all(block).map_err(io)?;
            progress(block.len() as u64);
            Ok::<(), ConvertError>(())
        })?;
    }
    let file = out
        .into_inner()
        .map_err(|e| ConvertError::os(path, e.into_error()))?;
    file.sync_all().map_err(io)?;
    Ok(())
}

/// Reads back the header of a file written, through the `safetensors` crate's checks
/// (offsets inside the file and matching the shapes, the file's length the header's).
fn check_written(path: &Path) -> Result<()> {
    let map = unbound_io::map_file(path)?;
    unbound_reshard::check_header(path, &map)?;
    SafeTensors::read_metadata(&map)
        .map_err(|e| ConvertError::file(path, format!("written file does not read back: {e}")))?;
    Ok(())
}

/// Writes `model.safetensors.index.json` as `huggingface_hub` writes it: the total size of
/// the tensors' data and each tensor's file, keys sorted, indented by 2.
fn write_index(path: &Path, items: &[Item], files: &[FileReport]) -> Result<()> {
    let total: u64 = items.iter().map(|i| i.bytes).sum();
    let weight_map: BTreeMap<&str, &str> = items
        .iter()
        .map(|i| (i.name.as_str(), files[i.file].name.as_str()))
        .collect();
    let index = serde_json::json!({
        "metadata": { "total_size": total },
        "weight_map": weight_map,
    });
    let text =
        serde_json::to_string_pretty(&index).map_err(|e| ConvertError::Usage(e.to_string()))?;
    let mut f = File::create(path).map_err(|e| ConvertError::os(path, e))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.write_all(b"\n"))
        .and_then(|()| f.sync_all())
        .map_err(|e| ConvertError::os(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(bytes: u64) -> Item {
        Item {
            name: String::new(),
            key: String::new(),
            var: StoredVariable {
                key: vec![],
                dtype: 1,
                shape: vec![],
                pieces: vec![],
            },
            dtype: Dtype::F32,
            bytes,
            file: 0,
        }
    }

    #[test]
    fn files_fill_as_huggingface_fills_them() {
        let mut items: Vec<Item> = [4, 4, 3, 20, 1, 9].into_iter().map(item).collect();
        assert_eq!(assign_files(&mut items, 10), 4);
        let files: Vec<usize> = items.iter().map(|i| i.file).collect();
        assert_eq!(files, [0, 0, 2, 1, 2, 3]);
        let mut one: Vec<Item> = [1, 2].into_iter().map(item).collect();
        assert_eq!(assign_files(&mut one, 10), 1);
        assert_eq!(assign_files(&mut [], 10), 0);
    }
}

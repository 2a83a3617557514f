//! Hugging Face's layout (a directory with `model.safetensors.index.json`, one file, or a
//! directory of plain `.safetensors` files), and PyTorch Distributed Checkpoint's Hugging
//! Face writer output, to a TensorFlow checkpoint.
//!
//! DCP's writer (`torch.distributed.checkpoint.HuggingFaceStorageWriter`) writes each
//! rank's pieces of every tensor under the tensor's name, with `__metadata__` entry
//! `DCP_SHARDING_INFO` (a JSON object from each name to `{"saved_offsets": [...]}`, where the
//! piece starts in the whole tensor); its reader takes the whole shape as the largest end
//! of the pieces along each axis. Those pieces are assembled here into whole tensors, block
//! by block: they must not overlap and must cover the tensor.
//!
//! Headers are hostile input: the length is checked against the file's before anything is
//! read, the header is parsed by the `safetensors` crate (offsets inside the file, sizes
//! matching shapes) after reshard's checks (a name given twice, data ranges that overlap).
//! Data is read with positional reads in blocks of [`BLOCK`] bytes into the output data
//! shards, each entry's CRC32C computed from the bytes as read; once the shards are synced
//! they are read back and every entry's checksum checked before the index (what makes the
//! checkpoint exist) is written atomically.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use safetensors::{Dtype, SafeTensors};
use unbound_bundle::dtype::tf_name;
use unbound_bundle::slices::{box_len, for_each_box_run, intersect, overlap};
use unbound_bundle::{index_path, ShardWriter, Tensor, OBJECT_GRAPH_KEY};
use unbound_proto::tensorflow::BundleEntryProto;

use crate::error::{ConvertError, Result};
use crate::layout::{
    BLOCK, DCP_SAVED_OFFSETS, DCP_SHARDED_DIR, INDEX_FILE, MAX_HEADER, META_DCP_SHARDING, META_KEYS,
};
use crate::options::{ConvertOptions, Target};
use crate::report::{ConvertReport, FileReport, TensorReport};

/// Most pieces accepted for one tensor (the overlap check is quadratic).
const MAX_PIECES: usize = 1 << 14;

/// One stored piece of a tensor: where it lies in the whole tensor and in its file.
#[derive(Debug, Clone)]
struct Piece {
    file: usize,
    extents: Vec<(u64, u64)>,
    /// Absolute byte offset of its data in the file.
    start: u64,
    dtype: Dtype,
}

/// One tensor to write, assembled from its pieces.
#[derive(Debug)]
struct Whole {
    name: String,
    key: String,
    dtype: Dtype,
    shape: Vec<u64>,
    pieces: Vec<Piece>,
    bytes: u64,
}

/// An index's `weight_map`: tensor name to file name.
type WeightMap = BTreeMap<String, String>;

/// The safetensors files of `src`: the index's files, the one file given, or every
/// `.safetensors` file of the directory, by name; with the index's weight map when there
/// is one.
fn source_files(src: &Path) -> Result<(Vec<PathBuf>, Option<WeightMap>)> {
    if !src.is_dir() {
        return Ok((vec![src.to_path_buf()], None));
    }
    let index = src.join(INDEX_FILE);
    if index.exists() {
        let text = unbound_io::read_file(&index, MAX_HEADER)?;
        let json: serde_json::Value = serde_json::from_slice(&text)
            .map_err(|e| ConvertError::file(&index, format!("not JSON: {e}")))?;
        let map = json
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| ConvertError::file(&index, "no weight_map object"))?;
        let mut weight_map = BTreeMap::new();
        for (name, file) in map {
            let file = file
                .as_str()
                .filter(|f| {
                    !f.is_empty()
                        && !f.contains('/')
                        && !f.contains('\\')
                        && *f != ".."
                        && *f != "."
                })
                .ok_or_else(|| {
                    ConvertError::file(
                        &index,
                        format!("weight_map[{name:?}] is not a file name in the directory"),
                    )
                })?;
            weight_map.insert(name.clone(), file.to_string());
        }
        let files: BTreeSet<&String> = weight_map.values().collect();
        let files = files.into_iter().map(|f| src.join(f)).collect();
        return Ok((files, Some(weight_map)));
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(src)
        .map_err(|e| ConvertError::os(src, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    if files.is_empty() {
        // DCP's writer with consolidation on puts the ranks' files in `sharded/` until they
        // are consolidated beside it.
        let sharded = src.join(DCP_SHARDED_DIR);
        if sharded.is_dir() {
            return source_files(&sharded);
        }
        return Err(ConvertError::file(src, "no .safetensors files"));
    }
    Ok((files, None))
}

/// A file's parsed header and where its data starts.
struct Header {
    meta: safetensors::tensor::Metadata,
    data_start: u64,
}

/// Reads and checks the header of safetensors file `path`. The file is mapped, but only
/// its header's pages are touched.
fn read_header(path: &Path) -> Result<Header> {
    let map = unbound_io::map_file(path)?;
    let n = map
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
        .ok_or_else(|| ConvertError::file(path, "shorter than a safetensors header"))?;
    if n > MAX_HEADER || n > map.len() as u64 - 8 {
        return Err(ConvertError::file(
            path,
            format!(
                "a header of {n} bytes in a file of {} (at most {MAX_HEADER})",
                map.len()
            ),
        ));
    }
    unbound_reshard::check_header(path, &map)?;
    let (_, meta) = SafeTensors::read_metadata(&map)
        .map_err(|e| ConvertError::file(path, format!("not a safetensors file: {e}")))?;
    Ok(Header {
        meta,
        data_start: 8 + n,
    })
}

/// The offsets DCP's writer recorded for each tensor of a file, when it did.
fn dcp_offsets(path: &Path, meta: &Header) -> Result<Option<BTreeMap<String, Vec<u64>>>> {
    let Some(text) = meta
        .meta
        .metadata()
        .as_ref()
        .and_then(|m| m.get(META_DCP_SHARDING))
    else {
        return Ok(None);
    };
    let json: BTreeMap<String, serde_json::Value> = serde_json::from_str(text).map_err(|e| {
        ConvertError::file(
            path,
            format!("{META_DCP_SHARDING} is not a JSON object: {e}"),
        )
    })?;
    let mut out = BTreeMap::new();
    for (name, v) in json {
        let offsets: Vec<u64> = v
            .get(DCP_SAVED_OFFSETS)
            .and_then(|o| o.as_array())
            .and_then(|a| a.iter().map(|x| x.as_u64()).collect())
            .ok_or_else(|| {
                ConvertError::file(
                    path,
                    format!(
                        "{META_DCP_SHARDING}[{name:?}] has no {DCP_SAVED_OFFSETS} list of offsets"
                    ),
                )
            })?;
        out.insert(name, offsets);
    }
    Ok(Some(out))
}

/// Everything read from the source files' headers: the tensors and their pieces, the keys
/// and the object graph carried.
struct Source {
    files: Vec<PathBuf>,
    tensors: Vec<Whole>,
    object_graph: Option<Vec<u8>>,
}

fn read_source(src: &Path) -> Result<Source> {
    let (files, weight_map) = source_files(src)?;
    let mut pieces: BTreeMap<String, Vec<(Piece, bool)>> = BTreeMap::new();
    let mut keys: BTreeMap<String, String> = BTreeMap::new();
    let mut graph: Option<(String, usize)> = None;
    let mut refused = Vec::new();
    for (fi, path) in files.iter().enumerate() {
        let h = read_header(path)?;
        let dcp = dcp_offsets(path, &h)?;
        let meta = h.meta.metadata().clone().unwrap_or_default();
        if let Some(text) = meta.get(META_KEYS) {
            let k: BTreeMap<String, String> = serde_json::from_str(text)
                .map_err(|e| ConvertError::file(path, format!("{META_KEYS}: {e}")))?;
            keys.extend(k);
        }
        if let Some(g) = meta.get(unbound_reshard::META_OBJECT_GRAPH) {
            match &graph {
                Some((other, first)) if other != g => {
                    return Err(ConvertError::file(
                        path,
                        format!(
                            "its object graph differs from {}'s",
                            files[*first].display()
                        ),
                    ))
                }
                Some(_) => {}
                None => graph = Some((g.clone(), fi)),
            }
        }
        let mut infos: Vec<(String, &safetensors::tensor::TensorInfo)> =
            h.meta.tensors().into_iter().collect();
        infos.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, info) in infos {
            if let Some(wm) = &weight_map {
                if wm.get(&name).map(|f| path.ends_with(f)) == Some(false) {
                    return Err(ConvertError::file(
                        path,
                        format!(
                            "tensor {name:?} is here, but the index puts it in {}",
                            wm[&name]
                        ),
                    ));
                }
            }
            if unbound_reshard::tf_dtype(info.dtype).is_none() {
                refused.push((
                    name.clone(),
                    format!(
                        "{}: dtype {:?} has no TensorFlow checkpoint dtype",
                        path.display(),
                        info.dtype
                    ),
                ));
                continue;
            }
            let offsets = match &dcp {
                Some(d) => Some(d.get(&name).cloned().ok_or_else(|| {
                    ConvertError::file(
                        path,
                        format!("tensor {name:?} has no {META_DCP_SHARDING} entry"),
                    )
                })?),
                None => None,
            };
            let is_dcp = offsets.is_some();
            let offsets = offsets.unwrap_or_else(|| vec![0; info.shape.len()]);
            if offsets.len() != info.shape.len() {
                return Err(ConvertError::file(
                    path,
                    format!(
                        "tensor {name:?} has rank {}, its {DCP_SAVED_OFFSETS} {}",
                        info.shape.len(),
                        offsets.len()
                    ),
                ));
            }
            let extents = offsets
                .iter()
                .zip(&info.shape)
                .map(|(&o, &l)| o.checked_add(l as u64).map(|_| (o, l as u64)))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    ConvertError::file(path, format!("tensor {name:?}: offsets overflow"))
                })?;
            let list = pieces.entry(name.clone()).or_default();
            if list.len() >= MAX_PIECES {
                return Err(ConvertError::file(
                    path,
                    format!("tensor {name:?}: more than {MAX_PIECES} pieces"),
                ));
            }
            list.push((
                Piece {
                    file: fi,
                    extents,
                    start: h.data_start + info.data_offsets.0 as u64,
                    dtype: info.dtype,
                },
                is_dcp,
            ));
        }
    }
    if let Some(wm) = &weight_map {
        if let Some(name) = wm
            .keys()
            .find(|n| !pieces.contains_key(*n) && !refused.iter().any(|r| &r.0 == *n))
        {
            return Err(ConvertError::file(
                src.join(INDEX_FILE),
                format!("tensor {name:?} is not in {}", wm[name]),
            ));
        }
    }
    if !refused.is_empty() {
        return Err(ConvertError::Unconvertible { tensors: refused });
    }
    let mut tensors = Vec::with_capacity(pieces.len());
    let mut used_keys = BTreeMap::new();
    for (name, list) in pieces {
        let key = keys.get(&name).cloned().unwrap_or_else(|| name.clone());
        if key == OBJECT_GRAPH_KEY {
            return Err(ConvertError::Usage(format!(
                "tensor {name:?}: {OBJECT_GRAPH_KEY} is the object graph's key"
            )));
        }
        if let Some(other) = used_keys.insert(key.clone(), name.clone()) {
            return Err(ConvertError::Usage(format!(
                "tensors {other:?} and {name:?} both have checkpoint key {key}"
            )));
        }
        tensors.push(assemble(&files, name, key, list)?);
    }
    let object_graph = match graph {
        Some((g, fi)) => Some(unbound_reshard::unhex(&g).ok_or_else(|| {
            ConvertError::file(
                &files[fi],
                format!("{} is not hex", unbound_reshard::META_OBJECT_GRAPH),
            )
        })?),
        None => None,
    };
    Ok(Source {
        files,
        tensors,
        object_graph,
    })
}

/// A tensor from its pieces: one whole piece, or DCP pieces that tile it exactly.
fn assemble(
    files: &[PathBuf],
    name: String,
    key: String,
    list: Vec<(Piece, bool)>,
) -> Result<Whole> {
    let first = list[0].0.clone();
    let path = &files[first.file];
    if list.len() > 1 && list.iter().any(|(_, dcp)| !dcp) {
        let other = list
            .iter()
            .map(|(p, _)| p.file)
            .find(|&f| f != first.file)
            .unwrap_or(first.file);
        return Err(ConvertError::file(
            path,
            format!(
                "tensor {name:?} is in {} too (and neither has {META_DCP_SHARDING} offsets)",
                files[other].display()
            ),
        ));
    }
    let rank = first.extents.len();
    let mut shape = vec![0u64; rank];
    for (p, _) in &list {
        if p.dtype != first.dtype || p.extents.len() != rank {
            return Err(ConvertError::file(
                &files[p.file],
                format!("tensor {name:?}: its pieces differ in dtype or rank"),
            ));
        }
        for (d, &(o, l)) in shape.iter_mut().zip(&p.extents) {
            *d = (*d).max(o + l);
        }
    }
    let elems = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
    let bytes = elems.and_then(|e| e.checked_mul(first.dtype.size() as u64));
    let (Some(elems), Some(bytes)) = (elems, bytes) else {
        return Err(ConvertError::file(
            path,
            format!("tensor {name:?}: shape {shape:?} is too large"),
        ));
    };
    let pieces: Vec<Piece> = list.into_iter().map(|(p, _)| p).collect();
    let live: Vec<&Piece> = pieces.iter().filter(|p| box_len(&p.extents) > 0).collect();
    for (i, a) in live.iter().enumerate() {
        for b in &live[i + 1..] {
            if overlap(&a.extents, &b.extents) {
                return Err(ConvertError::file(
                    &files[b.file],
                    format!(
                        "tensor {name:?}: its piece at {:?} overlaps the one at {:?} in {}",
                        b.extents.iter().map(|e| e.0).collect::<Vec<_>>(),
                        a.extents.iter().map(|e| e.0).collect::<Vec<_>>(),
                        files[a.file].display()
                    ),
                ));
            }
        }
    }
    let have: u64 = live.iter().map(|p| box_len(&p.extents)).sum();
    if have != elems {
        return Err(ConvertError::file(
            path,
            format!("tensor {name:?} of shape {shape:?}: its pieces hold {have} of its {elems} elements"),
        ));
    }
    Ok(Whole {
        name,
        key,
        dtype: first.dtype,
        shape,
        pieces,
        bytes,
    })
}

/// Converts the safetensors files of `src` to a TensorFlow checkpoint at prefix `dst`
/// (`dst.index` must not exist). See the module doc.
pub fn to_tf(
    src: &Path,
    dst: &Path,
    options: &ConvertOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<ConvertReport> {
    let start = Instant::now();
    let source = read_source(src)?;
    let tensors = &source.tensors;
    // Data shards: one per worker, filled greedily by size; the object graph in shard 0.
    let nshards = options.jobs.clamp(1, tensors.len().max(1));
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(tensors[i].bytes));
    let mut load = vec![0u64; nshards];
    let mut shard_of = vec![0usize; tensors.len()];
    for i in order {
        let s = (0..nshards).min_by_key(|&s| load[s]).unwrap_or(0);
        shard_of[i] = s;
        load[s] += tensors[i].bytes;
    }
    let index = index_path(dst);
    let files: Vec<FileReport> = (0..nshards)
        .map(|s| FileReport {
            name: unbound_bundle::data_path(dst, s as i32, nshards as i32)
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default(),
            tensors: shard_of.iter().filter(|&&x| x == s).count(),
            bytes: load[s],
        })
        .collect();
    let report = |dry_run: bool, seconds: f64| ConvertReport {
        to: Target::Tf,
        src: src.display().to_string(),
        dst: dst.display().to_string(),
        dry_run,
        bytes: tensors.iter().map(|t| t.bytes).sum(),
        files: files.clone(),
        tensors: tensors
            .iter()
            .map(|t| TensorReport {
                name: t.name.clone(),
                key: t.key.clone(),
                dtype: unbound_reshard::tf_dtype(t.dtype)
                    .map(|d| tf_name(d as i32))
                    .unwrap_or_default(),
                shape: t.shape.clone(),
                bytes: t.bytes,
                file: source.files[t.pieces[0].file].display().to_string(),
                pieces: t.pieces.len(),
            })
            .collect(),
        object_graph: source.object_graph.is_some(),
        seconds,
    };
    if index.exists() {
        return Err(ConvertError::Exists { path: index });
    }
    if options.dry_run {
        return Ok(report(true, start.elapsed().as_secs_f64()));
    }
    let handles = source
        .files
        .iter()
        .map(|p| Ok(unbound_io::open_regular(p)?.0))
        .collect::<Result<Vec<File>>>()?;
    unbound_bundle::prepare_shards(dst, nshards as i32)?;
    let shards: Vec<usize> = (0..nshards).collect();
    let written = unbound_io::run_until_error(&shards, nshards, |&s, _| {
        write_shard(dst, s, nshards, &source, &shard_of, &handles, progress)
    })?;
    let mut entries: BTreeMap<Vec<u8>, BundleEntryProto> = BTreeMap::new();
    for (finished, list) in written {
        entries.extend(list);
        finished.persist_unsynced()?;
    }
    unbound_io::sync_parent(&index);
    // Read back: every entry's bytes on disk against the checksum computed from the bytes
    // as they were read from the source. The index, written last, makes the checkpoint.
    if let Err(e) = read_back(dst, nshards, &entries) {
        for s in 0..nshards {
            let _ = std::fs::remove_file(unbound_bundle::data_path(dst, s as i32, nshards as i32));
        }
        return Err(e);
    }
    unbound_bundle::write_index(dst, nshards as i32, &entries)?;
    Ok(report(false, start.elapsed().as_secs_f64()))
}

/// Writes data shard `s`: its tensors (and in shard 0 the object graph), each streamed from
/// its pieces.
#[allow(clippy::type_complexity)]
fn write_shard(
    dst: &Path,
    s: usize,
    nshards: usize,
    source: &Source,
    shard_of: &[usize],
    handles: &[File],
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(
    unbound_bundle::FinishedShard,
    Vec<(Vec<u8>, BundleEntryProto)>,
)> {
    let mut w = ShardWriter::create_prepared(dst, s as i32, nshards as i32)?;
    let mut out = Vec::new();
    if s == 0 {
        if let Some(g) = &source.object_graph {
            let e = w.append_tensor(&Tensor::strings(vec![], [g.clone()]))?;
            out.push((OBJECT_GRAPH_KEY.as_bytes().to_vec(), e));
        }
    }
    let mut buf = Vec::new();
    let mut scratch = Vec::new();
    for (t, _) in source.tensors.iter().zip(shard_of).filter(|(_, &x)| x == s) {
        let dtype = unbound_reshard::tf_dtype(t.dtype).map_or(0, |d| d as i32);
        let shape: Vec<i64> = t.shape.iter().map(|&d| d as i64).collect();
        let e = w.append_with(dtype, &shape, |sink| {
            fill(t, source, handles, &mut buf, &mut scratch, |bytes| {
                sink.write(bytes)?;
                progress(bytes.len() as u64);
                Ok(())
            })
        })?;
        out.push((t.key.as_bytes().to_vec(), e));
    }
    Ok((w.finish()?, out))
}

/// Streams tensor `t` in row-major order to `sink`, block by block.
fn fill(
    t: &Whole,
    source: &Source,
    handles: &[File],
    buf: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    mut sink: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let elem = t.dtype.size() as u64;
    let read = |p: &Piece, buf: &mut [u8], at: u64| {
        handles[p.file]
            .read_exact_at(buf, p.start + at)
            .map_err(|e| {
                ConvertError::file(
                    &source.files[p.file],
                    format!(
                        "tensor {:?}: read failed at byte {}: {e}",
                        t.name,
                        p.start + at
                    ),
                )
            })
    };
    if let [p] = t.pieces.as_slice() {
        // One whole piece: its bytes as they lie.
        let mut done = 0u64;
        loop {
            let n = (t.bytes - done).min(BLOCK as u64) as usize;
            buf.resize(n, 0);
            read(p, buf, done)?;
            sink(buf)?;
            done += n as u64;
            if done >= t.bytes {
                return Ok(());
            }
        }
    }
    let full: Vec<(u64, u64)> = t.shape.iter().map(|&d| (0, d)).collect();
    for block in unbound_bundle::boxes::blocks(&full, elem, BLOCK as u64) {
        let n = (box_len(&block) * elem) as usize;
        buf.resize(n, 0);
        for p in &t.pieces {
            let Some(inner) = intersect(&p.extents, &block) else {
                continue;
            };
            let mut runs = Vec::new();
            for_each_box_run(&inner, &p.extents, &block, |s, d, n| {
                runs.push((s * elem, d * elem, n * elem))
            });
            let (Some(&first), Some(&last)) = (runs.first(), runs.last()) else {
                continue;
            };
            let span = last.0 + last.2 - first.0;
            let data: u64 = runs.iter().map(|r| r.2).sum();
            if span <= BLOCK as u64 && span <= 2 * data {
                // Runs close together: one read of the span holding them.
                scratch.resize(span as usize, 0);
                read(p, scratch, first.0)?;
                for (s, d, n) in runs {
                    let s = (s - first.0) as usize;
                    buf[d as usize..(d + n) as usize].copy_from_slice(&scratch[s..s + n as usize]);
                }
            } else {
                for (s, d, n) in runs {
                    read(p, &mut buf[d as usize..(d + n) as usize], s)?;
                }
            }
        }
        sink(buf)?;
    }
    Ok(())
}

/// Reads back every fixed-size entry of the data shards written and checks its checksum.
fn read_back(
    dst: &Path,
    nshards: usize,
    entries: &BTreeMap<Vec<u8>, BundleEntryProto>,
) -> Result<()> {
    let mut buf = vec![0u8; BLOCK];
    for s in 0..nshards {
        let path = unbound_bundle::data_path(dst, s as i32, nshards as i32);
        let (file, _) = unbound_io::open_regular(&path)?;
        for (key, e) in entries.iter().filter(|(_, e)| e.shard_id == s as i32) {
            if key == OBJECT_GRAPH_KEY.as_bytes() {
                continue;
            }
            let (mut done, len) = (0u64, e.size as u64);
            let mut c = 0u32;
            while done < len {
                let n = (len - done).min(BLOCK as u64) as usize;
                file.read_exact_at(&mut buf[..n], e.offset as u64 + done)
                    .map_err(|err| ConvertError::os(&path, err))?;
                c = unbound_bundle::crc::extend(c, &buf[..n]);
                done += n as u64;
            }
            if unbound_bundle::crc::mask(c) != e.crc32c {
                return Err(ConvertError::file(
                    &path,
                    format!(
                        "tensor {}: what was written does not read back (checksum mismatch)",
                        unbound_bundle::display_key(key)
                    ),
                ));
            }
        }
    }
    Ok(())
}

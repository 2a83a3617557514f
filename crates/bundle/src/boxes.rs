//! Reading any box of a variable, however it is stored: whole, or as slices (a partitioned
//! or DTensor checkpoint) spread over several data shards. A box is assembled from the stored
//! pieces that intersect it, as TensorFlow's `BundleReader::GetSliceValue` does; a box the
//! pieces do not cover, and pieces that overlap, are errors naming the key (never filled
//! with zeros).
//!
//! Fixed-size values are copied with positional reads straight from the data files into the
//! caller's buffer (no mapping is touched, so resident memory stays at the buffer), in
//! blocks of bounded size. Checksums are checked without reading anything twice when the
//! pieces are read whole: the CRC32C of every run read is recorded and runs that meet are
//! combined ([`crc32c::crc32c_combine`]); a piece read only in part is read once more in full
//! when [`BoxReader::finish`] checks it. String pieces are decoded whole (checked by their
//! own checksums).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use unbound_proto::tensorflow::BundleEntryProto;

use crate::dtype::{storage, tf_name, Storage};
use crate::error::{BundleError, Result};
use crate::ordered_code::encode_tensor_name_slice;
use crate::reader::BundleReader;
use crate::slices::{box_len, for_each_box_run, intersect, overlap, SliceSpec};
use crate::tensor::TensorData;

/// Most pieces accepted for one variable (the overlap check is quadratic).
const MAX_PIECES: usize = 1 << 14;

/// Runs shorter than this are gathered by reading the span that holds them at once (as are
/// runs that fill most of their span).
const SMALL_RUN: u64 = 4096;

/// Largest span read at once to gather small runs.
const MAX_SPAN: u64 = 4 << 20;

/// One stored piece of a variable: a slice entry, or the whole tensor's own entry.
#[derive(Debug, Clone)]
pub struct StoredPiece {
    /// The slice it holds (all `-` for a whole tensor stored in one piece).
    pub slice: SliceSpec,
    /// Start and length per dimension within the full tensor.
    pub extents: Vec<(u64, u64)>,
    /// The key its bytes are stored under.
    pub key: Vec<u8>,
    /// Its index entry (shard, offset, size, checksum).
    pub entry: BundleEntryProto,
}

/// A variable as stored: dtype, full shape and the pieces holding its values, checked
/// against the index and the data files' sizes (not yet their checksums).
#[derive(Debug, Clone)]
pub struct StoredVariable {
    /// The variable's key.
    pub key: Vec<u8>,
    /// The `tensorflow.DataType` value.
    pub dtype: i32,
    /// The full shape.
    pub shape: Vec<i64>,
    /// The pieces, in index order; pairwise disjoint.
    pub pieces: Vec<StoredPiece>,
}

impl StoredVariable {
    /// The whole tensor as a box.
    pub fn full_box(&self) -> Vec<(u64, u64)> {
        self.shape.iter().map(|&d| (0, d as u64)).collect()
    }

    /// Bytes per element, for fixed-size dtypes.
    pub fn element_size(&self) -> Option<usize> {
        match storage(self.dtype) {
            Storage::Fixed(n) => Some(n),
            _ => None,
        }
    }

    /// Whether the pieces hold every element of `region` (they are disjoint, so counting
    /// suffices); the error says how many they hold.
    pub fn check_covers(&self, region: &[(u64, u64)]) -> std::result::Result<(), crate::Fault> {
        let want = box_len(region);
        let have: u64 = self
            .pieces
            .iter()
            .filter_map(|p| intersect(&p.extents, region))
            .map(|i| box_len(&i))
            .sum();
        if have == want {
            return Ok(());
        }
        let text = region
            .iter()
            .map(|&(s, l)| format!("{s},{l}"))
            .collect::<Vec<_>>()
            .join(":");
        Err(crate::Fault(format!(
            "its stored slices hold {have} of the {want} elements of box {text} (a slice is missing)"
        )))
    }
}

impl BundleReader {
    /// The pieces variable `key` is stored in, checked: each slice fits the full shape and
    /// has an entry of the variable's dtype and of the slice's shape inside its data file,
    /// and no two pieces overlap. Coverage is checked per box ([`StoredVariable::check_covers`]).
    pub fn stored_variable(&self, key: impl AsRef<[u8]>) -> Result<StoredVariable> {
        let key = key.as_ref();
        let entry = self.lookup(key)?;
        let fault = |f: String| BundleError::tensor(self.index_path(), key, f);
        let shape = self.entry_shape(key, entry)?;
        if entry.slices.is_empty() {
            self.checked_bytes(key, entry)?;
            let slice = SliceSpec::new(shape.iter().map(|_| (0, None)).collect());
            return Ok(StoredVariable {
                key: key.to_vec(),
                dtype: entry.dtype,
                pieces: vec![StoredPiece {
                    extents: shape.iter().map(|&d| (0, d as u64)).collect(),
                    slice,
                    key: key.to_vec(),
                    entry: entry.clone(),
                }],
                shape,
            });
        }
        if entry.slices.len() > MAX_PIECES {
            return Err(fault(format!(
                "{} slices (at most {MAX_PIECES} supported)",
                entry.slices.len()
            )));
        }
        let mut pieces: Vec<StoredPiece> = Vec::with_capacity(entry.slices.len());
        for proto in &entry.slices {
            let slice = SliceSpec::from_proto(proto);
            let extents = slice.resolve(&shape).map_err(|f| fault(f.into()))?;
            if let Some(other) = pieces.iter().find(|p| overlap(&p.extents, &extents)) {
                return Err(fault(format!(
                    "stored slices {} and {slice} overlap",
                    other.slice
                )));
            }
            let slice_key = encode_tensor_name_slice(key, &slice);
            let slice_entry = self
                .entry(&slice_key)
                .ok_or_else(|| fault(format!("slice {slice} has no entry in the index")))?;
            let want: Vec<i64> = extents.iter().map(|&(_, l)| l as i64).collect();
            let got = self.entry_shape(&slice_key, slice_entry)?;
            if slice_entry.dtype != entry.dtype || got != want || !slice_entry.slices.is_empty() {
                return Err(fault(format!(
                    "slice {slice} is stored with dtype {} and shape {got:?}, expected dtype {} and shape {want:?}",
                    tf_name(slice_entry.dtype),
                    tf_name(entry.dtype)
                )));
            }
            self.checked_bytes(&slice_key, slice_entry)?;
            pieces.push(StoredPiece {
                slice,
                extents,
                key: slice_key,
                entry: slice_entry.clone(),
            });
        }
        Ok(StoredVariable {
            key: key.to_vec(),
            dtype: entry.dtype,
            shape,
            pieces,
        })
    }
}

/// The checksum runs seen of one stored entry: disjoint byte ranges with their CRC32C,
/// ranges that meet merged.
#[derive(Debug, Default)]
struct Runs {
    /// start -> (length, crc)
    ranges: BTreeMap<u64, (u64, u32)>,
}

impl Runs {
    fn add(&mut self, start: u64, len: u64, crc: u32) {
        if len == 0 {
            return;
        }
        let end = start + len;
        // Overlapping another range: not recorded (the entry is then read again in full).
        if let Some((&s, &(l, _))) = self.ranges.range(..end).next_back() {
            if s + l > start {
                return;
            }
        }
        let (mut start, mut len, mut crc) = (start, len, crc);
        if let Some((&s, &(l, c))) = self.ranges.range(..start).next_back() {
            if s + l == start {
                self.ranges.remove(&s);
                crc = crc32c::crc32c_combine(c, crc, len as usize);
                start = s;
                len += l;
            }
        }
        if let Some(&(l, c)) = self.ranges.get(&end) {
            self.ranges.remove(&end);
            crc = crc32c::crc32c_combine(crc, c, l as usize);
            len += l;
        }
        self.ranges.insert(start, (len, crc));
    }

    /// The CRC of bytes `0..size` when the runs cover exactly that.
    fn whole(&self, size: u64) -> Option<u32> {
        match self.ranges.iter().next() {
            Some((&0, &(l, c))) if l == size && self.ranges.len() == 1 => Some(c),
            None if size == 0 => Some(0),
            _ => None,
        }
    }
}

/// Reads boxes of variables from one bundle; checks the checksums of everything it read when
/// finished. Shareable between threads.
pub struct BoxReader<'a> {
    reader: &'a BundleReader,
    files: Mutex<HashMap<i32, Arc<File>>>,
    /// Checksum runs by piece key, with the piece's entry.
    runs: Mutex<HashMap<Vec<u8>, (BundleEntryProto, Runs)>>,
}

impl<'a> BoxReader<'a> {
    /// A box reader over `reader`.
    pub fn new(reader: &'a BundleReader) -> Self {
        Self {
            reader,
            files: Mutex::new(HashMap::new()),
            runs: Mutex::new(HashMap::new()),
        }
    }

    /// The bundle read.
    pub fn bundle(&self) -> &BundleReader {
        self.reader
    }

    fn file(&self, shard: i32) -> Result<(PathBuf, Arc<File>)> {
        let path = self.reader.data_path(shard);
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = files.get(&shard) {
            return Ok((path, f.clone()));
        }
        // The one input rule: a regular file (symlinks followed), never a FIFO that blocks.
        let f = Arc::new(unbound_io::open_regular(&path)?.0);
        files.insert(shard, f.clone());
        Ok((path, f))
    }

    fn record(&self, piece: &StoredPiece, start: u64, bytes: &[u8]) {
        let crc = crc32c::crc32c(bytes);
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        runs.entry(piece.key.clone())
            .or_insert_with(|| (piece.entry.clone(), Runs::default()))
            .1
            .add(start, bytes.len() as u64, crc);
    }

    /// Copies the elements of `region` of fixed-size variable `var` into `out` (row-major
    /// within the box; `out` holds exactly the box). Fails when the pieces do not cover the
    /// box or a read fails; checksums are checked by [`Self::finish`].
    pub fn read_into(
        &self,
        var: &StoredVariable,
        region: &[(u64, u64)],
        out: &mut [u8],
    ) -> Result<()> {
        let elem = fixed_size(var)? as u64;
        if out.len() as u64 != box_len(region) * elem {
            return Err(BundleError::Invalid(format!(
                "{}: a buffer of {} bytes for a box of {} elements",
                crate::display_key(&var.key),
                out.len(),
                box_len(region)
            )));
        }
        var.check_covers(region)
            .map_err(|f| BundleError::tensor(self.reader.index_path(), &var.key, f))?;
        let mut scratch = Vec::new();
        for piece in &var.pieces {
            let Some(inner) = intersect(&piece.extents, region) else {
                continue;
            };
            let (path, file) = self.file(piece.entry.shard_id)?;
            let base = piece.entry.offset as u64;
            let read_at = |buf: &mut [u8], at: u64| {
                read_exact_at(&file, buf, base + at).map_err(|e| {
                    BundleError::tensor(
                        &path,
                        &piece.key,
                        format!("read failed at byte {}: {e}", base + at),
                    )
                })
            };
            let (runs, gather) = piece_runs(&inner, &piece.extents, region, elem);
            let (first, last) = (runs[0], runs[runs.len() - 1]);
            if gather {
                let span = last.0 + last.2 - first.0;
                scratch.resize(span as usize, 0);
                read_at(&mut scratch, first.0)?;
                self.record(piece, first.0, &scratch);
                for (s, d, n) in runs {
                    let s = (s - first.0) as usize;
                    out[d as usize..(d + n) as usize].copy_from_slice(&scratch[s..s + n as usize]);
                }
            } else {
                for (s, d, n) in runs {
                    let dst = &mut out[d as usize..(d + n) as usize];
                    read_at(dst, s)?;
                    self.record(piece, s, dst);
                }
            }
        }
        Ok(())
    }

    /// Streams the elements of `region` of fixed-size variable `var` to `sink` in row-major
    /// order, in blocks of at most `budget` bytes (or one row of the last dimension when that
    /// is larger). Returns the byte count.
    pub fn stream<E: From<BundleError>>(
        &self,
        var: &StoredVariable,
        region: &[(u64, u64)],
        budget: usize,
        mut sink: impl FnMut(&[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<u64, E> {
        let elem = fixed_size(var)? as u64;
        var.check_covers(region)
            .map_err(|f| BundleError::tensor(self.reader.index_path(), &var.key, f))?;
        let mut buf = Vec::new();
        let mut total = 0u64;
        for block in blocks(region, elem, budget as u64) {
            let n = (box_len(&block) * elem) as usize;
            buf.resize(n, 0);
            self.read_into(var, &block, &mut buf)?;
            sink(&buf)?;
            total += n as u64;
        }
        Ok(total)
    }

    /// The elements of `region` of a string variable, row-major. Each piece intersecting
    /// the box is decoded whole (its checksums checked).
    pub fn read_strings(&self, var: &StoredVariable, region: &[(u64, u64)]) -> Result<Vec<Bytes>> {
        if storage(var.dtype) != Storage::String {
            return Err(BundleError::Unsupported {
                key: crate::display_key(&var.key),
                what: format!("{} values are not strings", tf_name(var.dtype)),
            });
        }
        var.check_covers(region)
            .map_err(|f| BundleError::tensor(self.reader.index_path(), &var.key, f))?;
        let mut out = vec![Bytes::new(); box_len(region) as usize];
        for piece in &var.pieces {
            let Some(inner) = intersect(&piece.extents, region) else {
                continue;
            };
            let t = self.reader.read_stored(&piece.key, &piece.entry)?;
            let TensorData::Strings(values) = t.data else {
                continue;
            };
            for_each_box_run(&inner, &piece.extents, region, |s, d, n| {
                let (s, d, n) = (s as usize, d as usize, n as usize);
                out[d..d + n].clone_from_slice(&values[s..s + n]);
            });
        }
        Ok(out)
    }

    /// Streams the stored bytes of entry `key` (any dtype, as they are in the data file) to
    /// `sink` in pieces of at most `budget` bytes, checking its checksum at the end (an error
    /// after `sink` saw every piece if it does not match). Returns the entry.
    pub fn copy_entry<E: From<BundleError>>(
        &self,
        key: &[u8],
        budget: usize,
        mut sink: impl FnMut(&[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<BundleEntryProto, E> {
        let entry = self.reader.lookup(key)?.clone();
        self.reader.checked_bytes(key, &entry)?;
        let (path, file) = self.file(entry.shard_id)?;
        let (start, len) = (entry.offset as u64, entry.size as u64);
        let mut buf = vec![0u8; budget.max(1).min(len as usize)];
        let mut c = 0;
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(buf.len() as u64) as usize;
            let at = start + done;
            read_exact_at(&file, &mut buf[..n], at).map_err(|e| {
                BundleError::tensor(&path, key, format!("read failed at byte {at}: {e}"))
            })?;
            c = crc32c::crc32c_append(c, &buf[..n]);
            sink(&buf[..n])?;
            done += n as u64;
        }
        crate::reader::check_crc(&path, key, &entry, c)?;
        Ok(entry)
    }

    /// Checks the checksum of every piece read from: combined from the runs read when they
    /// cover the piece, otherwise by reading the piece again in full.
    pub fn finish(self) -> Result<()> {
        let runs = self.runs.into_inner().unwrap_or_else(|e| e.into_inner());
        let mut keys: Vec<_> = runs.into_iter().collect();
        keys.sort_by(|a, b| a.0.cmp(&b.0));
        for (key, (entry, runs)) in keys {
            match runs.whole(entry.size as u64) {
                Some(c) => {
                    let path = self.reader.data_path(entry.shard_id);
                    crate::reader::check_crc(&path, &key, &entry, c)?;
                }
                None => {
                    self.reader
                        .for_each_raw_chunk(&key, |_| Ok::<(), BundleError>(()))?;
                }
            }
        }
        Ok(())
    }
}

/// The runs (start in the piece, start in the box, length; in bytes) that copy the
/// intersection `inner` of a piece with extents `extents` into a box `region`, and whether
/// they are read as one span (small runs, or runs that fill most of their span) rather than
/// one by one. The one rule [`BoxReader::read_into`] and [`StoredVariable::read_ranges`]
/// follow.
fn piece_runs(
    inner: &[(u64, u64)],
    extents: &[(u64, u64)],
    region: &[(u64, u64)],
    elem: u64,
) -> (Vec<(u64, u64, u64)>, bool) {
    let mut runs = Vec::new();
    for_each_box_run(inner, extents, region, |s, d, n| {
        runs.push((s * elem, d * elem, n * elem))
    });
    let gather = match (runs.first(), runs.last()) {
        (Some(first), Some(last)) => {
            let span = last.0 + last.2 - first.0;
            let data: u64 = runs.iter().map(|r| r.2).sum();
            span <= MAX_SPAN && (first.2 < SMALL_RUN || span <= data + data / 2)
        }
        _ => false,
    };
    (runs, gather)
}

impl StoredVariable {
    /// The byte ranges of the stored pieces that streaming `region` of this fixed-size
    /// variable in blocks of `budget` bytes ([`BoxReader::stream`]) reads: (index into
    /// [`Self::pieces`], start within the piece's data, length). Nothing is read; this is
    /// what a dry run counts as the bytes read. `None` for values of no fixed size.
    pub fn read_ranges(
        &self,
        region: &[(u64, u64)],
        budget: usize,
    ) -> Option<Vec<(usize, u64, u64)>> {
        let elem = self.element_size()? as u64;
        let mut out = Vec::new();
        for block in blocks(region, elem, budget as u64) {
            for (i, piece) in self.pieces.iter().enumerate() {
                let Some(inner) = intersect(&piece.extents, &block) else {
                    continue;
                };
                let (runs, gather) = piece_runs(&inner, &piece.extents, &block, elem);
                match (gather, runs.first(), runs.last()) {
                    (true, Some(first), Some(last)) => {
                        out.push((i, first.0, last.0 + last.2 - first.0))
                    }
                    _ => out.extend(runs.iter().map(|r| (i, r.0, r.2))),
                }
            }
        }
        Some(out)
    }
}

fn fixed_size(var: &StoredVariable) -> Result<usize> {
    var.element_size().ok_or_else(|| BundleError::Unsupported {
        key: crate::display_key(&var.key),
        what: format!("{} values have no fixed size", tf_name(var.dtype)),
    })
}

/// Cuts `region` into boxes that follow each other in its row-major order, each at most
/// `budget` bytes (or one run of the last dimension when that alone is larger).
pub fn blocks(region: &[(u64, u64)], elem: u64, budget: u64) -> Vec<Vec<(u64, u64)>> {
    let rank = region.len();
    if rank == 0 || box_len(region) == 0 {
        return vec![region.to_vec()];
    }
    // The first dimension whose trailing block (one index of it and of every dimension
    // before it) fits the budget.
    let mut inner = vec![elem; rank];
    for d in (0..rank - 1).rev() {
        inner[d] = inner[d + 1] * region[d + 1].1;
    }
    let d = (0..rank).find(|&d| inner[d] <= budget).unwrap_or(rank - 1);
    let step = (budget / inner[d]).max(1);
    let mut out = Vec::new();
    let mut index = vec![0u64; d];
    loop {
        let mut start = 0;
        while start < region[d].1 {
            let len = step.min(region[d].1 - start);
            let mut b: Vec<(u64, u64)> = (0..d).map(|k| (region[k].0 + index[k], 1)).collect();
            b.push((region[d].0 + start, len));
            b.extend_from_slice(&region[d + 1..]);
            out.push(b);
            start += len;
        }
        let mut k = d;
        loop {
            if k == 0 {
                return out;
            }
            k -= 1;
            index[k] += 1;
            if index[k] < region[k].1 {
                break;
            }
            index[k] = 0;
        }
    }
}

/// Reads exactly `buf.len()` bytes at `offset`.
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        file.read_exact_at(buf, offset)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = file;
        f.seek(SeekFrom::Start(offset))?;
        f.read_exact(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_follow_row_major_order() {
        let region = [(2, 3), (0, 4)];
        // 4 bytes per element, rows of 16 bytes: two rows per block of 32.
        let b = blocks(&region, 4, 32);
        assert_eq!(b, vec![vec![(2, 2), (0, 4)], vec![(4, 1), (0, 4)]]);
        // A budget below one row cuts rows.
        let b = blocks(&region, 4, 8);
        assert_eq!(b.len(), 6);
        assert_eq!(b[1], vec![(2, 1), (2, 2)]);
        let total: u64 = b.iter().map(|x| box_len(x)).sum();
        assert_eq!(total, 12);
    }

    #[test]
    fn runs_merge_and_combine_checksums() {
        let data: Vec<u8> = (0..100u8).collect();
        let mut r = Runs::default();
        r.add(50, 50, crc32c::crc32c(&data[50..]));
        r.add(0, 20, crc32c::crc32c(&data[..20]));
        assert_eq!(r.whole(100), None);
        r.add(20, 30, crc32c::crc32c(&data[20..50]));
        assert_eq!(r.whole(100), Some(crc32c::crc32c(&data)));
        // An overlapping run is dropped, never double counted.
        r.add(10, 20, 0);
        assert_eq!(r.whole(100), Some(crc32c::crc32c(&data)));
    }
}

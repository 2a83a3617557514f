//! NumPy `.npy` (format version 1.0) output of bundle tensors.
//!
//! Numeric tensors are written with their little-endian NumPy dtype (`<f4`, `<i8`, `|b1`,
//! `<f2` for float16, `<c8`/`<c16` for complex, ...), streamed from the mapped data file in
//! 1 MiB pieces with the checksum verified on the way. Where NumPy has no dtype:
//!
//! - **bfloat16** is widened to `<f4`, which is exact (every bfloat16 is a float32 whose
//!   low 16 bits are zero; NaN payloads and signed zeros are kept). With
//!   [`NpyOptions::raw_bits`] the stored bits are written as `<u2` instead.
//! - **float8 / float4 / int4 / uint4 / int2 / uint2** are refused unless
//!   [`NpyOptions::raw_bits`], which writes each element's stored byte as `|u1`.
//! - **qint8 / quint8 / qint16 / quint16 / qint32** are written as their storage integers
//!   (`|i1`, `|u1`, `<i2`, `<u2`, `<i4`).
//! - **strings** become a fixed-width byte-string array `|S<n>` (n the longest element, at
//!   least 1; no Python objects needed to load it), each element padded with zero bytes.
//!   NumPy drops trailing zero bytes when it reads such an element back, so a tensor with an
//!   element ending in a zero byte is refused rather than silently changed, as is one whose
//!   padding would more than quadruple its size (beyond 64 MiB).
//! - variant and resource tensors are refused.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use unbound_proto::tensorflow::DataType;

use crate::dtype::tf_name;
use crate::npy_header::parse_header_dict;
use crate::{display_key, BundleError, BundleReader, Fault, TensorData, CHUNK_SIZE};

/// Choices for types NumPy has no dtype for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NpyOptions {
    /// Write bfloat16 as its `<u2` bits (instead of widening to `<f4`), and float8, float4
    /// and sub-byte integers as their stored bytes (`|u1`) instead of refusing them.
    pub raw_bits: bool,
}

/// What was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyInfo {
    /// The NumPy dtype descriptor, e.g. `<f4`.
    pub descr: String,
    /// The array shape.
    pub shape: Vec<i64>,
    /// Size of the `.npy` file in bytes.
    pub file_bytes: u64,
    /// A note on a conversion made, if any.
    pub note: Option<String>,
}

/// Why a tensor could not be written as `.npy`.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// Reading the tensor failed.
    #[error(transparent)]
    Bundle(#[from] BundleError),
    /// The tensor has no `.npy` form under the chosen options.
    #[error("tensor {key}: {what}")]
    Unsupported {
        /// The tensor key.
        key: String,
        /// Why.
        what: String,
    },
    /// A `.npy` file to read is not one, or holds what cannot be read (Fortran order,
    /// Python objects, data shorter or longer than the header says).
    #[error("{}: {what}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// Writing the output failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The output file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl From<unbound_io::IoError> for NpyError {
    fn from(error: unbound_io::IoError) -> Self {
        match error {
            unbound_io::IoError::Os { path, source } => NpyError::Io { path, source },
            other => NpyError::Io {
                path: other.path().to_path_buf(),
                source: std::io::Error::other(other.to_string()),
            },
        }
    }
}

/// How a dtype is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// The stored bytes as they are, under this descriptor.
    Copy(&'static str),
    /// bfloat16 widened to float32.
    Bf16ToF32,
    /// Fixed-width byte strings.
    Strings,
}

fn layout(dtype: i32, opts: NpyOptions) -> Result<Layout, String> {
    use DataType::*;
    let dt = DataType::try_from(dtype).map_err(|_| format!("unknown dtype {dtype}"))?;
    Ok(Layout::Copy(match dt {
        DtFloat => "<f4",
        DtDouble => "<f8",
        DtHalf => "<f2",
        DtInt8 | DtQint8 => "|i1",
        DtUint8 | DtQuint8 => "|u1",
        DtInt16 | DtQint16 => "<i2",
        DtUint16 | DtQuint16 => "<u2",
        DtInt32 | DtQint32 => "<i4",
        DtUint32 => "<u4",
        DtInt64 => "<i8",
        DtUint64 => "<u8",
        DtBool => "|b1",
        DtComplex64 => "<c8",
        DtComplex128 => "<c16",
        DtBfloat16 if opts.raw_bits => "<u2",
        DtBfloat16 => return Ok(Layout::Bf16ToF32),
        DtString => return Ok(Layout::Strings),
        DtFloat8E5m2 | DtFloat8E4m3fn | DtFloat8E4m3fnuz | DtFloat8E4m3b11fnuz
        | DtFloat8E5m2fnuz | DtInt4 | DtUint4 | DtInt2 | DtUint2 | DtFloat4E2m1fn => {
            if opts.raw_bits {
                "|u1"
            } else {
                return Err(format!(
                    "{} has no NumPy dtype; use raw bits (--raw-bits) to write its stored bytes as uint8",
                    tf_name(dtype)
                ));
            }
        }
        _ => return Err(format!("{} tensors have no .npy form", tf_name(dtype))),
    }))
}

/// The `.npy` v1.0 header for an array of `descr` and `shape`, padded so the data starts at
/// a multiple of 64 bytes.
pub fn header(descr: &str, shape: &[i64]) -> Result<Vec<u8>, Fault> {
    header_impl(descr, shape).map_err(Fault)
}

fn header_impl(descr: &str, shape: &[i64]) -> Result<Vec<u8>, String> {
    // Written between single quotes, unescaped: anything else would not read back.
    if !descr
        .bytes()
        .all(|b| b.is_ascii_graphic() && b != b'\'' && b != b'\\')
    {
        return Err(format!(
            "descr {descr:?} cannot be written in a .npy header"
        ));
    }
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let unpadded = 10 + dict.len() + 1;
    dict.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    dict.push('\n');
    let len = u16::try_from(dict.len()).map_err(|_| "shape too long for a .npy v1.0 header")?;
    let mut out = Vec::with_capacity(10 + dict.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    Ok(out)
}

/// A whole `.npy` array as stored: its descriptor (`<f4`, `|S5`, `<V2`, ...), shape and
/// data bytes in C order, untouched (byte order as the descriptor says).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyArray {
    /// The NumPy dtype descriptor.
    pub descr: String,
    /// The shape.
    pub shape: Vec<i64>,
    /// The data bytes.
    pub data: Vec<u8>,
}

/// The size in bytes of one element of a plain (non-structured, non-object) descriptor:
/// `<f4` is 4, `|S5` is 5, `<U3` is 12, `|b1` is 1; `None` for `|O` and anything else.
pub fn descr_itemsize(descr: &str) -> Option<usize> {
    let body = descr.strip_prefix(['<', '>', '|', '=']).unwrap_or(descr);
    let mut chars = body.chars();
    let kind = chars.next()?;
    let n: usize = chars.as_str().parse().ok()?;
    match kind {
        'b' | 'i' | 'u' | 'f' | 'c' | 'V' | 'S' | 'm' | 'M' if n > 0 => Some(n),
        'U' if n > 0 => n.checked_mul(4),
        _ => None,
    }
}

/// Reads the header of `.npy` bytes: descriptor, shape and where the data starts, as NumPy
/// reads them or refused (`npy_header::parse_header_dict`). `path` names the file in errors.
pub fn parse_npy_header(bytes: &[u8], path: &Path) -> Result<(String, Vec<i64>, usize), NpyError> {
    let bad = |what: String| NpyError::Malformed {
        path: path.to_path_buf(),
        what,
    };
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("not a .npy file (no \\x93NUMPY magic)".into()));
    }
    let (len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10usize),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(bad(format!(".npy format version {v} is not supported"))),
    };
    let end = start
        .checked_add(len)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| {
            bad(format!(
                "header of {len} bytes runs past the end of the file ({} bytes)",
                bytes.len()
            ))
        })?;
    let header = parse_header_dict(&bytes[start..end], bytes[6]).map_err(bad)?;
    if header.fortran_order {
        return Err(bad(
            "Fortran-order arrays are not supported; save with C order".into(),
        ));
    }
    let (descr, shape) = (header.descr, header.shape);
    Ok((descr, shape, end))
}

/// Reads a whole `.npy` file. The data size is checked against the header before it is
/// used; object arrays (`|O`, pickled Python objects) are refused.
pub fn read_npy(path: &Path) -> Result<NpyArray, NpyError> {
    let bytes = unbound_io::read_file(path, u64::MAX)?;
    let (descr, shape, start) = parse_npy_header(&bytes, path)?;
    let bad = |what: String| NpyError::Malformed {
        path: path.to_path_buf(),
        what,
    };
    let item = descr_itemsize(&descr).ok_or_else(|| {
        bad(format!(
            "dtype {descr:?} has no fixed-size elements (object arrays are not read)"
        ))
    })?;
    let want = shape
        .iter()
        .try_fold(item as u64, |acc, &d| acc.checked_mul(d as u64))
        .ok_or_else(|| bad(format!("shape {shape:?} overflows")))?;
    let have = (bytes.len() - start) as u64;
    if have != want {
        return Err(bad(format!(
            "{have} data bytes, but shape {shape:?} of {descr} needs {want}"
        )));
    }
    let mut data = bytes;
    data.drain(..start);
    Ok(NpyArray { descr, shape, data })
}

/// Writes `data` (C order, already in the byte order of `descr`) as a `.npy` file at `path`
/// atomically: a temporary file beside it, synced, then renamed.
pub fn write_npy_bytes(
    path: &Path,
    descr: &str,
    shape: &[i64],
    data: &[u8],
) -> Result<NpyInfo, NpyError> {
    let bad = |what: String| NpyError::Malformed {
        path: path.to_path_buf(),
        what,
    };
    let item =
        descr_itemsize(descr).ok_or_else(|| bad(format!("dtype {descr:?} cannot be written")))?;
    let want = shape.iter().try_fold(item as u64, |acc, &d| {
        acc.checked_mul(u64::try_from(d).ok()?)
    });
    if want != Some(data.len() as u64) {
        return Err(bad(format!(
            "{} data bytes for shape {shape:?} of {descr}",
            data.len()
        )));
    }
    let head = header(descr, shape).map_err(|f| bad(f.into()))?;
    let io = |e| NpyError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    unbound_io::write_atomically(path, |out| {
        out.write_all(&head).map_err(io)?;
        out.write_all(data).map_err(io)?;
        Ok::<_, NpyError>(())
    })?;
    Ok(NpyInfo {
        descr: descr.to_string(),
        shape: shape.to_vec(),
        file_bytes: (head.len() + data.len()) as u64,
        note: None,
    })
}

/// Writes tensor `key` as `.npy` to `out` (streamed; nothing buffered beyond a piece).
/// `out_name` names the output in errors. Returns what was written; on error, `out` holds a
/// partial file.
pub fn write_npy_to(
    reader: &BundleReader,
    key: &[u8],
    out: &mut dyn Write,
    opts: NpyOptions,
    out_name: &Path,
) -> Result<NpyInfo, NpyError> {
    write_impl(reader, key, out, opts, out_name)
}

fn write_impl(
    reader: &BundleReader,
    key: &[u8],
    out: &mut dyn Write,
    opts: NpyOptions,
    out_name: &Path,
) -> Result<NpyInfo, NpyError> {
    let unsupported = |what: String| NpyError::Unsupported {
        key: display_key(key),
        what,
    };
    let entry = reader.entry(key).ok_or_else(|| BundleError::NotFound {
        file: reader.index_path().to_path_buf(),
        key: display_key(key),
    })?;
    let shape = reader.entry_shape(key, entry)?;
    let io = |e| NpyError::Io {
        path: out_name.to_path_buf(),
        source: e,
    };
    let lay = layout(entry.dtype, opts).map_err(unsupported)?;
    let (descr, note, strings) = match lay {
        Layout::Copy(d) => (d.to_string(), None, None),
        Layout::Bf16ToF32 => (
            "<f4".to_string(),
            Some("bfloat16 widened exactly to float32".to_string()),
            None,
        ),
        Layout::Strings => {
            let t = reader.read(key)?;
            let TensorData::Strings(values) = t.data else {
                return Err(unsupported("string tensor without strings".into()));
            };
            let width = check_strings(&values).map_err(unsupported)?;
            (format!("|S{width}"), None, Some((values, width)))
        }
    };
    let head = header(&descr, &shape).map_err(|f| unsupported(f.into()))?;
    out.write_all(&head).map_err(io)?;
    let mut written = head.len() as u64;
    match (lay, strings) {
        (Layout::Strings, Some((values, width))) => {
            let mut out = BufWriter::with_capacity(CHUNK_SIZE, &mut *out);
            let zeros = vec![0u8; width];
            for v in &values {
                out.write_all(v).map_err(io)?;
                out.write_all(&zeros[v.len()..]).map_err(io)?;
                written += width as u64;
            }
            out.flush().map_err(io)?;
        }
        (Layout::Bf16ToF32, _) => {
            let mut wide = Vec::with_capacity(2 * CHUNK_SIZE);
            written += reader.for_each_raw_chunk(key, |piece| {
                wide.clear();
                wide.extend(piece.chunks_exact(2).flat_map(|b| [0, 0, b[0], b[1]]));
                out.write_all(&wide).map_err(io)
            })? * 2;
        }
        _ => {
            written += reader.for_each_raw_chunk(key, |piece| out.write_all(piece).map_err(io))?;
        }
    }
    Ok(NpyInfo {
        descr,
        shape,
        file_bytes: written,
        note,
    })
}

/// The fixed width of a string tensor's `|S` array, or why it cannot be one.
fn check_strings(values: &[Bytes]) -> Result<usize, String> {
    let width = values.iter().map(Bytes::len).max().unwrap_or(0).max(1);
    if let Some(i) = values.iter().position(|v| v.last() == Some(&0)) {
        return Err(format!(
            "string element {i} ends with a zero byte, which NumPy's fixed-width |S type drops on reading; refusing to write a changed value"
        ));
    }
    let stored: u64 = values.iter().map(|v| v.len() as u64).sum();
    let padded = (width as u64).saturating_mul(values.len() as u64);
    if padded > (4 * stored).max(64 << 20) {
        return Err(format!(
            "as fixed-width |S{width} the {} strings would take {padded} bytes for {stored} bytes of data; refusing",
            values.len()
        ));
    }
    Ok(width)
}

/// Writes tensor `key` as `.npy` to `path` atomically: a temporary file beside it, synced,
/// then renamed; nothing is left at `path` (or beside it) on error.
pub fn write_npy(
    reader: &BundleReader,
    key: &[u8],
    path: &Path,
    opts: NpyOptions,
) -> Result<NpyInfo, NpyError> {
    // Pieces of CHUNK_SIZE pass straight through the writer's buffer; the header and padded
    // strings gather in it.
    unbound_io::write_atomically(path, |out| write_impl(reader, key, out, opts, path))
}

/// Writes box `request` (TensorFlow's `shape_and_slice`, e.g. `8 16 2,4:3,10`) of variable
/// `key` as `.npy` to `path` atomically, assembled from whatever slices the variable is
/// stored in ([`crate::BoxReader`]): fixed-size values streamed in blocks of
/// [`CHUNK_SIZE`], every piece read checked against its checksum before the file is
/// renamed into place. A box the stored slices do not cover is an error.
pub fn write_box_npy(
    reader: &BundleReader,
    key: &[u8],
    request: &crate::ShapeAndSlice,
    path: &Path,
    opts: NpyOptions,
) -> Result<NpyInfo, NpyError> {
    let unsupported = |what: String| NpyError::Unsupported {
        key: display_key(key),
        what,
    };
    let var = reader.stored_variable(key)?;
    let region = request
        .resolve(&var.shape)
        .map_err(|f| BundleError::tensor(reader.index_path(), key, f.0))?;
    let shape: Vec<i64> = region.iter().map(|&(_, l)| l as i64).collect();
    let lay = layout(var.dtype, opts).map_err(unsupported)?;
    let boxes = crate::BoxReader::new(reader);
    let io = |e| NpyError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let info = unbound_io::write_atomically(path, |out| {
        let (descr, note) = match lay {
            Layout::Copy(d) => (d.to_string(), None),
            Layout::Bf16ToF32 => (
                "<f4".to_string(),
                Some("bfloat16 widened exactly to float32".to_string()),
            ),
            Layout::Strings => {
                let values = boxes.read_strings(&var, &region)?;
                let width = check_strings(&values).map_err(unsupported)?;
                let descr = format!("|S{width}");
                let head = header(&descr, &shape).map_err(|f| unsupported(f.into()))?;
                out.write_all(&head).map_err(io)?;
                let zeros = vec![0u8; width];
                for v in &values {
                    out.write_all(v).map_err(io)?;
                    out.write_all(&zeros[v.len()..]).map_err(io)?;
                }
                let file_bytes = head.len() as u64 + width as u64 * values.len() as u64;
                return Ok(NpyInfo {
                    descr,
                    shape: shape.clone(),
                    file_bytes,
                    note: None,
                });
            }
        };
        let head = header(&descr, &shape).map_err(|f| unsupported(f.into()))?;
        out.write_all(&head).map_err(io)?;
        let mut wide = Vec::new();
        let n = boxes.stream(&var, &region, CHUNK_SIZE, |piece| {
            if lay == Layout::Bf16ToF32 {
                wide.clear();
                wide.extend(piece.chunks_exact(2).flat_map(|b| [0, 0, b[0], b[1]]));
                out.write_all(&wide).map_err(io)
            } else {
                out.write_all(piece).map_err(io)
            }
        })?;
        let n = if lay == Layout::Bf16ToF32 { 2 * n } else { n };
        boxes.finish()?;
        Ok::<_, NpyError>(NpyInfo {
            descr,
            shape: shape.clone(),
            file_bytes: head.len() as u64 + n,
            note,
        })
    })?;
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_match_numpy() {
        // What numpy.save writes for these arrays (format 1.0, 64-byte alignment).
        let h = header("<f4", &[4, 3]).unwrap();
        assert_eq!(h.len(), 128);
        assert_eq!(&h[..10], b"\x93NUMPY\x01\x00\x76\x00");
        let text = std::str::from_utf8(&h[10..]).unwrap();
        assert!(text.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), }"));
        assert!(text.ends_with(" \n"));
        let h = header("|b1", &[5]).unwrap();
        assert!(std::str::from_utf8(&h[10..])
            .unwrap()
            .contains("'shape': (5,), }"));
        let h = header("<i8", &[]).unwrap();
        assert!(std::str::from_utf8(&h[10..])
            .unwrap()
            .contains("'shape': (), }"));
        assert_eq!(h.len() % 64, 0);
        assert!(header("<f4", &vec![1; 30000]).is_err());
    }

    #[test]
    fn layouts() {
        let raw = NpyOptions { raw_bits: true };
        let def = NpyOptions::default();
        assert_eq!(
            layout(DataType::DtHalf as i32, def),
            Ok(Layout::Copy("<f2"))
        );
        assert_eq!(
            layout(DataType::DtBfloat16 as i32, def),
            Ok(Layout::Bf16ToF32)
        );
        assert_eq!(
            layout(DataType::DtBfloat16 as i32, raw),
            Ok(Layout::Copy("<u2"))
        );
        assert!(layout(DataType::DtFloat8E4m3fn as i32, def)
            .unwrap_err()
            .contains("--raw-bits"));
        assert_eq!(
            layout(DataType::DtFloat8E4m3fn as i32, raw),
            Ok(Layout::Copy("|u1"))
        );
        assert!(layout(DataType::DtVariant as i32, raw).is_err());
        assert!(layout(DataType::DtResource as i32, raw).is_err());
        assert!(layout(12345, raw).is_err());
    }

    #[test]
    fn arrays_round_trip_and_bad_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.npy");
        let data: Vec<u8> = (0..24).collect();
        write_npy_bytes(&p, "<i2", &[3, 4], &data).unwrap();
        let a = read_npy(&p).unwrap();
        assert_eq!(
            (a.descr.as_str(), a.shape.as_slice(), a.data.as_slice()),
            ("<i2", &[3, 4][..], &data[..])
        );
        write_npy_bytes(&p, "|S3", &[2], b"abcde\0").unwrap();
        assert_eq!(read_npy(&p).unwrap().data, b"abcde\0");
        assert!(write_npy_bytes(&p, "<f4", &[2], &data).is_err());
        assert_eq!(
            (
                descr_itemsize("<U3"),
                descr_itemsize("|O"),
                descr_itemsize("<V2")
            ),
            (Some(12), None, Some(2))
        );
        let mut bytes = header("<f4", &[4]).unwrap();
        bytes.extend_from_slice(&[0; 12]);
        std::fs::write(&p, &bytes).unwrap();
        assert!(read_npy(&p).unwrap_err().to_string().contains("needs 16"));
        let mut bytes = header("<f4", &[1]).unwrap().replace_fortran();
        bytes.extend_from_slice(&[0; 4]);
        std::fs::write(&p, &bytes).unwrap();
        assert!(read_npy(&p).unwrap_err().to_string().contains("Fortran"));
        std::fs::write(&p, b"garbage").unwrap();
        assert!(read_npy(&p).is_err());
    }

    trait ReplaceFortran {
        fn replace_fortran(self) -> Vec<u8>;
    }
    impl ReplaceFortran for Vec<u8> {
        fn replace_fortran(self) -> Vec<u8> {
            let (from, to) = (b"False, 'shape'", b"True,  'shape'");
            let mut v = self;
            if let Some(at) = v.windows(from.len()).position(|w| w == from) {
                v[at..at + to.len()].copy_from_slice(to);
            }
            v
        }
    }

    #[test]
    fn string_widths() {
        let v = |s: &[&[u8]]| {
            s.iter()
                .map(|x| Bytes::copy_from_slice(x))
                .collect::<Vec<_>>()
        };
        assert_eq!(check_strings(&v(&[b"ab", b"", b"\x00x"])), Ok(2));
        assert_eq!(check_strings(&v(&[b"", b""])), Ok(1));
        assert_eq!(check_strings(&[]), Ok(1));
        assert!(check_strings(&v(&[b"a\x00"]))
            .unwrap_err()
            .contains("zero byte"));
        let ragged: Vec<Bytes> = std::iter::once(Bytes::from(vec![b'x'; 1 << 20]))
            .chain(std::iter::repeat_n(Bytes::from_static(b"y"), 1000))
            .collect();
        assert!(check_strings(&ragged).unwrap_err().contains("refusing"));
    }
}

//! Reading tensors of a checkpoint for Python: whole tensors as views of the mapped data
//! file where the bytes allow, otherwise assembled into owned buffers; any box of a
//! variable; strings as byte strings.

use std::sync::Arc;

use bytes::Bytes;
use unbound_bundle::dtype::{storage, tf_name, Storage};
use unbound_bundle::{BoxReader, BundleError, BundleReader, ShapeAndSlice, TensorData};

/// A tensor's values as read, before they become a NumPy array.
pub enum Values {
    /// The stored bytes, in place in the mapped data file (zero-copy).
    Mapped(Bytes),
    /// Little-endian element bytes assembled into a new buffer.
    Owned(Vec<u8>),
    /// One byte string per element, row-major.
    Strings(Vec<Bytes>),
}

/// A tensor read: TensorFlow's dtype name, shape and values.
pub struct ReadTensor {
    /// TensorFlow's Python name of the dtype (`float32`, `bfloat16`, `string`, ...).
    pub dtype: String,
    /// The shape (of the box, for a box).
    pub shape: Vec<i64>,
    /// The values.
    pub values: Values,
}

/// The dtype name and full shape of variable `key`, and whether it is stored whole.
pub fn describe(
    reader: &BundleReader,
    key: &[u8],
) -> Result<(String, Vec<i64>, bool), BundleError> {
    let var = reader.stored_variable(key)?;
    let whole = reader.entry(key).is_some_and(|e| e.slices.is_empty());
    Ok((tf_name(var.dtype), var.shape, whole))
}

/// Reads variable `key` whole: a view of the mapped bytes when it is stored whole with
/// fixed-size elements (its checksum checked when `verify`), else assembled from its slices
/// (every checksum checked).
pub fn read_whole(
    reader: &Arc<BundleReader>,
    key: &[u8],
    verify: bool,
) -> Result<ReadTensor, BundleError> {
    let entry = reader.entry(key).ok_or_else(|| not_found(reader, key))?;
    if entry.slices.is_empty() {
        let dtype = entry.dtype;
        return match storage(dtype) {
            Storage::Fixed(_) => {
                let shape = reader.stored_variable(key)?.shape;
                let bytes = reader.mapped(key, verify)?;
                Ok(ReadTensor {
                    dtype: tf_name(dtype),
                    shape,
                    values: Values::Mapped(bytes),
                })
            }
            Storage::String => {
                let t = reader.read(key)?;
                match t.data {
                    TensorData::Strings(v) => Ok(ReadTensor {
                        dtype: tf_name(dtype),
                        shape: t.shape,
                        values: Values::Strings(v),
                    }),
                    _ => Err(unsupported(key, dtype)),
                }
            }
            Storage::Variant | Storage::Opaque => Err(unsupported(key, dtype)),
        };
    }
    read_region(reader, key, None)
}

/// Reads the box `spec` (TensorFlow's `shape_and_slice` text, e.g. `"8 16 2,4:3,10"`; the
/// empty text is the whole variable) of variable `key` from whatever pieces hold it, into a
/// new buffer; every checksum of the pieces read is checked.
pub fn read_box(
    reader: &Arc<BundleReader>,
    key: &[u8],
    spec: &str,
) -> Result<ReadTensor, BundleError> {
    let request = ShapeAndSlice::parse(spec).map_err(|f| BundleError::Invalid(f.0))?;
    read_region(reader, key, Some(request))
}

fn read_region(
    reader: &Arc<BundleReader>,
    key: &[u8],
    request: Option<ShapeAndSlice>,
) -> Result<ReadTensor, BundleError> {
    let var = reader.stored_variable(key)?;
    let region = match &request {
        Some(r) => r
            .resolve(&var.shape)
            .map_err(|f| BundleError::tensor(reader.index_path(), key, f.0))?,
        None => var.full_box(),
    };
    let shape: Vec<i64> = region.iter().map(|&(_, len)| len as i64).collect();
    let boxes = BoxReader::new(reader);
    let values = match storage(var.dtype) {
        Storage::Fixed(elem) => {
            let count = unbound_bundle::slices::box_len(&region);
            let size = count
                .checked_mul(elem as u64)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| {
                    BundleError::tensor(reader.index_path(), key, "too large to hold in memory")
                })?;
            let mut out = Vec::new();
            out.try_reserve_exact(size).map_err(|_| {
                BundleError::tensor(
                    reader.index_path(),
                    key,
                    format!("cannot allocate {size} bytes"),
                )
            })?;
            out.resize(size, 0);
            boxes.read_into(&var, &region, &mut out)?;
            Values::Owned(out)
        }
        Storage::String => Values::Strings(boxes.read_strings(&var, &region)?),
        Storage::Variant | Storage::Opaque => return Err(unsupported(key, var.dtype)),
    };
    boxes.finish()?;
    Ok(ReadTensor {
        dtype: tf_name(var.dtype),
        shape,
        values,
    })
}

fn not_found(reader: &BundleReader, key: &[u8]) -> BundleError {
    BundleError::NotFound {
        file: reader.index_path().to_path_buf(),
        key: unbound_bundle::display_key(key),
    }
}

fn unsupported(key: &[u8], dtype: i32) -> BundleError {
    BundleError::Unsupported {
        key: unbound_bundle::display_key(key),
        what: format!("{} values have no NumPy form", tf_name(dtype)),
    }
}

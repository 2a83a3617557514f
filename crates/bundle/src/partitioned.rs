//! Reading partitioned tensors: the full tensor's entry lists its slices (and holds no data);
//! each slice is stored under its own key (see [`crate::encode_tensor_name_slice`]). Reading
//! the full tensor checks that the slices are disjoint and cover it, then copies each slice's
//! elements into place.

use bytes::Bytes;
use unbound_proto::tensorflow::BundleEntryProto;

use crate::dtype::{storage, Storage};
use crate::error::{BundleError, Result};
use crate::ordered_code::encode_tensor_name_slice;
use crate::reader::BundleReader;
use crate::slices::{for_each_run, overlap, SliceSpec};
use crate::tensor::{num_elements, Tensor, TensorData};

/// Most slices we accept for one tensor (the coverage check is quadratic).
const MAX_SLICES: usize = 1 << 14;

/// One slice of a partitioned tensor, located.
pub(crate) struct SlicePart {
    /// The slice.
    pub spec: SliceSpec,
    /// Start and length per dimension within the full tensor.
    pub resolved: Vec<(u64, u64)>,
    /// The key the slice is stored under.
    pub key: Vec<u8>,
}

impl BundleReader {
    /// The slices of partitioned tensor `key`, checked against the index only: each fits the
    /// full shape, has an entry of the same dtype and of the slice's shape, no two overlap,
    /// and together they cover every element.
    pub(crate) fn slice_plan(
        &self,
        key: &[u8],
        entry: &BundleEntryProto,
    ) -> Result<(Vec<i64>, Vec<SlicePart>)> {
        let fault = |f: String| BundleError::tensor(self.index_path(), key, f);
        let shape = self.entry_shape(key, entry)?;
        let total = num_elements(&shape).unwrap_or(0);
        if entry.slices.len() > MAX_SLICES {
            return Err(fault(format!(
                "{} slices (at most {MAX_SLICES} supported)",
                entry.slices.len()
            )));
        }
        let mut parts: Vec<SlicePart> = Vec::with_capacity(entry.slices.len());
        let mut covered: u64 = 0;
        for proto in &entry.slices {
            let spec = SliceSpec::from_proto(proto);
            let resolved = spec.resolve(&shape).map_err(|f| fault(f.into()))?;
            if let Some(other) = parts.iter().find(|p| overlap(&p.resolved, &resolved)) {
                return Err(fault(format!("slices {} and {spec} overlap", other.spec)));
            }
            let slice_key = encode_tensor_name_slice(key, &spec);
            let slice_entry = self
                .entry(&slice_key)
                .ok_or_else(|| fault(format!("slice {spec} has no entry in the index")))?;
            let want: Vec<i64> = resolved.iter().map(|&(_, l)| l as i64).collect();
            let got = self.entry_shape(&slice_key, slice_entry)?;
            if slice_entry.dtype != entry.dtype || got != want || !slice_entry.slices.is_empty() {
                return Err(fault(format!(
                    "slice {spec} is stored with dtype {} and shape {got:?}, expected dtype {} and shape {want:?}",
                    slice_entry.dtype, entry.dtype
                )));
            }
            covered += num_elements(&want).unwrap_or(0);
            parts.push(SlicePart {
                spec,
                resolved,
                key: slice_key,
            });
        }
        if covered != total {
            return Err(fault(format!(
                "its {} slices cover {covered} of its {total} elements",
                parts.len()
            )));
        }
        Ok((shape, parts))
    }

    /// Reads and assembles a partitioned tensor.
    pub(crate) fn read_partitioned(&self, key: &[u8], entry: &BundleEntryProto) -> Result<Tensor> {
        let (shape, parts) = self.slice_plan(key, entry)?;
        let total = num_elements(&shape).unwrap_or(0);
        // Read every slice first: their sizes are checked against the data files, so the
        // allocation below is bounded by what the files hold.
        let mut pieces = Vec::with_capacity(parts.len());
        for p in &parts {
            let slice_entry = self.lookup(&p.key)?;
            pieces.push(self.read_stored(&p.key, slice_entry)?);
        }
        let data = match storage(entry.dtype) {
            Storage::Fixed(elem) => {
                let mut out = vec![0u8; total as usize * elem];
                for (p, t) in parts.iter().zip(&pieces) {
                    let src = t.as_raw().cloned().unwrap_or_default();
                    for_each_run(&shape, &p.resolved, |s, d, n| {
                        let (s, d, n) = (s as usize * elem, d as usize * elem, n as usize * elem);
                        out[d..d + n].copy_from_slice(&src[s..s + n]);
                    });
                }
                TensorData::Raw(Bytes::from(out))
            }
            Storage::String | Storage::Variant => {
                let mut out = vec![Bytes::new(); total as usize];
                for (p, t) in parts.iter().zip(&pieces) {
                    let src = match &t.data {
                        TensorData::Strings(v) | TensorData::Variants(v) => v.as_slice(),
                        TensorData::Raw(_) => &[],
                    };
                    for_each_run(&shape, &p.resolved, |s, d, n| {
                        let (s, d, n) = (s as usize, d as usize, n as usize);
                        out[d..d + n].clone_from_slice(&src[s..s + n]);
                    });
                }
                if storage(entry.dtype) == Storage::String {
                    TensorData::Strings(out)
                } else {
                    TensorData::Variants(out)
                }
            }
            Storage::Opaque => {
                return Err(BundleError::Unsupported {
                    key: crate::display_key(key),
                    what: "partitioned tensors of an opaque dtype cannot be assembled".into(),
                })
            }
        };
        Ok(Tensor {
            dtype: entry.dtype,
            shape,
            data,
        })
    }
}

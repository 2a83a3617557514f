//! Host arrays in `.npy` files, and the component directories `0.npy … n.npy` (one file per
//! local device, in the mesh's local-device order) that `unpack`, `pack` and `relayout` use.

use std::fs;
use std::path::Path;

use unbound_bundle::npy::{descr_itemsize, read_npy, write_npy_bytes, NpyArray};

use crate::array::{Elements, HostArray};
use crate::error::ToolError;

/// The dtype of the `.npy` written when there are no components to take one from.
const DEFAULT_DESCR: &str = "<f4";

/// An array read from `.npy`, with its NumPy dtype descriptor (kept for writing back).
#[derive(Debug, Clone)]
pub struct NpyData {
    /// The array.
    pub array: HostArray,
    /// The NumPy descriptor (`<f4`).
    pub descr: String,
}

/// Reads one `.npy` file as a host array.
pub fn read_array(path: &Path) -> Result<NpyData, ToolError> {
    let NpyArray { descr, shape, data } = read_npy(path).map_err(|e| ToolError::File {
        path: path.into(),
        fault: e.to_string(),
    })?;
    let item = descr_itemsize(&descr)
        .ok_or_else(|| ToolError::file(path, format!("dtype {descr} is not supported")))?;
    let array = HostArray::from_bytes(shape, item, data).map_err(|e| ToolError::file(path, e))?;
    Ok(NpyData { array, descr })
}

/// Writes one host array as `.npy` with the NumPy descriptor `descr`.
pub fn write_array(path: &Path, array: &HostArray, descr: &str) -> Result<(), ToolError> {
    let Elements::Fixed { bytes, .. } = array.elements() else {
        return Err(ToolError::file(
            path,
            "internal: string arrays are read as fixed-width bytes",
        ));
    };
    write_npy_bytes(path, descr, array.shape(), bytes).map_err(|e| ToolError::File {
        path: path.into(),
        fault: e.to_string(),
    })?;
    Ok(())
}

/// Reads `dir/0.npy … dir/{n-1}.npy`: exactly `n` files, all of one dtype. Returns the arrays
/// and their descriptor.
pub fn read_components(dir: &Path, n: usize) -> Result<(Vec<HostArray>, String), ToolError> {
    let mut out = Vec::with_capacity(n);
    let mut descr0: Option<String> = None;
    for i in 0..n {
        let path = dir.join(format!("{i}.npy"));
        if !path.is_file() {
            return Err(ToolError::file(
                &path,
                format!(
                    "missing (the layout has {n} local devices, so 0.npy..{}.npy are needed)",
                    n.saturating_sub(1)
                ),
            ));
        }
        let NpyData { array, descr } = read_array(&path)?;
        match &descr0 {
            Some(d) if *d != descr => {
                return Err(ToolError::file(
                    &path,
                    format!("dtype {descr}, but 0.npy has {d}"),
                ))
            }
            _ => descr0 = Some(descr),
        }
        out.push(array);
    }
    if dir.join(format!("{n}.npy")).exists() {
        return Err(ToolError::file(
            dir,
            format!("{n}.npy exists, but the layout has only {n} local devices"),
        ));
    }
    Ok((out, descr0.unwrap_or_else(|| DEFAULT_DESCR.into())))
}

/// Refuses an output path that exists (even as a dangling link): outputs are never
/// overwritten.
pub(crate) fn refuse_existing(path: &Path) -> Result<(), ToolError> {
    if fs::symlink_metadata(path).is_ok() {
        return Err(ToolError::OutputExists {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// Writes `comps` as `dir/0.npy …`, creating `dir`; an existing `dir` must be an empty
/// directory. Returns the paths written.
pub fn write_components(
    dir: &Path,
    comps: &[HostArray],
    descr: &str,
) -> Result<Vec<String>, ToolError> {
    if fs::read_dir(dir).map_or(true, |mut entries| entries.next().is_some()) {
        refuse_existing(dir)?;
    }
    fs::create_dir_all(dir).map_err(|e| ToolError::file(dir, e))?;
    let mut files = Vec::with_capacity(comps.len());
    for (i, c) in comps.iter().enumerate() {
        let path = dir.join(format!("{i}.npy"));
        write_array(&path, c, descr)?;
        files.push(path.display().to_string());
    }
    Ok(files)
}

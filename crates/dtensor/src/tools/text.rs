//! The one grammar of a sharding, mesh or shape given as text.

use std::path::Path;

use serde::Serialize;

use crate::error::ToolError;
use crate::jax::parse_partition_spec;
use crate::layout::{Layout, MAX_RANK};
use crate::mesh::Mesh;
use crate::sharding::{Chunking, Sharding};
use crate::spec::{EMPTY_LAYOUT, PARTED_PREFIX, SINGLE_DEVICE_PREFIX, STATIC_PREFIX};
use crate::torch::parse_torch_placements;

/// Reads a whole file named on the command line. Mapped: a FIFO or device is refused instead
/// of read forever.
pub(crate) fn read_arg_file(path: &str) -> Result<Vec<u8>, ToolError> {
    unbound_io::map_file(Path::new(path))
        .map(|b| b.to_vec())
        .map_err(|e| ToolError::File {
            path: path.into(),
            fault: e.to_string(),
        })
}

/// Whether text reads as a layout string: a layout prefix, `empty_layout`, or a space (a
/// layout string is `<specs> <mesh>`; mesh strings hold no space).
pub fn is_layout_text(s: &str) -> bool {
    s == EMPTY_LAYOUT
        || s.contains(' ')
        || [STATIC_PREFIX, PARTED_PREFIX, SINGLE_DEVICE_PREFIX]
            .iter()
            .any(|p| s.starts_with(p))
}

/// Parses a shape argument (`8,16`; empty for rank 0): non-negative sizes, at most
/// TensorFlow's rank limit. The error's text is the fault alone, for the caller to name the
/// argument.
pub fn parse_shape(s: &str) -> Result<Vec<i64>, ToolError> {
    if s.trim().is_empty() {
        return Ok(Vec::new());
    }
    let rank = s.split(',').count();
    if rank > MAX_RANK {
        return Err(ToolError::argument(format!(
            "{rank} dimensions, more than TensorFlow's {MAX_RANK}"
        )));
    }
    s.split(',')
        .map(|d| {
            let d = d.trim();
            d.parse::<i64>().ok().filter(|&v| v >= 0).ok_or_else(|| {
                ToolError::argument(format!("shape entry {d:?} is not a non-negative integer"))
            })
        })
        .collect()
}

/// Even shards (TensorFlow's rule) or, with `uneven`, PyTorch's `torch.chunk` rule.
pub fn chunking(uneven: bool) -> Chunking {
    if uneven {
        Chunking::Uneven
    } else {
        Chunking::Even
    }
}

/// A mesh string or `@FILE` with a serialized `MeshProto`, with parse warnings.
pub fn parse_mesh_arg(spec: &str) -> Result<(Mesh, Vec<String>), ToolError> {
    match spec.strip_prefix('@') {
        Some(path) => {
            let bytes = read_arg_file(path).map_err(|e| {
                ToolError::DTensor(crate::DTensorError::Mesh {
                    input: spec.into(),
                    fault: e.to_string(),
                })
            })?;
            Ok((Mesh::decode(&bytes, path)?, Vec::new()))
        }
        None => Ok(Mesh::parse_with_warnings(spec)?),
    }
}

/// A sharding read from text: the sharding, the DTensor layout when it is one, and the
/// warnings where TensorFlow would quietly read something else.
#[derive(Debug, Clone)]
pub struct ParsedSharding {
    /// The sharding.
    pub sharding: Sharding,
    /// The DTensor layout, when the sharding is one.
    pub layout: Option<Layout>,
    /// Parse warnings.
    pub warnings: Vec<String>,
}

/// Reads a sharding: TensorFlow's layout string, `@FILE` (a `LayoutProto`), or with a mesh a
/// JAX PartitionSpec (`P('x', None)`) or PyTorch placements (`[Shard(0), Replicate()]`, which
/// need `rank_hint`).
pub fn parse_sharding(
    spec: &str,
    mesh: Option<&str>,
    rank_hint: Option<usize>,
    chunking: Chunking,
) -> Result<ParsedSharding, ToolError> {
    let t = spec.trim();
    if t.starts_with('P') || t.starts_with('[') {
        let mesh_spec =
            mesh.ok_or_else(|| ToolError::argument(format!("layout {spec:?} needs --mesh")))?;
        let (mesh, warnings) = parse_mesh_arg(mesh_spec)?;
        let sharding = if t.starts_with('[') {
            let rank = rank_hint.ok_or_else(|| {
                ToolError::argument(format!(
                    "layout {spec:?}: PyTorch placements need the tensor rank (from the data)"
                ))
            })?;
            parse_torch_placements(t, &mesh, rank, chunking)?
        } else {
            parse_partition_spec(t, &mesh, rank_hint, chunking)?
        };
        let layout = sharding.to_layout();
        return Ok(ParsedSharding {
            sharding,
            layout,
            warnings,
        });
    }
    let (layout, warnings) = match spec.strip_prefix('@') {
        Some(path) => (Layout::decode(&read_arg_file(path)?, path)?, Vec::new()),
        None => Layout::parse_with_warnings(spec)?,
    };
    Ok(ParsedSharding {
        sharding: Sharding::from_layout(&layout, chunking)?,
        layout: Some(layout),
        warnings,
    })
}

/// How to read a spec that may be a layout or a mesh.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum SpecKind {
    /// Decide from the text (or, for `@FILE`, from what decodes).
    Auto,
    /// A layout string or `LayoutProto`.
    Layout,
    /// A mesh string or `MeshProto`.
    Mesh,
}

/// A spec read as a layout or as a mesh, with its parse warnings.
#[derive(Debug, Clone)]
pub enum LayoutOrMesh {
    /// A layout.
    Layout(Layout, Vec<String>),
    /// A mesh.
    Mesh(Mesh, Vec<String>),
}

/// The field number of `LayoutProto.mesh_config` as a tag byte (field 2, length-delimited):
/// a `LayoutProto` that holds only a mesh starts with it, a `MeshProto` never does.
const LAYOUT_MESH_CONFIG_TAG: u8 = 0x12;

/// Reads `spec` (text or `@FILE`) as a layout or a mesh. With [`SpecKind::Auto`] a file is a
/// layout when it decodes as a non-empty `LayoutProto` (or one holding only its mesh), else a
/// mesh; text is a layout when [`is_layout_text`] says so.
pub fn read_layout_or_mesh(spec: &str, kind: SpecKind) -> Result<LayoutOrMesh, ToolError> {
    if let Some(path) = spec.strip_prefix('@') {
        let bytes = read_arg_file(path)?;
        return Ok(match kind {
            SpecKind::Layout => LayoutOrMesh::Layout(Layout::decode(&bytes, path)?, Vec::new()),
            SpecKind::Mesh => LayoutOrMesh::Mesh(Mesh::decode(&bytes, path)?, Vec::new()),
            SpecKind::Auto => match Layout::decode(&bytes, path) {
                Ok(l) if !l.is_empty() || bytes.first() == Some(&LAYOUT_MESH_CONFIG_TAG) => {
                    LayoutOrMesh::Layout(l, Vec::new())
                }
                layout_result => match Mesh::decode(&bytes, path) {
                    Ok(m) => LayoutOrMesh::Mesh(m, Vec::new()),
                    Err(e) => match layout_result {
                        Err(le) => {
                            return Err(ToolError::File {
                                path: path.into(),
                                fault: format!(
                                    "{path}: neither a LayoutProto ({le}) nor a MeshProto ({e})"
                                ),
                            })
                        }
                        Ok(_) => return Err(e.into()),
                    },
                },
            },
        });
    }
    let as_layout = kind == SpecKind::Layout || (kind == SpecKind::Auto && is_layout_text(spec));
    Ok(if as_layout {
        let (l, w) = Layout::parse_with_warnings(spec)?;
        LayoutOrMesh::Layout(l, w)
    } else {
        let (m, w) = Mesh::parse_with_warnings(spec)?;
        LayoutOrMesh::Mesh(m, w)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_text_is_told_from_mesh_text() {
        assert!(is_layout_text("sharding_specs:x, mesh:|x=2|*CPU"));
        assert!(is_layout_text("empty_layout"));
        assert!(!is_layout_text("|x=2|*CPU"));
    }

    #[test]
    fn shapes_parse_and_refuse() {
        assert_eq!(parse_shape("8, 16").unwrap(), vec![8, 16]);
        assert_eq!(parse_shape("").unwrap(), Vec::<i64>::new());
        assert!(parse_shape("8,-1").is_err());
        assert!(parse_shape(&vec!["1"; MAX_RANK + 1].join(",")).is_err());
    }

    #[test]
    fn partition_spec_needs_a_mesh() {
        let e = parse_sharding("P('x')", None, Some(1), Chunking::Even).unwrap_err();
        assert_eq!(e.to_string(), "layout \"P('x')\" needs --mesh");
        let p = parse_sharding("P('x')", Some("|x=2|*CPU"), Some(1), Chunking::Even).unwrap();
        assert_eq!(p.layout.unwrap().specs(), ["x"]);
    }
}

//! The layout tools as functions returning typed reports: what `unbound layout
//! from-op-sharding|unpack|pack|relayout` print, as data.

use std::path::Path;

use serde::Serialize;

use super::components::{read_components, refuse_existing, write_array, write_components, NpyData};
use super::text::{parse_mesh_arg, parse_sharding, ParsedSharding};
use crate::error::ToolError;
use crate::from_op_sharding::op_sharding_to_layouts;
use crate::hlo_text::{parse_hlo_text, to_hlo_text};
use crate::layout::{Layout, MAX_RANK};
use crate::op_sharding::decode_op_sharding;
use crate::pack::{global_shape_of, pack, relayout, unpack};
use crate::plan::{relayout_plan, resolve_match, RelayoutPlan};
use crate::sharding::{Chunking, Sharding};
use crate::spec::MATCH;

/// What `from-op-sharding` found.
#[derive(Debug, Clone, Serialize)]
pub struct FromOpShardingReport {
    /// The sharding as HLO text.
    pub hlo_sharding_text: String,
    /// Every layout string realising it.
    pub layouts: Vec<String>,
    /// Why there are none, several, or what was assumed.
    pub notes: Vec<String>,
    /// Warnings from reading the mesh.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok())
        .collect()
}

/// Finds the layouts realising an XLA `OpSharding` given as hex, `@FILE` or HLO text, on
/// `mesh` (a mesh string or `@FILE`) or on an invented CPU mesh.
pub fn from_op_sharding(
    sharding: &str,
    mesh: Option<&str>,
    rank: Option<usize>,
) -> Result<FromOpShardingReport, ToolError> {
    let input = sharding.trim();
    let sharding = if let Some(path) = input.strip_prefix('@') {
        decode_op_sharding(&super::text::read_arg_file(path)?, path)?
    } else if input.starts_with('{') {
        parse_hlo_text(input)?
    } else {
        let bytes = unhex(input).ok_or_else(|| {
            ToolError::argument(format!(
                "{input:?} is neither hex, @FILE nor HLO sharding text"
            ))
        })?;
        decode_op_sharding(&bytes, "the hex argument")?
    };
    let (mesh, warnings) = match mesh {
        Some(m) => {
            let (mesh, w) = parse_mesh_arg(m)?;
            (Some(mesh), w)
        }
        None => (None, Vec::new()),
    };
    if let Some(rank) = rank.filter(|&r| r > MAX_RANK) {
        return Err(ToolError::argument(format!(
            "--rank {rank}: more than TensorFlow's {MAX_RANK} dimensions"
        )));
    }
    let found = op_sharding_to_layouts(&sharding, mesh.as_ref(), rank)?;
    Ok(FromOpShardingReport {
        hlo_sharding_text: to_hlo_text(&sharding),
        layouts: found.layouts.iter().map(Layout::to_string).collect(),
        notes: found.notes,
        warnings,
    })
}

/// One component file written.
#[derive(Debug, Clone, Serialize)]
pub struct ComponentFile {
    /// Its path.
    pub file: String,
    /// Its shape.
    pub shape: Vec<i64>,
}

/// What `unpack` wrote.
#[derive(Debug, Clone, Serialize)]
pub struct UnpackReport {
    /// The component files, in local-device order.
    pub components: Vec<ComponentFile>,
    /// The NumPy dtype.
    pub dtype: String,
    /// The global shape.
    pub global_shape: Vec<i64>,
    /// The sharding, described.
    pub layout: String,
}

/// Splits the global array `global` (read from `path`) into `outdir/0.npy …`.
pub fn unpack_file(
    global: &NpyData,
    path: &Path,
    sharding: &Sharding,
    outdir: &Path,
) -> Result<UnpackReport, ToolError> {
    let comps = unpack(&global.array, sharding).map_err(|e| ToolError::file(path, e))?;
    let files = write_components(outdir, &comps, &global.descr)?;
    Ok(UnpackReport {
        components: files
            .into_iter()
            .zip(&comps)
            .map(|(file, c)| ComponentFile {
                file,
                shape: c.shape().to_vec(),
            })
            .collect(),
        dtype: global.descr.clone(),
        global_shape: global.array.shape().to_vec(),
        layout: sharding.describe(),
    })
}

/// What `pack` wrote.
#[derive(Debug, Clone, Serialize)]
pub struct PackReport {
    /// The NumPy dtype.
    pub dtype: String,
    /// The file written.
    pub file: String,
    /// The global shape.
    pub global_shape: Vec<i64>,
    /// The sharding, described.
    pub layout: String,
}

/// Refuses a global shape the sharding cannot take (its rank, sizes that do not divide),
/// naming the argument, before anything is read or allocated for it.
fn check_global_shape(shape: &[i64], sharding: &Sharding) -> Result<(), ToolError> {
    sharding.check_shape(shape).map_err(|e| {
        let list: Vec<String> = shape.iter().map(i64::to_string).collect();
        ToolError::argument(format!("--global-shape {}: {e}", list.join(",")))
    })
}

/// Joins `indir/0.npy …` into the global array `out` (which must not exist).
pub fn pack_dir(
    sharding: &Sharding,
    indir: &Path,
    global_shape: Option<&[i64]>,
    out: &Path,
) -> Result<PackReport, ToolError> {
    let n = sharding.mesh().local_device_ids().len();
    let (comps, descr) = read_components(indir, n)?;
    let shape = match global_shape {
        Some(s) => {
            check_global_shape(s, sharding)?;
            s.to_vec()
        }
        None => global_shape_of(&comps, sharding)?,
    };
    let global = pack(&comps, sharding, &shape).map_err(|e| ToolError::file(indir, e))?;
    refuse_existing(out)?;
    write_array(out, &global, &descr)?;
    Ok(PackReport {
        dtype: descr,
        file: out.display().to_string(),
        global_shape: shape,
        layout: sharding.describe(),
    })
}

/// What `relayout` planned and wrote.
#[derive(Debug, Clone, Serialize)]
pub struct RelayoutReport {
    /// The component files written, when data was moved.
    pub components: Option<Vec<String>>,
    /// The source sharding, described.
    pub from: String,
    /// The global shape, when data was moved.
    pub global_shape: Option<Vec<i64>>,
    /// The collective steps, when asked for.
    pub plan: Option<RelayoutPlan>,
    /// The target sharding, described.
    pub to: String,
}

/// A relayout to run: the source, the target text (`match` keeps the source's spec on that
/// axis), and optionally directories to move data between.
#[derive(Debug, Clone)]
pub struct RelayoutRequest<'a> {
    /// The source sharding.
    pub from: &'a ParsedSharding,
    /// The mesh for PartitionSpec or PyTorch targets.
    pub mesh: Option<&'a str>,
    /// Even or torch.chunk shards.
    pub chunking: Chunking,
    /// Whether to plan the collective steps.
    pub plan: bool,
    /// The global shape (default: what the components add up to).
    pub global_shape: Option<&'a [i64]>,
    /// `(indir, outdir)` to move components between.
    pub dirs: Option<(&'a Path, &'a Path)>,
}

impl RelayoutRequest<'_> {
    /// The target sharding for `to`, resolving `match` against the source layout. Returned
    /// apart from [`relayout_dirs`] so warnings can be shown before anything is written.
    pub fn target(&self, to: &str) -> Result<ParsedSharding, ToolError> {
        match (&self.from.layout, Layout::parse(to)) {
            (Some(fl), Ok(tl)) if tl.specs().iter().any(|s| s == MATCH) => {
                let resolved = resolve_match(fl, &tl)?;
                Ok(ParsedSharding {
                    sharding: Sharding::from_layout(&resolved, self.chunking)?,
                    layout: Some(resolved),
                    warnings: Vec::new(),
                })
            }
            _ => parse_sharding(
                to,
                self.mesh,
                Some(self.from.sharding.rank()),
                self.chunking,
            ),
        }
    }
}

/// Plans and (with directories) runs a relayout from `req.from` to `to`.
pub fn relayout_dirs(
    req: &RelayoutRequest<'_>,
    to: &Sharding,
) -> Result<RelayoutReport, ToolError> {
    let from = &req.from.sharding;
    let plan = if req.plan {
        Some(relayout_plan(from, to)?)
    } else {
        None
    };
    let mut written = None;
    if let Some((indir, outdir)) = req.dirs {
        let n = from.mesh().local_device_ids().len();
        let (comps, descr) = read_components(indir, n)?;
        let shape = match req.global_shape {
            Some(s) => {
                check_global_shape(s, from)?;
                s.to_vec()
            }
            None => global_shape_of(&comps, from)?,
        };
        let moved = relayout(&comps, from, to, &shape).map_err(|e| ToolError::file(indir, e))?;
        written = Some((write_components(outdir, &moved, &descr)?, shape));
    }
    let (components, global_shape) = match written {
        Some((files, shape)) => (Some(files), Some(shape)),
        None => (None, None),
    };
    Ok(RelayoutReport {
        components,
        from: from.describe(),
        global_shape,
        plan,
        to: to.describe(),
    })
}

//! `unbound layout show|from-op-sharding|unpack|pack|relayout`: DTensor meshes and layouts
//! without TensorFlow (parse, print, convert to and from XLA/JAX/PyTorch shardings, split,
//! join and relayout arrays stored as `.npy`).

use std::path::{Path, PathBuf};

use unbound_dtensor::{
    chunking, from_op_sharding, pack_dir, parse_sharding, picture, read_array, read_layout_or_mesh,
    relayout_dirs, unpack_file, LayoutOrMesh, LayoutReport, MeshReport, Picture, RelayoutPlan,
    RelayoutRequest,
};

use super::CmdResult;

/// The `layout` subcommands.
#[derive(clap::Subcommand)]
pub enum LayoutCommand {
    /// Show a layout or a mesh: TensorFlow's string and proto, the XLA/HLO sharding, JAX
    /// PartitionSpec, PyTorch placements, and with --global-shape what each device holds
    /// (for rank 1 and 2, drawn as a grid of blocks; coloured on a terminal).
    Show(ShowArgs),
    /// Find a mesh and layout realising an XLA OpSharding (or explain why none exists).
    FromOpSharding(FromOpShardingArgs),
    /// Split GLOBAL.npy into OUTDIR/0.npy, 1.npy, ... (one per local device, in order).
    Unpack(UnpackArgs),
    /// Join INDIR/0.npy, 1.npy, ... into OUT.npy.
    Pack(PackArgs),
    /// Move components from one layout to another on the same mesh; --plan prints the
    /// collective steps DTensor would run.
    Relayout(RelayoutArgs),
}

const SPEC_HELP: &str = "\
A layout is TensorFlow's layout string (sharding_specs:x,unsharded, mesh:|x=2,y=4|...), or
@FILE holding a serialized LayoutProto. With --mesh MESH it may also be a JAX PartitionSpec
(\"P('x', None)\", \"P(('x', 'y'))\" for several mesh dimensions on one axis) or PyTorch
placements (\"[Shard(0), Replicate()]\"). --uneven shards by PyTorch's torch.chunk rule (last
shards smaller) instead of requiring sizes that divide, as TensorFlow does.

Exit codes: 0 success, 1 failure (bad layout, shape or file), 2 usage error.";

/// Arguments of `unbound layout show`.
#[derive(clap::Args)]
#[command(after_long_help = SPEC_HELP)]
pub struct ShowArgs {
    /// A layout or mesh string, or @FILE with a serialized LayoutProto or MeshProto.
    spec: String,
    /// A global shape (comma-separated) to show the local shape and each device's box of.
    #[arg(long, value_name = "D0,D1,...", value_parser = parse_shape, allow_hyphen_values = true)]
    global_shape: Option<Shape>,
    /// Shard unevenly (torch.chunk rule) instead of requiring even shards.
    #[arg(long)]
    uneven: bool,
    /// Treat warnings (where TensorFlow quietly reads something else) as errors.
    #[arg(long)]
    strict: bool,
    /// Read SPEC as a layout or as a mesh instead of deciding from its text.
    #[arg(long, value_enum, default_value = "auto")]
    kind: SpecKind,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `unbound layout from-op-sharding`.
#[derive(clap::Args)]
pub struct FromOpShardingArgs {
    /// A serialized xla.OpSharding as hex, @FILE holding one, or HLO sharding text
    /// (`{devices=[4,2]0,4,1,5,2,6,3,7}`).
    sharding: String,
    /// The mesh to find the layout on (a mesh string or @FILE with a MeshProto); without it
    /// a CPU mesh is invented.
    #[arg(long)]
    mesh: Option<String>,
    /// The tensor rank (needed only for a replicated sharding, which has none).
    #[arg(long)]
    rank: Option<usize>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `unbound layout unpack`.
#[derive(clap::Args)]
#[command(after_long_help = SPEC_HELP)]
pub struct UnpackArgs {
    /// The layout.
    #[arg(long)]
    layout: String,
    /// The mesh, for a PartitionSpec or PyTorch placements layout.
    #[arg(long)]
    mesh: Option<String>,
    /// Shard unevenly (torch.chunk rule).
    #[arg(long)]
    uneven: bool,
    /// The global array.
    global: PathBuf,
    /// The directory to write 0.npy, 1.npy, ... into (created if missing).
    outdir: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `unbound layout pack`.
#[derive(clap::Args)]
#[command(after_long_help = SPEC_HELP)]
pub struct PackArgs {
    /// The layout.
    #[arg(long)]
    layout: String,
    /// The mesh, for a PartitionSpec or PyTorch placements layout.
    #[arg(long)]
    mesh: Option<String>,
    /// Shard unevenly (torch.chunk rule).
    #[arg(long)]
    uneven: bool,
    /// The global shape (default: what the components add up to).
    #[arg(long, value_name = "D0,D1,...", value_parser = parse_shape, allow_hyphen_values = true)]
    global_shape: Option<Shape>,
    /// The directory holding 0.npy, 1.npy, ...
    indir: PathBuf,
    /// The global array to write.
    out: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `unbound layout relayout`.
#[derive(clap::Args)]
#[command(after_long_help = SPEC_HELP)]
pub struct RelayoutArgs {
    /// The layout of the components in INDIR.
    #[arg(long)]
    from: String,
    /// The layout to move them to (`match` keeps the source's spec on that axis).
    #[arg(long)]
    to: String,
    /// The mesh, for PartitionSpec or PyTorch placements layouts.
    #[arg(long)]
    mesh: Option<String>,
    /// Shard unevenly (torch.chunk rule).
    #[arg(long)]
    uneven: bool,
    /// The global shape (default: what the components add up to).
    #[arg(long, value_name = "D0,D1,...", value_parser = parse_shape, allow_hyphen_values = true)]
    global_shape: Option<Shape>,
    /// Print the collective steps DTensor's relayout would run (INDIR and OUTDIR are then
    /// optional; with them the data is moved as well).
    #[arg(long)]
    plan: bool,
    /// The directory holding 0.npy, 1.npy, ... in the source layout.
    #[arg(required_unless_present = "plan")]
    indir: Option<PathBuf>,
    /// The directory to write the components in the target layout into.
    #[arg(required_unless_present = "plan", requires = "indir")]
    outdir: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// A shape given on the command line (`8,16`; empty for rank 0).
#[derive(Clone, Debug)]
pub struct Shape(Vec<i64>);

fn parse_shape(s: &str) -> Result<Shape, String> {
    unbound_dtensor::parse_shape(s)
        .map(Shape)
        .map_err(|e| e.to_string())
}

/// Runs a `layout` subcommand.
pub fn run(cmd: LayoutCommand) -> CmdResult {
    match cmd {
        LayoutCommand::Show(a) => show(a),
        LayoutCommand::FromOpSharding(a) => from_op_sharding_cmd(a),
        LayoutCommand::Unpack(a) => unpack_cmd(a),
        LayoutCommand::Pack(a) => pack_cmd(a),
        LayoutCommand::Relayout(a) => relayout_cmd(a),
    }
}

/// What SPEC of `layout show` is.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum SpecKind {
    /// Decide from the text (or, for @FILE, from what decodes).
    Auto,
    /// A layout string or LayoutProto.
    Layout,
    /// A mesh string or MeshProto.
    Mesh,
}

impl From<SpecKind> for unbound_dtensor::SpecKind {
    fn from(k: SpecKind) -> Self {
        match k {
            SpecKind::Auto => Self::Auto,
            SpecKind::Layout => Self::Layout,
            SpecKind::Mesh => Self::Mesh,
        }
    }
}

/// Prints a library report as JSON with its keys sorted, as this command always has.
fn print_sorted_json(report: &impl serde::Serialize) -> CmdResult {
    outln!(
        "{}",
        serde_json::to_string_pretty(&serde_json::to_value(report)?)?
    )?;
    Ok(())
}

fn warn_all(warnings: &[String], strict: bool) -> CmdResult {
    if strict && !warnings.is_empty() {
        return Err(format!("(--strict) {}", warnings.join("; ")).into());
    }
    for w in warnings {
        errln!("unbound: warning: {w}");
    }
    Ok(())
}

fn show(a: ShowArgs) -> CmdResult {
    let spec = a.spec.as_str();
    let shown = read_layout_or_mesh(spec, a.kind.into())?;
    match shown {
        LayoutOrMesh::Mesh(mesh, warnings) => {
            if a.global_shape.is_some() {
                return Err(format!("{spec:?} is a mesh; --global-shape needs a layout").into());
            }
            warn_all(&warnings, a.strict)?;
            let report = MeshReport::new(&mesh, warnings);
            if a.json {
                outln!("{}", serde_json::to_string_pretty(&report)?)?;
            } else {
                print_mesh(&report, "")?;
            }
        }
        LayoutOrMesh::Layout(layout, warnings) => {
            warn_all(&warnings, a.strict)?;
            let report = LayoutReport::new(
                &layout,
                warnings,
                a.global_shape.as_ref().map(|s| s.0.as_slice()),
                chunking(a.uneven),
            )?;
            if a.json {
                outln!("{}", serde_json::to_string_pretty(&report)?)?;
            } else {
                print_layout(&report)?;
            }
        }
    }
    Ok(())
}

fn list<T: ToString>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

fn print_mesh(m: &MeshReport, indent: &str) -> Result<(), crate::output::StdoutError> {
    outln!("{indent}mesh: {}", m.to_string)?;
    if m.is_single_device {
        outln!("{indent}  single device: {}", m.to_string)?;
        return Ok(());
    }
    let dims: Vec<String> = m
        .dim_names
        .iter()
        .zip(&m.shape)
        .map(|(n, s)| format!("{n}={s}"))
        .collect();
    outln!("{indent}  name: {:?}", m.name)?;
    outln!(
        "{indent}  dims: {}   devices: {}   type: {}",
        dims.join(","),
        m.size,
        m.device_type
    )?;
    outln!("{indent}  global ids: {}", list(&m.global_device_ids))?;
    outln!("{indent}  local ids:  {}", list(&m.local_device_ids))?;
    outln!(
        "{indent}  remote: {}   use_xla_spmd: {}   global devices listed: {}",
        m.is_remote,
        m.use_xla_spmd,
        m.global_devices.len()
    )?;
    Ok(())
}

fn print_layout(r: &LayoutReport) -> Result<(), crate::output::StdoutError> {
    outln!("layout: {}", r.to_string)?;
    let shards: Vec<String> = r
        .num_shards
        .iter()
        .map(|n| n.map_or("?".into(), |v| v.to_string()))
        .collect();
    outln!(
        "  type: {}   rank: {}   specs: [{}]   shards: [{}]",
        r.layout_type,
        r.rank,
        r.sharding_specs.join(", "),
        shards.join(", ")
    )?;
    outln!(
        "  fully replicated: {}   batch parallel: {}   single device: {}",
        r.is_fully_replicated,
        r.is_batch_parallel,
        r.is_single_device
    )?;
    print_mesh(&r.mesh, "  ")?;
    let or_none = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".into());
    outln!("  xla OpSharding: {}", or_none(&r.op_sharding_hex))?;
    outln!("  HLO sharding:   {}", or_none(&r.hlo_sharding_text))?;
    outln!("  HLO iota form:  {}", or_none(&r.hlo_sharding_iota))?;
    outln!("  JAX:            {}", or_none(&r.partition_spec))?;
    match &r.torch {
        Some(t) => outln!("  PyTorch:        {} {}", t.device_mesh, t.placements)?,
        None => outln!("  PyTorch:        (none)")?,
    }
    if let (Some(g), Some(l)) = (&r.global_shape, &r.local_shape) {
        outln!("  global shape: [{}]   local shape: [{}]", list(g), list(l))?;
    }
    if let Some(p) = picture(r) {
        print_picture(&p, &r.mesh.device_type)?;
    }
    if let Some(devices) = &r.devices {
        outln!("  component  device id  position  location  offset  shape")?;
        for d in devices {
            outln!(
                "  {:>9}  {:>9}  {:>8}  [{}]  [{}]  [{}]   {}",
                d.component,
                d.device_id,
                d.position,
                list(&d.location),
                list(&d.shard.offset),
                list(&d.shard.shape),
                d.device
            )?;
        }
    }
    Ok(())
}

/// Background colours for the blocks on a terminal (ANSI 256-colour codes), cycled.
const BLOCK_COLOURS: [u8; 8] = [153, 223, 194, 217, 189, 229, 159, 224];

/// Draws which devices hold which block (JAX's `visualize_array_sharding`): a grid of boxes,
/// coloured on a terminal, plain text otherwise.
fn print_picture(p: &Picture, device_type: &str) -> Result<(), crate::output::StdoutError> {
    use std::io::IsTerminal;
    let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let label = |r: usize, c: usize| -> String {
        let ids: Vec<String> = p.cells[r][c].iter().map(i64::to_string).collect();
        format!("{device_type} {}", ids.join(","))
    };
    let range = |(a, b): (i64, i64)| format!("{a}:{b}");
    let width = (0..p.rows.len())
        .flat_map(|r| (0..p.cols.len()).map(move |c| (r, c)))
        .map(|(r, c)| label(r, c).len())
        .chain(p.cols.iter().map(|&c| range(c).len()))
        .max()
        .unwrap_or(1)
        + 2;
    let rule = format!("  +{}", vec!["-".repeat(width); p.cols.len()].join("+")) + "+";
    outln!(
        "  blocks (rows: axis 0{}):",
        if p.rows.len() > 1 || p.cols.len() > 1 {
            ", columns: last axis"
        } else {
            ""
        }
    )?;
    let header: Vec<String> = p
        .cols
        .iter()
        .map(|&c| format!("{:^width$}", range(c)))
        .collect();
    outln!("   {}", header.join(" "))?;
    for (r, &rows) in p.rows.iter().enumerate() {
        outln!("{rule}")?;
        let cells: Vec<String> = (0..p.cols.len())
            .map(|c| {
                let text = format!("{:^width$}", label(r, c));
                if colour {
                    let k = BLOCK_COLOURS[(r * p.cols.len() + c) % BLOCK_COLOURS.len()];
                    format!("\x1b[30;48;5;{k}m{text}\x1b[0m")
                } else {
                    text
                }
            })
            .collect();
        outln!("  |{}|  {}", cells.join("|"), range(rows))?;
    }
    outln!("{rule}")?;
    Ok(())
}

fn from_op_sharding_cmd(a: FromOpShardingArgs) -> CmdResult {
    let report = from_op_sharding(&a.sharding, a.mesh.as_deref(), a.rank)?;
    warn_all(&report.warnings, false)?;
    if a.json {
        print_sorted_json(&report)?;
    } else {
        outln!("sharding: {}", report.hlo_sharding_text)?;
        for l in &report.layouts {
            outln!("layout: {l}")?;
        }
        for n in &report.notes {
            outln!("note: {n}")?;
        }
    }
    Ok(())
}

fn unpack_cmd(a: UnpackArgs) -> CmdResult {
    let global = read_array(&a.global)?;
    let parsed = parse_sharding(
        &a.layout,
        a.mesh.as_deref(),
        Some(global.array.shape().len()),
        chunking(a.uneven),
    )?;
    warn_all(&parsed.warnings, false)?;
    let report = unpack_file(&global, &a.global, &parsed.sharding, &a.outdir)?;
    if a.json {
        print_sorted_json(&report)?;
    } else {
        outln!(
            "wrote {} components of {:?} ({}) to {}",
            report.components.len(),
            report.global_shape,
            report.dtype,
            a.outdir.display()
        )?;
    }
    Ok(())
}

fn pack_cmd(a: PackArgs) -> CmdResult {
    let rank_hint = a
        .global_shape
        .as_ref()
        .map(|s| s.0.len())
        .or_else(|| first_rank(&a.indir));
    let parsed = parse_sharding(&a.layout, a.mesh.as_deref(), rank_hint, chunking(a.uneven))?;
    warn_all(&parsed.warnings, false)?;
    let report = pack_dir(
        &parsed.sharding,
        &a.indir,
        a.global_shape.as_ref().map(|s| s.0.as_slice()),
        &a.out,
    )?;
    if a.json {
        print_sorted_json(&report)?;
    } else {
        outln!(
            "wrote {:?} ({}) to {}",
            report.global_shape,
            report.dtype,
            a.out.display()
        )?;
    }
    Ok(())
}

/// The rank of INDIR/0.npy, if readable (PyTorch placements need a rank).
fn first_rank(dir: &Path) -> Option<usize> {
    read_array(&dir.join("0.npy"))
        .ok()
        .map(|a| a.array.shape().len())
}

fn print_plan(plan: &RelayoutPlan) -> Result<(), crate::output::StdoutError> {
    outln!("relayout plan: {} steps", plan.steps.len())?;
    outln!("  from: {}", plan.from)?;
    outln!("  to:   {}", plan.to)?;
    if plan.steps.is_empty() {
        outln!("  (identical layouts: nothing to do)")?;
    }
    for (i, s) in plan.steps.iter().enumerate() {
        let on = if s.mesh_dims.is_empty() {
            String::new()
        } else {
            format!(" over {}", s.mesh_dims.join(","))
        };
        let axes = if s.axes.is_empty() {
            String::new()
        } else {
            format!(" axes {}", list(&s.axes))
        };
        outln!(
            "  {}. {}{on}{axes}: [{}] -> [{}]",
            i + 1,
            s.op,
            s.from_specs.join(", "),
            s.to_specs.join(", ")
        )?;
    }
    Ok(())
}

fn relayout_cmd(a: RelayoutArgs) -> CmdResult {
    let rank_hint = a
        .global_shape
        .as_ref()
        .map(|s| s.0.len())
        .or_else(|| a.indir.as_deref().and_then(first_rank));
    let c = chunking(a.uneven);
    let from = parse_sharding(&a.from, a.mesh.as_deref(), rank_hint, c)?;
    let request = RelayoutRequest {
        from: &from,
        mesh: a.mesh.as_deref(),
        chunking: c,
        plan: a.plan,
        global_shape: a.global_shape.as_ref().map(|s| s.0.as_slice()),
        dirs: a.indir.as_deref().zip(a.outdir.as_deref()),
    };
    let to = request.target(&a.to)?;
    let mut warnings = from.warnings.clone();
    warnings.extend(to.warnings.iter().cloned());
    warn_all(&warnings, false)?;
    let report = relayout_dirs(&request, &to.sharding)?;
    if a.json {
        print_sorted_json(&report)?;
    } else {
        if let Some(p) = &report.plan {
            print_plan(p)?;
        }
        if let (Some(files), Some(shape), Some(outdir)) =
            (&report.components, &report.global_shape, &a.outdir)
        {
            outln!(
                "wrote {} components of {:?} to {}",
                files.len(),
                shape,
                outdir.display()
            )?;
        }
    }
    Ok(())
}

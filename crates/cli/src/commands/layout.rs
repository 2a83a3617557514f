//! `unbound layout show|from-op-sharding|unpack|pack|relayout`: DTensor meshes and layouts
//! without TensorFlow (parse, print, convert to and from XLA/JAX/PyTorch shardings, split,
//! join and relayout arrays stored as `.npy`).

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::json;
use unbound_bundle::npy::{descr_itemsize, read_npy, write_npy_bytes, NpyArray};
use unbound_dtensor::{
    decode_op_sharding, global_shape_of, op_sharding_to_layouts, pack, parse_hlo_text,
    parse_partition_spec, parse_torch_placements, relayout, relayout_plan, resolve_match,
    to_hlo_text, unpack, Chunking, DTensorError, Elements, HostArray, Layout, LayoutReport, Mesh,
    MeshReport, RelayoutPlan, Sharding, MAX_RANK,
};

use super::CmdResult;

/// The `layout` subcommands.
#[derive(clap::Subcommand)]
pub enum LayoutCommand {
    /// Show a layout or a mesh: TensorFlow's string and proto, the XLA/HLO sharding, JAX
    /// PartitionSpec, PyTorch placements, and with --global-shape what each device holds.
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
    if s.trim().is_empty() {
        return Ok(Shape(Vec::new()));
    }
    let rank = s.split(',').count();
    if rank > MAX_RANK {
        return Err(format!(
            "{rank} dimensions, more than TensorFlow's {MAX_RANK}"
        ));
    }
    s.split(',')
        .map(|d| {
            let d = d.trim();
            d.parse::<i64>()
                .ok()
                .filter(|&v| v >= 0)
                .ok_or_else(|| format!("shape entry {d:?} is not a non-negative integer"))
        })
        .collect::<Result<_, _>>()
        .map(Shape)
}

/// Runs a `layout` subcommand.
pub fn run(cmd: LayoutCommand) -> CmdResult {
    match cmd {
        LayoutCommand::Show(a) => show(a),
        LayoutCommand::FromOpSharding(a) => from_op_sharding(a),
        LayoutCommand::Unpack(a) => unpack_cmd(a),
        LayoutCommand::Pack(a) => pack_cmd(a),
        LayoutCommand::Relayout(a) => relayout_cmd(a),
    }
}

fn read_file(path: &str) -> Result<Vec<u8>, String> {
    // Mapped: a FIFO or device is refused instead of read forever.
    unbound_io::map_file(Path::new(path))
        .map(|b| b.to_vec())
        .map_err(|e| e.to_string())
}

/// Whether SPEC reads as a layout string: a layout prefix, `empty_layout`, or a space (a
/// layout string is `<specs> <mesh>`; mesh strings hold no space).
fn is_layout_text(s: &str) -> bool {
    s == "empty_layout"
        || s.contains(' ')
        || ["sharding_specs:", "parted:", "maximal:"]
            .iter()
            .any(|p| s.starts_with(p))
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

/// A mesh string or @FILE with a MeshProto.
fn load_mesh(spec: &str) -> Result<(Mesh, Vec<String>), DTensorError> {
    match spec.strip_prefix('@') {
        Some(path) => {
            let bytes = read_file(path).map_err(|e| DTensorError::Mesh {
                input: spec.into(),
                fault: e,
            })?;
            Ok((Mesh::decode(&bytes, path)?, Vec::new()))
        }
        None => Mesh::parse_with_warnings(spec),
    }
}

/// A sharding read from the command line: the sharding, the DTensor layout when it is one,
/// and parse warnings.
type LoadedSharding = (Sharding, Option<Layout>, Vec<String>);

/// A layout: TensorFlow's string, @FILE (LayoutProto), or with a mesh a PartitionSpec or
/// PyTorch placements. Returns the sharding, the layout when it is a DTensor one, warnings.
fn load_sharding(
    spec: &str,
    mesh: Option<&str>,
    rank_hint: Option<usize>,
    chunking: Chunking,
) -> Result<LoadedSharding, Box<dyn std::error::Error>> {
    let t = spec.trim();
    if t.starts_with('P') || t.starts_with('[') {
        let mesh_spec = mesh.ok_or_else(|| format!("layout {spec:?} needs --mesh"))?;
        let (mesh, warnings) = load_mesh(mesh_spec)?;
        let s = if t.starts_with('[') {
            let rank = rank_hint.ok_or_else(|| {
                format!("layout {spec:?}: PyTorch placements need the tensor rank (from the data)")
            })?;
            parse_torch_placements(t, &mesh, rank, chunking)?
        } else {
            parse_partition_spec(t, &mesh, rank_hint, chunking)?
        };
        let layout = s.to_layout();
        return Ok((s, layout, warnings));
    }
    let (layout, warnings) = match spec.strip_prefix('@') {
        Some(path) => (Layout::decode(&read_file(path)?, path)?, Vec::new()),
        None => Layout::parse_with_warnings(spec)?,
    };
    Ok((
        Sharding::from_layout(&layout, chunking)?,
        Some(layout),
        warnings,
    ))
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

fn chunking(uneven: bool) -> Chunking {
    if uneven {
        Chunking::Uneven
    } else {
        Chunking::Even
    }
}

fn show(a: ShowArgs) -> CmdResult {
    let spec = a.spec.as_str();
    enum Shown {
        Layout(Layout, Vec<String>),
        Mesh(Mesh, Vec<String>),
    }
    let shown = if let (Some(path), SpecKind::Layout) = (spec.strip_prefix('@'), a.kind) {
        Shown::Layout(Layout::decode(&read_file(path)?, path)?, Vec::new())
    } else if let (Some(path), SpecKind::Mesh) = (spec.strip_prefix('@'), a.kind) {
        Shown::Mesh(Mesh::decode(&read_file(path)?, path)?, Vec::new())
    } else if let Some(path) = spec.strip_prefix('@') {
        let bytes = read_file(path)?;
        match Layout::decode(&bytes, path) {
            Ok(l) if !l.is_empty() || bytes.first() == Some(&0x12) => Shown::Layout(l, Vec::new()),
            layout_result => match Mesh::decode(&bytes, path) {
                Ok(m) => Shown::Mesh(m, Vec::new()),
                Err(e) => match layout_result {
                    Err(le) => {
                        return Err(format!(
                            "{path}: neither a LayoutProto ({le}) nor a MeshProto ({e})"
                        )
                        .into())
                    }
                    Ok(_) => return Err(e.into()),
                },
            },
        }
    } else if matches!(a.kind, SpecKind::Layout)
        || (matches!(a.kind, SpecKind::Auto) && is_layout_text(spec))
    {
        let (l, w) = Layout::parse_with_warnings(spec)?;
        Shown::Layout(l, w)
    } else {
        let (m, w) = Mesh::parse_with_warnings(spec)?;
        Shown::Mesh(m, w)
    };
    match shown {
        Shown::Mesh(mesh, warnings) => {
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
        Shown::Layout(layout, warnings) => {
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

fn from_op_sharding(a: FromOpShardingArgs) -> CmdResult {
    let input = a.sharding.trim();
    let sharding = if let Some(path) = input.strip_prefix('@') {
        decode_op_sharding(&read_file(path)?, path)?
    } else if input.starts_with('{') {
        parse_hlo_text(input)?
    } else {
        let bytes = unhex(input)
            .ok_or_else(|| format!("{input:?} is neither hex, @FILE nor HLO sharding text"))?;
        decode_op_sharding(&bytes, "the hex argument")?
    };
    let mesh = match &a.mesh {
        Some(m) => {
            let (mesh, w) = load_mesh(m)?;
            warn_all(&w, false)?;
            Some(mesh)
        }
        None => None,
    };
    if let Some(rank) = a.rank.filter(|&r| r > MAX_RANK) {
        return Err(format!("--rank {rank}: more than TensorFlow's {MAX_RANK} dimensions").into());
    }
    let found = op_sharding_to_layouts(&sharding, mesh.as_ref(), a.rank)?;
    if a.json {
        let out = json!({
            "hlo_sharding_text": to_hlo_text(&sharding),
            "layouts": found.layouts.iter().map(|l| l.to_string()).collect::<Vec<_>>(),
            "notes": found.notes,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
    } else {
        outln!("sharding: {}", to_hlo_text(&sharding))?;
        for l in &found.layouts {
            outln!("layout: {l}")?;
        }
        for n in &found.notes {
            outln!("note: {n}")?;
        }
    }
    Ok(())
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok())
        .collect()
}

/// A `.npy` file as a host array (the descriptor is kept for writing back).
fn load_array(path: &Path) -> Result<(HostArray, String), Box<dyn std::error::Error>> {
    let NpyArray { descr, shape, data } = read_npy(path)?;
    let item = descr_itemsize(&descr)
        .ok_or_else(|| format!("{}: dtype {descr} is not supported", path.display()))?;
    let array =
        HostArray::from_bytes(shape, item, data).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((array, descr))
}

fn save_array(path: &Path, array: &HostArray, descr: &str) -> CmdResult {
    let Elements::Fixed { bytes, .. } = array.elements() else {
        return Err("internal: string arrays are read as fixed-width bytes".into());
    };
    write_npy_bytes(path, descr, array.shape(), bytes)?;
    Ok(())
}

/// Reads INDIR/0.npy .. INDIR/{n-1}.npy; all must share one dtype.
fn load_components(
    dir: &Path,
    n: usize,
) -> Result<(Vec<HostArray>, String), Box<dyn std::error::Error>> {
    let mut out = Vec::with_capacity(n);
    let mut descr0: Option<String> = None;
    for i in 0..n {
        let path = dir.join(format!("{i}.npy"));
        if !path.is_file() {
            return Err(format!(
                "{}: missing (the layout has {n} local devices, so 0.npy..{}.npy are needed)",
                path.display(),
                n.saturating_sub(1)
            )
            .into());
        }
        let (a, descr) = load_array(&path)?;
        match &descr0 {
            Some(d) if *d != descr => {
                return Err(format!("{}: dtype {descr}, but 0.npy has {d}", path.display()).into())
            }
            _ => descr0 = Some(descr),
        }
        out.push(a);
    }
    if dir.join(format!("{n}.npy")).exists() {
        return Err(format!(
            "{}: {n}.npy exists, but the layout has only {n} local devices",
            dir.display()
        )
        .into());
    }
    Ok((out, descr0.unwrap_or_else(|| "<f4".into())))
}

fn save_components(
    dir: &Path,
    comps: &[HostArray],
    descr: &str,
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    // Nothing is overwritten: an existing OUTDIR must be an empty directory.
    if fs::read_dir(dir).map_or(true, |mut entries| entries.next().is_some()) {
        super::refuse_existing(dir)?;
    }
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files = Vec::with_capacity(comps.len());
    for (i, c) in comps.iter().enumerate() {
        let path = dir.join(format!("{i}.npy"));
        save_array(&path, c, descr)?;
        files.push(path.display().to_string());
    }
    Ok(files)
}

fn unpack_cmd(a: UnpackArgs) -> CmdResult {
    let (global, descr) = load_array(&a.global)?;
    let (sharding, _, warnings) = load_sharding(
        &a.layout,
        a.mesh.as_deref(),
        Some(global.shape().len()),
        chunking(a.uneven),
    )?;
    warn_all(&warnings, false)?;
    let comps = unpack(&global, &sharding).map_err(|e| format!("{}: {e}", a.global.display()))?;
    let files = save_components(&a.outdir, &comps, &descr)?;
    let shapes: Vec<&[i64]> = comps.iter().map(HostArray::shape).collect();
    if a.json {
        let out = json!({ "layout": sharding.describe(), "dtype": descr, "global_shape": global.shape(),
            "components": files.iter().zip(&shapes).map(|(f, s)| json!({"file": f, "shape": s})).collect::<Vec<_>>() });
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
    } else {
        outln!(
            "wrote {} components of {:?} ({descr}) to {}",
            files.len(),
            global.shape(),
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
    let (sharding, _, warnings) =
        load_sharding(&a.layout, a.mesh.as_deref(), rank_hint, chunking(a.uneven))?;
    warn_all(&warnings, false)?;
    let n = sharding.mesh().local_device_ids().len();
    let (comps, descr) = load_components(&a.indir, n)?;
    let shape = match a.global_shape {
        Some(s) => {
            check_global_shape(&s.0, &sharding)?;
            s.0
        }
        None => global_shape_of(&comps, &sharding)?,
    };
    let global =
        pack(&comps, &sharding, &shape).map_err(|e| format!("{}: {e}", a.indir.display()))?;
    super::refuse_existing(&a.out)?;
    save_array(&a.out, &global, &descr)?;
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &json!({ "layout": sharding.describe(), "dtype": descr, "global_shape": shape, "file": a.out.display().to_string() })
            )?
        )?;
    } else {
        outln!("wrote {:?} ({descr}) to {}", shape, a.out.display())?;
    }
    Ok(())
}

/// Refuses a `--global-shape` the layout cannot take (its rank, sizes that do not divide),
/// naming the argument, before anything is read or allocated for it.
fn check_global_shape(shape: &[i64], sharding: &Sharding) -> Result<(), String> {
    sharding
        .check_shape(shape)
        .map_err(|e| format!("--global-shape {}: {e}", list(shape)))
}

/// The rank of INDIR/0.npy, if readable (PyTorch placements need a rank).
fn first_rank(dir: &Path) -> Option<usize> {
    read_npy(&dir.join("0.npy")).ok().map(|a| a.shape.len())
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
    let (from, from_layout, mut warnings) =
        load_sharding(&a.from, a.mesh.as_deref(), rank_hint, c)?;
    // `match` in the target keeps the source's spec on that axis.
    let (to, _, w2) = match (&from_layout, Layout::parse(&a.to)) {
        (Some(fl), Ok(tl)) if tl.specs().iter().any(|s| s == "match") => {
            let resolved = resolve_match(fl, &tl)?;
            (
                Sharding::from_layout(&resolved, c)?,
                Some(resolved),
                Vec::new(),
            )
        }
        _ => load_sharding(&a.to, a.mesh.as_deref(), Some(from.rank()), c)?,
    };
    warnings.extend(w2);
    warn_all(&warnings, false)?;
    let plan = if a.plan {
        Some(relayout_plan(&from, &to)?)
    } else {
        None
    };
    let mut written = None;
    if let (Some(indir), Some(outdir)) = (&a.indir, &a.outdir) {
        let n = from.mesh().local_device_ids().len();
        let (comps, descr) = load_components(indir, n)?;
        let shape = match &a.global_shape {
            Some(s) => {
                check_global_shape(&s.0, &from)?;
                s.0.clone()
            }
            None => global_shape_of(&comps, &from)?,
        };
        let moved = relayout(&comps, &from, &to, &shape)
            .map_err(|e| format!("{}: {e}", indir.display()))?;
        written = Some((save_components(outdir, &moved, &descr)?, shape));
    }
    if a.json {
        let out = json!({
            "from": from.describe(),
            "to": to.describe(),
            "plan": plan,
            "global_shape": written.as_ref().map(|w| w.1.clone()),
            "components": written.as_ref().map(|w| w.0.clone()),
        });
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
    } else {
        if let Some(p) = &plan {
            print_plan(p)?;
        }
        if let (Some((files, shape)), Some(outdir)) = (&written, &a.outdir) {
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

//! Making the plan: what `unbound reshard` was asked for (the target mesh, `--layout` rules,
//! `--default`), and [`plan`], which places every variable of the source on the target mesh
//! and counts the reads of the [`Plan`] it makes.

use regex::Regex;
use unbound_bundle::{display_key, infer_grid, StoredVariable, Variables, OBJECT_GRAPH_KEY};
use unbound_dtensor::{Chunking, Layout, Mesh, Sharding};

use crate::amplification::count_reads;
use crate::error::{ReshardError, Result};
use crate::plan::{Plan, ShardPlan, TargetItem, VariablePlan};

/// What `unbound reshard` was asked for.
#[derive(Debug, Clone)]
pub struct ReshardOptions {
    /// The target mesh.
    pub mesh: Mesh,
    /// `--layout` rules, first match wins.
    pub rules: Vec<LayoutRule>,
    /// `--default`: the specs for every variable no rule matches whose rank is the number
    /// of specs; or [`REPLICATED`] alone: every variable no rule matches, of any rank,
    /// replicated on the mesh.
    pub default: Option<Vec<String>>,
    /// Worker threads (at least 1).
    pub jobs: usize,
}

/// `KEY_OR_REGEX=SPECS`: variables whose checkpoint key or object path is `KEY_OR_REGEX`,
/// or matches it as a whole as a regular expression, take the layout `SPECS` (a comma list
/// of sharding specs on the target mesh, e.g. `x,unsharded`).
#[derive(Debug, Clone)]
pub struct LayoutRule {
    /// The key, object path or regular expression, as given.
    pub pattern: String,
    regex: Option<Regex>,
    /// The sharding specs.
    pub specs: Vec<String>,
}

impl LayoutRule {
    /// Parses `KEY_OR_REGEX=SPECS` (split at the last `=`).
    pub fn parse(text: &str) -> Result<Self> {
        let (pattern, specs) = text.rsplit_once('=').ok_or_else(|| {
            ReshardError::Usage(format!(
                "--layout {text:?}: expected KEY_OR_REGEX=SPECS, e.g. dense/kernel=x,unsharded"
            ))
        })?;
        if pattern.is_empty() {
            return Err(ReshardError::Usage(format!(
                "--layout {text:?}: the key or regular expression is empty"
            )));
        }
        let regex = Regex::new(&format!("^(?:{pattern})$")).ok();
        Ok(Self {
            pattern: pattern.to_string(),
            regex,
            specs: parse_specs(specs),
        })
    }

    /// Whether the rule names this checkpoint key or object path.
    pub fn matches(&self, key: &str, object_path: Option<&str>) -> bool {
        let hit = |s: &str| s == self.pattern || self.regex.as_ref().is_some_and(|r| r.is_match(s));
        hit(key) || object_path.is_some_and(hit)
    }
}

/// `--default replicated`: every variable no `--layout` matches, whatever its rank, is
/// replicated on the target mesh (all its axes `unsharded`; a scalar stays whole).
pub const REPLICATED: &str = "replicated";

/// A comma list of sharding specs (`x,unsharded`); the empty text is rank 0.
pub fn parse_specs(text: &str) -> Vec<String> {
    if text.trim().is_empty() {
        return Vec::new();
    }
    text.split(',').map(|s| s.trim().to_string()).collect()
}

/// A mesh in TensorFlow's string form (`|x=2,y=4|0,1,...|...|...`, or the short
/// `|x=2,y=4|*CPU`), or just its dimensions (`x=2,y=4`, meaning CPU devices 0 to n-1).
pub fn parse_mesh(text: &str) -> Result<Mesh> {
    let full = if text.contains('|') {
        text.to_string()
    } else {
        format!("|{text}|*CPU")
    };
    Ok(Mesh::parse(&full)?)
}

/// Plans the reshard of the bundle `src` by `options`. Fails, naming the key, when a rule
/// matches nothing, a layout does not fit a variable (rank, names, divisibility), or a
/// variable's stored slices overlap or do not cover it.
pub fn plan(src: &Variables, options: &ReshardOptions) -> Result<Plan> {
    let mesh = &options.mesh;
    let n = usize::try_from(mesh.size().unwrap_or(0)).unwrap_or(0);
    if n == 0 || mesh.is_single_device() {
        return Err(ReshardError::Usage(format!(
            "--mesh {mesh}: a mesh with devices is needed"
        )));
    }
    let mut used = vec![false; options.rules.len()];
    let replicated = options.default.as_deref() == Some(&[REPLICATED.to_string()][..]);
    // Variables with no layout on the mesh: each with why, all named in one error.
    let mut homeless: Vec<(String, usize, String)> = Vec::new();
    let mut variables = Vec::new();
    let mut shards: Vec<ShardPlan> = (0..=n)
        .map(|i| ShardPlan {
            shard: i as i32,
            items: Vec::new(),
            bytes: 0,
            read: 0,
        })
        .collect();
    let reader = &src.reader;
    refuse_unlisted_slices(src)?;
    let keys: Vec<Vec<u8>> = reader.tensor_keys().map(<[u8]>::to_vec).collect();
    for key in keys {
        let name = display_key(&key);
        let object_path = src.object_paths.get(&name).cloned();
        let var_err = |fault: String| ReshardError::Variable {
            key: name.clone(),
            fault,
        };
        let stored = reader.stored_variable(&key)?;
        let sliced =
            stored.pieces.len() > 1 || reader.entry(&key).is_some_and(|e| !e.slices.is_empty());
        let rule = if name == OBJECT_GRAPH_KEY {
            None
        } else {
            options
                .rules
                .iter()
                .position(|r| r.matches(&name, object_path.as_deref()))
        };
        if let Some(i) = rule {
            used[i] = true;
        }
        let rank = stored.shape.len();
        let specs: Option<Vec<String>> = match rule {
            Some(i) => Some(options.rules[i].specs.clone()),
            None if name == OBJECT_GRAPH_KEY => None,
            None if replicated && rank > 0 => Some(vec!["unsharded".to_string(); rank]),
            None => match &options.default {
                Some(d) if d.len() == rank && rank > 0 && !replicated => Some(d.clone()),
                _ if sliced => match keep_grid(&stored, mesh) {
                    Ok(specs) => Some(specs),
                    Err(fault) => {
                        homeless.push((name.clone(), rank, fault));
                        continue;
                    }
                },
                _ => None,
            },
        };
        let from = if !sliced {
            "whole".to_string()
        } else {
            let boxes: Vec<_> = stored.pieces.iter().map(|p| p.extents.clone()).collect();
            match infer_grid(&stored.shape, &boxes) {
                Some(g) => g.iter().map(i64::to_string).collect::<Vec<_>>().join("x"),
                None => format!("{} slices", stored.pieces.len()),
            }
        };
        let index = variables.len();
        match &specs {
            None => {
                if sliced {
                    // Only reachable for the object graph key, which is never sliced.
                    return Err(var_err("a sliced tensor needs a layout".into()));
                }
                let bytes = reader.stored_bytes(&key).unwrap_or(0);
                shards[0]
                    .items
                    .push(TargetItem::Whole { key: name.clone() });
                shards[0].bytes += bytes;
            }
            Some(specs) => {
                let full = stored.full_box();
                stored.check_covers(&full).map_err(|f| var_err(f.0))?;
                for (pos, region) in unique_slices(&stored.shape, specs, mesh).map_err(var_err)? {
                    let bytes = region_bytes(&stored, &region);
                    let shard = &mut shards[pos + 1];
                    shard.items.push(TargetItem::Slice {
                        variable: index,
                        region,
                    });
                    shard.bytes += bytes;
                }
            }
        }
        variables.push(VariablePlan {
            key: name.clone(),
            object_path,
            dtype: unbound_bundle::dtype::tf_name(stored.dtype),
            shape: stored.shape.clone(),
            from,
            to: specs,
            stored,
        });
    }
    if !homeless.is_empty() {
        return Err(ReshardError::Usage(homeless_error(&homeless, mesh)));
    }
    if let Some(i) = used.iter().position(|u| !u) {
        return Err(ReshardError::Usage(format!(
            "--layout {}={}: matches no checkpoint key or object path",
            options.rules[i].pattern,
            options.rules[i].specs.join(",")
        )));
    }
    let mut plan = Plan {
        mesh: mesh.to_string(),
        num_shards: n as i32 + 1,
        variables,
        shards,
        checksum_read: 0,
    };
    count_reads(&mut plan, reader);
    Ok(plan)
}

/// Refuses a source with index entries TensorFlow lists as variables but that are neither
/// tensors nor slices of one (`unlisted_slice_keys`: a key that looks like a slice key but
/// does not decode, a slice of a variable with no entry of its own): the output would drop
/// them without a word.
fn refuse_unlisted_slices(src: &Variables) -> Result<()> {
    let unlisted = src.reader.unlisted_slice_keys();
    let Some(first) = unlisted.first() else {
        return Ok(());
    };
    let shown: Vec<String> = unlisted.iter().take(3).map(|k| display_key(k)).collect();
    Err(ReshardError::Variable {
        key: display_key(first),
        fault: format!(
            "{} index {} of {} ({}{}) {} no tensor lists: TensorFlow lists such keys as \
             variables of their own, which reshard cannot place (rewrite the checkpoint with \
             TensorFlow, or remove them)",
            unlisted.len(),
            if unlisted.len() == 1 {
                "entry"
            } else {
                "entries"
            },
            src.reader.index_path().display(),
            shown.join(", "),
            if unlisted.len() > 3 { ", ..." } else { "" },
            if unlisted.len() == 1 {
                "is a slice key"
            } else {
                "are slice keys"
            },
        ),
    })
}

/// A box: start and length per dimension.
type Region = Vec<(u64, u64)>;

/// Bytes of `region` of a variable (fixed-size exactly; strings estimated by the share of
/// elements).
fn region_bytes(var: &StoredVariable, region: &[(u64, u64)]) -> u64 {
    let elems: u64 = region.iter().map(|&(_, l)| l).product();
    match var.element_size() {
        Some(e) => elems * e as u64,
        None => {
            let total: u64 = var.pieces.iter().map(|p| p.entry.size.max(0) as u64).sum();
            let all: u64 = var.shape.iter().map(|&d| d.max(0) as u64).product();
            total
                .checked_mul(elems)
                .and_then(|x| x.checked_div(all))
                .unwrap_or(total)
        }
    }
}

/// The unique slices of `shape` under `specs` on `mesh`, each with the mesh position of the
/// lowest device holding it (positions are in device-id order), in position order.
fn unique_slices(
    shape: &[i64],
    specs: &[String],
    mesh: &Mesh,
) -> std::result::Result<Vec<(usize, Region)>, String> {
    if specs.len() != shape.len() {
        return Err(format!(
            "layout {} has rank {}, the variable has shape {shape:?}",
            specs.join(","),
            specs.len()
        ));
    }
    let refs: Vec<&str> = specs.iter().map(String::as_str).collect();
    let layout = Layout::static_on(&refs, mesh).map_err(|e| e.to_string())?;
    let sharding = Sharding::from_layout(&layout, Chunking::Even).map_err(|e| e.to_string())?;
    sharding.check_shape(shape).map_err(|e| e.to_string())?;
    let n = mesh.size().unwrap_or(0);
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    // Positions in the order of their device ids, so the lowest id claims each slice.
    let mut order: Vec<(i64, usize)> = mesh
        .global_device_ids()
        .iter()
        .enumerate()
        .map(|(pos, &id)| (id, pos))
        .collect();
    if order.is_empty() {
        order = (0..n as usize).map(|p| (p as i64, p)).collect();
    }
    order.sort_unstable();
    for (_, pos) in order {
        let b = sharding
            .box_at(shape, pos as i64)
            .map_err(|e| e.to_string())?;
        let region = b.region();
        if seen.insert(region.clone()) {
            out.push((pos, region));
        }
    }
    Ok(out)
}

/// The error for sliced variables that have no layout on `mesh` (key, rank, why): every one
/// named, with the rules that would place them.
fn homeless_error(homeless: &[(String, usize, String)], mesh: &Mesh) -> String {
    let dims: Vec<String> = mesh
        .dims()
        .iter()
        .map(|d| format!("{}={}", d.name, d.size))
        .collect();
    let mesh = dims.join(",");
    let mut out = format!(
        "{} sliced variable{} no --layout or --default places, whose grid mesh {mesh} cannot hold:",
        homeless.len(),
        if homeless.len() == 1 { "" } else { "s" }
    );
    for (key, rank, fault) in homeless {
        let fault = fault.split("; give it").next().unwrap_or(fault);
        let fault = fault.split(", which mesh").next().unwrap_or(fault);
        out += &format!("\n  {key} (rank {rank}): {fault}");
    }
    let (key, rank, _) = &homeless[0];
    let example = vec!["unsharded"; *rank].join(",");
    out += &format!(
        "\nadd a rule for each (e.g. --layout '{key}={example}'), or --default replicated to \
         replicate every variable no --layout matches, whatever its rank"
    );
    out
}

/// The specs that keep a sliced variable's grid on `mesh`: each axis cut in n > 1 pieces
/// takes the first unused mesh dimension of size n.
fn keep_grid(var: &StoredVariable, mesh: &Mesh) -> std::result::Result<Vec<String>, String> {
    let boxes: Vec<_> = var.pieces.iter().map(|p| p.extents.clone()).collect();
    let grid = infer_grid(&var.shape, &boxes).ok_or_else(|| {
        "its slices form no even grid, so it has no layout to keep; give it one with --layout or --default".to_string()
    })?;
    let mut used = vec![false; mesh.dims().len()];
    let mut specs = Vec::with_capacity(grid.len());
    for &g in &grid {
        if g == 1 {
            specs.push("unsharded".to_string());
            continue;
        }
        let dim = mesh
            .dims()
            .iter()
            .enumerate()
            .find(|(i, d)| !used[*i] && d.size == g)
            .map(|(i, d)| (i, d.name.clone()));
        match dim {
            Some((i, name)) => {
                used[i] = true;
                specs.push(name);
            }
            None => {
                let g: Vec<String> = grid.iter().map(i64::to_string).collect();
                return Err(format!(
                    "it is stored as a {} grid, which mesh {mesh} cannot hold; give it a layout with --layout or --default",
                    g.join("x")
                ));
            }
        }
    }
    Ok(specs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_match_keys_paths_and_regexes() {
        let r = LayoutRule::parse("dense/.*=x,unsharded").unwrap();
        assert_eq!(r.specs, vec!["x", "unsharded"]);
        assert!(r.matches("dense/kernel/.ATTRIBUTES/VARIABLE_VALUE", None));
        assert!(!r.matches("x/dense/kernel", None));
        let r = LayoutRule::parse("m/w=y").unwrap();
        assert!(r.matches("m/w/.ATTRIBUTES/VARIABLE_VALUE", Some("m/w")));
        assert!(LayoutRule::parse("nolayout").is_err());
        assert!(LayoutRule::parse("=x").is_err());
        // An invalid regex still matches the literal key.
        let r = LayoutRule::parse("a[=x").unwrap();
        assert!(r.matches("a[", None));
    }

    fn sliced(w: &mut unbound_bundle::BundleWriter, key: &str, shape: &[i64], cuts: usize) {
        use unbound_bundle::{SliceSpec, Tensor};
        use unbound_proto::tensorflow::DataType;
        let rows = shape[0] / cuts as i64;
        let rest: i64 = shape[1..].iter().product();
        for c in 0..cuts as i64 {
            let mut ext = vec![(c * rows, Some(rows))];
            ext.extend(shape[1..].iter().map(|_| (0, None)));
            let mut sub = shape.to_vec();
            sub[0] = rows;
            let t = Tensor::raw(
                DataType::DtFloat,
                sub,
                vec![0u8; (rows * rest * 4) as usize],
            );
            w.add_slice(0, key, shape, &SliceSpec::new(ext), &t)
                .unwrap();
        }
    }

    #[test]
    fn variables_the_mesh_cannot_hold_are_all_named_and_default_replicated_places_them() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("ck");
        let mut w = unbound_bundle::BundleWriter::create(&prefix).unwrap();
        sliced(&mut w, "a", &[6, 4], 3);
        sliced(&mut w, "b", &[3, 2, 2], 3);
        sliced(&mut w, "c", &[4], 2);
        w.finish().unwrap();
        let src = Variables::open(&prefix).unwrap();
        let mut options = ReshardOptions {
            mesh: parse_mesh("x=2,y=4").unwrap(),
            rules: vec![],
            default: None,
            jobs: 1,
        };
        let err = plan(&src, &options).unwrap_err().to_string();
        assert!(err.contains("2 sliced variables"), "{err}");
        assert!(
            err.contains("\n  a (rank 2)") && err.contains("\n  b (rank 3)"),
            "{err}"
        );
        assert!(err.contains("--layout 'a=unsharded,unsharded'"), "{err}");
        assert!(err.contains("--default replicated"), "{err}");
        options.default = Some(vec![REPLICATED.to_string()]);
        let p = plan(&src, &options).unwrap();
        for v in &p.variables {
            assert_eq!(
                v.to.as_deref().unwrap(),
                vec!["unsharded"; v.shape.len()],
                "{}",
                v.key
            );
        }
    }

    #[test]
    fn unique_slices_go_to_the_lowest_device() {
        let mesh = parse_mesh("x=2,y=4").unwrap();
        let s = unique_slices(&[8, 16], &["x".into(), "unsharded".into()], &mesh).unwrap();
        assert_eq!(
            s,
            vec![(0, vec![(0, 4), (0, 16)]), (4, vec![(4, 4), (0, 16)])]
        );
        let s = unique_slices(&[8, 16], &["y".into(), "x".into()], &mesh).unwrap();
        assert_eq!(s.len(), 8);
        assert_eq!(s[1], (1, vec![(2, 2), (0, 8)]));
        let err = unique_slices(&[6, 16], &["y".into(), "x".into()], &mesh).unwrap_err();
        assert!(err.contains("does not divide"), "{err}");
        assert!(unique_slices(&[8], &["y".into(), "x".into()], &mesh).is_err());
        assert!(unique_slices(&[8], &["z".into()], &mesh).is_err());
    }
}

//! PyTorch `DeviceMesh` and placements text (`[Shard(0), Replicate()]`), both ways.

use serde::Serialize;

use crate::error::{DTensorError, Result};
use crate::mesh::Mesh;
use crate::sharding::{Chunking, Sharding};

/// A sharding as PyTorch DTensor spells it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TorchSharding {
    /// `DeviceMesh("cpu", [[0, 1, 2, 3], [4, 5, 6, 7]], mesh_dim_names=("x", "y"))`.
    pub device_mesh: String,
    /// One placement per mesh dimension: `[Shard(0), Replicate()]`.
    pub placements: String,
}

fn nested(ids: &[i64], shape: &[i64]) -> String {
    match shape {
        [] => ids.first().map_or(String::new(), i64::to_string),
        [_] => format!(
            "[{}]",
            ids.iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        [n, rest @ ..] => {
            let step = ids.len() / (*n).max(1) as usize;
            let parts: Vec<String> = ids.chunks(step.max(1)).map(|c| nested(c, rest)).collect();
            format!("[{}]", parts.join(", "))
        }
    }
}

/// The PyTorch form of a sharding. An axis over several mesh dimensions maps to repeated
/// `Shard(axis)` placements only when its dimensions are in mesh order (PyTorch splits in
/// mesh-dimension order); otherwise PyTorch needs its private `_StridedShard` and this fails.
pub fn to_torch(s: &Sharding) -> Result<TorchSharding> {
    let fail = |fault: String| DTensorError::Syntax {
        what: "PyTorch placements",
        input: s.describe(),
        fault,
    };
    let mesh = s.mesh();
    let mut placements = vec!["Replicate()".to_string(); mesh.dims().len()];
    for (axis, dims) in s.axes().iter().enumerate() {
        if dims.windows(2).any(|w| w[0] > w[1]) {
            return Err(fail(format!(
                "axis {axis} is split over mesh dimensions out of mesh order; PyTorch needs _StridedShard for that"
            )));
        }
        for &m in dims {
            placements[m] = format!("Shard({axis})");
        }
    }
    for &m in s.partial() {
        placements[m] = "Partial(\"sum\")".to_string();
    }
    let device_type = match mesh.device_type().as_str() {
        "GPU" => "cuda".to_string(),
        t => t.to_ascii_lowercase(),
    };
    let names: Vec<String> = mesh
        .dims()
        .iter()
        .map(|d| format!("\"{}\"", d.name))
        .collect();
    let names = if names.len() == 1 {
        format!("({},)", names[0])
    } else {
        format!("({})", names.join(", "))
    };
    Ok(TorchSharding {
        device_mesh: format!(
            "DeviceMesh(\"{device_type}\", {}, mesh_dim_names={names})",
            nested(mesh.global_device_ids(), &mesh.shape())
        ),
        placements: format!("[{}]", placements.join(", ")),
    })
}

/// Parses placements text (`[Shard(0), Replicate()]`, `Partial("sum")` or `Partial(sum)`)
/// on `mesh` for a tensor of `rank`. Repeated `Shard(d)` splits axis d over those mesh
/// dimensions in mesh order.
pub fn parse_torch_placements(
    text: &str,
    mesh: &Mesh,
    rank: usize,
    chunking: Chunking,
) -> Result<Sharding> {
    let fail = |fault: String| DTensorError::Syntax {
        what: "PyTorch placements",
        input: text.to_string(),
        fault,
    };
    let t = text.trim();
    let inner = t
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .unwrap_or(t);
    let items: Vec<&str> = split_top_level(inner);
    if items.len() != mesh.dims().len() {
        return Err(fail(format!(
            "{} placements for a mesh of {} dimensions",
            items.len(),
            mesh.dims().len()
        )));
    }
    let mut axes = vec![Vec::new(); rank];
    let mut partial = Vec::new();
    for (m, item) in items.iter().enumerate() {
        let item = item.trim();
        if item == "Replicate()" {
            continue;
        }
        if let Some(arg) = item
            .strip_prefix("Shard(")
            .and_then(|r| r.strip_suffix(')'))
        {
            let arg = arg.trim().strip_prefix("dim=").unwrap_or(arg.trim());
            let axis: usize = arg
                .parse()
                .map_err(|_| fail(format!("bad Shard dimension {arg:?}")))?;
            if axis >= rank {
                return Err(fail(format!("Shard({axis}) for a tensor of rank {rank}")));
            }
            axes[axis].push(m);
        } else if let Some(arg) = item
            .strip_prefix("Partial(")
            .and_then(|r| r.strip_suffix(')'))
        {
            let op = arg
                .trim()
                .strip_prefix("reduce_op=")
                .unwrap_or(arg.trim())
                .trim_matches(['"', '\'']);
            if !op.is_empty() && op != "sum" {
                return Err(fail(format!("Partial({op}): only sum is supported")));
            }
            partial.push(m);
        } else {
            return Err(fail(format!("unknown placement {item:?}")));
        }
    }
    Sharding::new(mesh.clone(), axes, partial, chunking).map_err(|e| fail(e.to_string()))
}

fn split_top_level(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0i32, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if !s[start..].trim().is_empty() {
        out.push(&s[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Layout;

    #[test]
    fn layouts_in_pytorch_terms() {
        let l = Layout::parse("sharding_specs:y,unsharded, mesh:|x=2,y=4|*CPU").unwrap();
        let t = to_torch(&Sharding::from_layout(&l, Chunking::Even).unwrap()).unwrap();
        assert_eq!(t.placements, "[Replicate(), Shard(0)]");
        assert_eq!(
            t.device_mesh,
            "DeviceMesh(\"cpu\", [[0, 1, 2, 3], [4, 5, 6, 7]], mesh_dim_names=(\"x\", \"y\"))"
        );
        let back = parse_torch_placements(&t.placements, l.mesh(), 2, Chunking::Even).unwrap();
        assert_eq!(back.to_layout().unwrap(), l);
        let p = parse_torch_placements("[Partial(sum), Shard(dim=1)]", l.mesh(), 2, Chunking::Even)
            .unwrap();
        assert_eq!(p.partial(), &[0]);
        assert_eq!(
            to_torch(&p).unwrap().placements,
            "[Partial(\"sum\"), Shard(1)]"
        );
        assert!(
            parse_torch_placements("[Shard(2), Replicate()]", l.mesh(), 2, Chunking::Even).is_err()
        );
        assert!(parse_torch_placements("[Shard(0)]", l.mesh(), 2, Chunking::Even).is_err());
        let multi =
            Sharding::new(l.mesh().clone(), vec![vec![1, 0]], vec![], Chunking::Even).unwrap();
        assert!(to_torch(&multi).is_err());
    }
}

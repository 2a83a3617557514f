//! JAX `PartitionSpec` text (`P('x', None)`, `P(('x', 'y'), None)`), both ways.

use crate::error::{DTensorError, Result};
use crate::mesh::Mesh;
use crate::sharding::{Chunking, Sharding};

/// The `PartitionSpec` of a sharding: one entry per axis, `None` when unsharded, a name, or
/// a tuple of names (major first) for an axis over several mesh dimensions.
pub fn to_partition_spec(s: &Sharding) -> Result<String> {
    if !s.partial().is_empty() {
        return Err(DTensorError::Syntax {
            what: "PartitionSpec",
            input: s.describe(),
            fault: "partial sums have no PartitionSpec entry".into(),
        });
    }
    let name = |m: usize| format!("'{}'", s.mesh().dims()[m].name);
    let entries: Vec<String> = s
        .axes()
        .iter()
        .map(|a| match a.as_slice() {
            [] => "None".to_string(),
            [m] => name(*m),
            many => format!(
                "({})",
                many.iter().map(|&m| name(m)).collect::<Vec<_>>().join(", ")
            ),
        })
        .collect();
    Ok(format!("P({})", entries.join(", ")))
}

/// Parses `P(...)` / `PartitionSpec(...)` (or a bare parenthesised list) on `mesh`. With
/// `rank`, missing trailing entries are `None`, as in JAX.
pub fn parse_partition_spec(
    text: &str,
    mesh: &Mesh,
    rank: Option<usize>,
    chunking: Chunking,
) -> Result<Sharding> {
    let fail = |fault: String| DTensorError::Syntax {
        what: "PartitionSpec",
        input: text.to_string(),
        fault,
    };
    let t = text.trim();
    let t = t
        .strip_prefix("PartitionSpec")
        .or_else(|| t.strip_prefix('P'))
        .unwrap_or(t)
        .trim();
    let inner = t
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| fail("expected P(entry, ...)".into()))?;
    let mut axes: Vec<Vec<usize>> = Vec::new();
    let mut rest = inner.trim();
    let dim = |name: &str| -> Result<usize> {
        let n = name.trim();
        let unquoted = n
            .strip_prefix('\'')
            .and_then(|r| r.strip_suffix('\''))
            .or_else(|| n.strip_prefix('"').and_then(|r| r.strip_suffix('"')))
            .ok_or_else(|| fail(format!("expected a quoted mesh axis name, found {n:?}")))?;
        mesh.dim_index(unquoted)
            .ok_or_else(|| fail(format!("mesh {mesh} has no dimension {unquoted:?}")))
    };
    while !rest.is_empty() {
        let (entry, after) = if rest.starts_with('(') {
            let close = rest
                .find(')')
                .ok_or_else(|| fail("unclosed tuple".into()))?;
            (&rest[..=close], &rest[close + 1..])
        } else {
            match rest.find(',') {
                Some(c) => (&rest[..c], &rest[c..]),
                None => (rest, ""),
            }
        };
        let entry = entry.trim();
        let dims = if entry == "None" || entry == "()" {
            Vec::new()
        } else if let Some(tuple) = entry.strip_prefix('(').and_then(|r| r.strip_suffix(')')) {
            tuple
                .split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(dim)
                .collect::<Result<_>>()?
        } else {
            vec![dim(entry)?]
        };
        axes.push(dims);
        rest = after.trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
    if let Some(r) = rank {
        if axes.len() > r {
            return Err(fail(format!("{} entries for rank {r}", axes.len())));
        }
        axes.resize(r, Vec::new());
    }
    Sharding::new(mesh.clone(), axes, Vec::new(), chunking).map_err(|e| fail(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_ways() {
        let mesh = Mesh::parse("|x=2,y=4|*CPU").unwrap();
        for text in [
            "P('x', None)",
            "P(None, 'y')",
            "P(('x', 'y'), None)",
            "P()",
            "P(('y', 'x'))",
        ] {
            let s = parse_partition_spec(text, &mesh, None, Chunking::Even).unwrap();
            assert_eq!(to_partition_spec(&s).unwrap(), text);
        }
        let s =
            parse_partition_spec("PartitionSpec(\"y\")", &mesh, Some(3), Chunking::Even).unwrap();
        assert_eq!(to_partition_spec(&s).unwrap(), "P('y', None, None)");
        for bad in ["P('z')", "P('x', 'x')", "Q", "P(x)", "P(('x', 'y'), 'x')"] {
            assert!(
                parse_partition_spec(bad, &mesh, None, Chunking::Even).is_err(),
                "{bad}"
            );
        }
    }
}

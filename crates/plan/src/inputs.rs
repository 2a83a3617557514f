//! The layouts given on the command line: the mesh (`x=2,y=4` or any mesh string `unbound
//! layout` takes) and per tensor a list of specs (`x,unsharded`), a JAX PartitionSpec or a
//! TensorFlow layout string, read with the one grammar of `unbound_dtensor`.

use unbound_dtensor::spec::{is_mesh_dim_spec, UNSHARDED};
use unbound_dtensor::{parse_mesh_arg, parse_sharding, Chunking, Mesh};

use crate::error::{PlanError, Result};
use crate::specs::{Spec, Specs};

/// Reads the mesh: `x=2,y=4` is a CPU mesh of those dimensions; anything else is a mesh
/// string or `@FILE` as `unbound layout` reads it.
pub fn parse_mesh(text: &str) -> Result<Mesh> {
    let t = text.trim();
    let full = if !t.contains('|') && !t.starts_with('@') && t.contains('=') {
        format!("|{t}|*CPU")
    } else {
        t.to_string()
    };
    Ok(parse_mesh_arg(&full)?.0)
}

fn argument(fault: String) -> PlanError {
    PlanError::Argument { fault }
}

/// Reads the specs of a tensor of `rank` axes named `what`: a comma list of mesh
/// dimensions and `unsharded`, or a PartitionSpec (`P('x', None)`) or layout string.
pub fn parse_specs(
    text: &str,
    mesh: &Mesh,
    mesh_text: &str,
    rank: usize,
    what: &str,
) -> Result<Specs> {
    let t = text.trim();
    let names: Vec<String> = if t.starts_with('P') || t.starts_with("sharding_specs:") {
        let parsed = parse_sharding(t, Some(mesh_text), Some(rank), Chunking::Even)?;
        let layout = parsed
            .layout
            .ok_or_else(|| argument(format!("{what}={t}: not a DTensor layout")))?;
        layout.specs().to_vec()
    } else if t.is_empty() {
        Vec::new()
    } else {
        t.split(',').map(|s| s.trim().to_string()).collect()
    };
    if names.len() != rank {
        return Err(argument(format!(
            "{what}={t}: {} specs for a tensor of rank {rank}",
            names.len()
        )));
    }
    let mut out = Vec::with_capacity(rank);
    for n in &names {
        if n == UNSHARDED || !is_mesh_dim_spec(n) {
            if n != UNSHARDED {
                return Err(argument(format!(
                    "{what}={t}: {n:?} is not allowed in an input layout"
                )));
            }
            out.push(Spec::U);
            continue;
        }
        let d = mesh
            .dim_index(n)
            .ok_or_else(|| argument(format!("{what}={t}: the mesh has no dimension {n:?}")))?;
        let d =
            u8::try_from(d).map_err(|_| argument(format!("{what}: too many mesh dimensions")))?;
        if out.contains(&Spec::D(d)) {
            return Err(argument(format!(
                "{what}={t}: Attempted to shard two or more tensor dimensions over mesh dimension {n}"
            )));
        }
        out.push(Spec::D(d));
    }
    Ok(out)
}

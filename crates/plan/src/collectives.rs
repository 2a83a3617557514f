//! The collectives DTensor's expansion emits, and what each costs a device: relayouts
//! (`EmitRelayout` in `mlir/collectives.cc`: all-to-all for the single swap, otherwise slice,
//! all-gather, slice) and all-reduces.
//!
//! Bytes are per device per call, what each device sends (and, these being symmetric, also
//! receives) under the ring algorithms: an all-gather from local size `L` over `k` devices
//! moves `(k-1)·L`; an all-reduce of `L` moves `2(k-1)/k·L`; an all-to-all of `L` moves
//! `(k-1)/k·L`; an all-scatter is a local slice and moves nothing.

use serde::Serialize;

use crate::specs::{uses, Spec, Specs};

/// One collective.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Collective {
    /// `all_gather`, `all_reduce`, `all_to_all` or `all_scatter` (a local slice).
    pub kind: &'static str,
    /// For an all-reduce, its reduction (`Add`, `Max`, `Mean`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reduction: Option<&'static str>,
    /// The mesh dimensions it runs over.
    pub mesh_dims: Vec<String>,
    /// What it applies to: `input N` (before the op), `output N` (after it) or `result`.
    pub on: String,
    /// Bytes each device sends per call; `None` when a shape is not static.
    pub bytes: Option<u64>,
    /// Packed into an earlier collective's call by DTensor's all-reduce combiner (the same
    /// mesh dims and dtype, independent of it); its bytes still move, in that call.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub combined: bool,
}

/// The mesh: dimension names and sizes.
pub struct MeshDims<'a> {
    /// Names.
    pub names: &'a [String],
    /// Sizes.
    pub sizes: &'a [i64],
}

impl MeshDims<'_> {
    fn size(&self, d: u8) -> u64 {
        self.sizes
            .get(usize::from(d))
            .and_then(|&s| u64::try_from(s).ok())
            .unwrap_or(1)
    }
    fn name(&self, d: u8) -> String {
        self.names.get(usize::from(d)).cloned().unwrap_or_default()
    }

    /// Bytes of one device's piece of a tensor of `shape` laid out as `specs`.
    pub fn local_bytes(&self, shape: Option<&[i64]>, specs: &[Spec], elem: u64) -> Option<u64> {
        let shape = shape?;
        let mut n = elem;
        for (a, &d) in shape.iter().enumerate() {
            let d = u64::try_from(d).ok()?;
            let k = specs
                .get(a)
                .and_then(|s| s.dim())
                .map_or(1, |m| self.size(m));
            n = n.checked_mul(d / k.max(1))?;
        }
        Some(n)
    }

    fn names_of(&self, dims: &[u8]) -> Vec<String> {
        dims.iter().map(|&d| self.name(d)).collect()
    }

    /// The collectives that move a tensor of `shape` from `src` to `dst`.
    pub fn relayout(
        &self,
        src: &[Spec],
        dst: &[Spec],
        shape: Option<&[i64]>,
        elem: u64,
        on: &str,
    ) -> Vec<Collective> {
        if src == dst || src.len() != dst.len() {
            return Vec::new();
        }
        let one = |s: Spec| s.dim().is_none_or(|d| self.size(d) == 1);
        // Differences only on axes of one shard (size-1 mesh dims): an Identity.
        if src
            .iter()
            .zip(dst)
            .all(|(&a, &b)| a == b || (one(a) && one(b)))
        {
            return Vec::new();
        }
        let mut out = Vec::new();
        if let Some(m) = all_to_all_dim(src, dst) {
            let k = self.size(m);
            out.push(Collective {
                kind: "all_to_all",
                reduction: None,
                mesh_dims: vec![self.name(m)],
                on: on.into(),
                bytes: self
                    .local_bytes(shape, src, elem)
                    .map(|l| l * (k - 1) / k.max(1)),
                combined: false,
            });
            return out;
        }
        let i1: Specs = src
            .iter()
            .zip(dst)
            .map(|(&s, &d)| match (s, d) {
                (Spec::U, Spec::D(m)) if !uses(src, m) => d,
                _ => s,
            })
            .collect();
        if i1 != src {
            out.push(self.scatter(src, &i1, on));
        }
        let i2: Specs = i1
            .iter()
            .zip(dst)
            .map(|(&s, &d)| if s.is_sharded() && s != d { Spec::U } else { s })
            .collect();
        if i2 != i1 {
            let mut dims: Vec<u8> = i1
                .iter()
                .zip(&i2)
                .filter(|(a, b)| a != b)
                .filter_map(|(a, _)| a.dim())
                .collect();
            dims.sort_unstable();
            let before = self.local_bytes(shape, &i1, elem);
            let after = self.local_bytes(shape, &i2, elem);
            out.push(Collective {
                kind: "all_gather",
                reduction: None,
                mesh_dims: self.names_of(&dims),
                on: on.into(),
                bytes: before.zip(after).map(|(b, a)| a.saturating_sub(b)),
                combined: false,
            });
        }
        if i2 != dst {
            out.push(self.scatter(&i2, dst, on));
        }
        out
    }

    fn scatter(&self, from: &[Spec], to: &[Spec], on: &str) -> Collective {
        let mut dims: Vec<u8> = from
            .iter()
            .zip(to)
            .filter(|(a, b)| a != b)
            .filter_map(|(_, b)| b.dim())
            .collect();
        dims.sort_unstable();
        Collective {
            kind: "all_scatter",
            reduction: None,
            mesh_dims: self.names_of(&dims),
            on: on.into(),
            bytes: Some(0),
            combined: false,
        }
    }

    /// An all-reduce over `dims` of a tensor of `shape` laid out as `specs`. `None` when every
    /// device would be its own group (DTensor emits nothing then).
    pub fn all_reduce(
        &self,
        reduction: &'static str,
        dims: &[u8],
        shape: &[i64],
        specs: &[Spec],
        elem: u64,
    ) -> Option<Collective> {
        let k: u64 = dims.iter().map(|&d| self.size(d)).product();
        if k <= 1 {
            return None;
        }
        Some(Collective {
            kind: "all_reduce",
            reduction: Some(reduction),
            mesh_dims: self.names_of(dims),
            on: "result".into(),
            bytes: self
                .local_bytes(Some(shape), specs, elem)
                .map(|l| 2 * (k - 1) * l / k),
            combined: false,
        })
    }
}

/// The mesh dim of DTensor's all-to-all relayout: exactly one axis going unsharded → m and
/// one going m → unsharded, nothing else changing.
fn all_to_all_dim(src: &[Spec], dst: &[Spec]) -> Option<u8> {
    let mut gain = None;
    let mut lose = None;
    for (&s, &d) in src.iter().zip(dst) {
        match (s, d) {
            _ if s == d => {}
            (Spec::U, Spec::D(m)) if gain.is_none() => gain = Some(m),
            (Spec::D(m), Spec::U) if lose.is_none() => lose = Some(m),
            _ => return None,
        }
    }
    match (gain, lose) {
        (Some(a), Some(b)) if a == b => Some(a),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::Spec::*;
    use super::*;

    fn mesh() -> (Vec<String>, Vec<i64>) {
        (vec!["x".into(), "y".into()], vec![2, 4])
    }

    #[test]
    fn relayouts_follow_emit_relayout() {
        let (names, sizes) = mesh();
        let m = MeshDims {
            names: &names,
            sizes: &sizes,
        };
        let shape = [8i64, 8];
        let kinds = |s: &[Spec], d: &[Spec]| -> Vec<&'static str> {
            m.relayout(s, d, Some(&shape), 4, "input 0")
                .iter()
                .map(|c| c.kind)
                .collect()
        };
        assert_eq!(kinds(&[D(0), U], &[U, U]), ["all_gather"]);
        assert_eq!(kinds(&[U, U], &[D(0), D(1)]), ["all_scatter"]);
        assert_eq!(
            kinds(&[D(0), D(1)], &[D(1), D(0)]),
            ["all_gather", "all_scatter"]
        );
        assert_eq!(kinds(&[D(0), U], &[U, D(0)]), ["all_to_all"]);
        // An all-gather over x of an [8,8] f32 sharded [x,u]: local 128 bytes, gathered 256.
        let g = m.relayout(&[D(0), U], &[U, U], Some(&shape), 4, "input 0");
        assert_eq!(g[0].bytes, Some(128));
    }
}

//! Sharding specs as the planner works with them (a mesh-dimension index, `unsharded` or
//! `any`), and DTensor's layout algebra over them: the merge of producer and consumer
//! requests (`MergeLayouts` in `layout_propagation_v2.cc`) and the elementwise broadcast
//! fold (`GetBroadcastLayoutForElementWise`).

/// One tensor axis's sharding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Spec {
    /// Not sharded.
    U,
    /// Any sharding (a consumer does not care).
    Any,
    /// Sharded over the mesh dimension of this index.
    D(u8),
}

/// One spec per axis.
pub type Specs = Vec<Spec>;

impl Spec {
    /// Whether the axis is sharded over a mesh dimension.
    pub fn is_sharded(self) -> bool {
        matches!(self, Spec::D(_))
    }
    /// The mesh dimension, if sharded.
    pub fn dim(self) -> Option<u8> {
        match self {
            Spec::D(d) => Some(d),
            _ => None,
        }
    }
}

/// Fully unsharded specs of `rank` axes.
pub fn replicated(rank: usize) -> Specs {
    vec![Spec::U; rank]
}

/// Whether any axis uses mesh dimension `d`.
pub fn uses(specs: &[Spec], d: u8) -> bool {
    specs.contains(&Spec::D(d))
}

/// `any` becomes `unsharded`.
pub fn any_to_u(mut s: Specs) -> Specs {
    for x in &mut s {
        if *x == Spec::Any {
            *x = Spec::U;
        }
    }
    s
}

/// DTensor's `MergeLayouts`: the layout of a value from its producer's request and its
/// consumers' requests. `None` when there is neither.
pub fn merge(producer: Option<&Specs>, consumers: &[&Specs]) -> Option<Specs> {
    if consumers.is_empty() {
        return producer.map(|p| any_to_u(p.clone()));
    }
    let rank = consumers[0].len();
    if consumers.iter().any(|c| c.len() != rank) {
        // DTensor: "found two consumer layout of different ranks"; keep the producer's.
        return producer.map(|p| any_to_u(p.clone()));
    }
    let mut proposal = vec![Spec::Any; rank];
    for (j, slot) in proposal.iter_mut().enumerate() {
        let mut agreed: Option<Spec> = None;
        let mut conflict = false;
        for c in consumers {
            let s = c[j];
            if s == Spec::Any {
                continue;
            }
            match agreed {
                None => agreed = Some(s),
                Some(a) if a != s => conflict = true,
                _ => {}
            }
        }
        *slot = if conflict {
            Spec::U
        } else {
            agreed.unwrap_or(Spec::Any)
        };
    }
    // Over-sharding filter: a spec on two axes (any counts too) becomes unsharded.
    let snapshot = proposal.clone();
    for (j, slot) in proposal.iter_mut().enumerate() {
        if *slot != Spec::U
            && snapshot
                .iter()
                .enumerate()
                .any(|(k, &o)| k != j && o == *slot)
        {
            *slot = Spec::U;
        }
    }
    let Some(producer) = producer.filter(|p| p.len() == rank) else {
        return Some(any_to_u(proposal));
    };
    let mut out = proposal.clone();
    for j in 0..rank {
        let p = producer[j];
        let c = proposal[j];
        out[j] = if p == c || p == Spec::Any {
            c
        } else if c == Spec::Any || p.is_sharded() {
            p
        } else {
            // Producer unsharded, consumer wants a mesh dim: kept unless the producer uses it.
            match c {
                Spec::D(d) if uses(producer, d) => Spec::U,
                other => other,
            }
        };
    }
    Some(any_to_u(out))
}

/// DTensor's `GetBroadcastLayoutForElementWise` for two operand layouts, right-aligned to
/// the output rank `rank`; `a` is folded first and wins ties between two mesh dims. Axes of
/// size one in an operand (`*_ones`) count as unsharded.
pub fn broadcast_pair(a: &[Spec], b: &[Spec], rank: usize) -> Specs {
    let get = |s: &[Spec], j: usize| -> Spec {
        let off = rank - s.len();
        if j < off {
            Spec::U
        } else {
            s[j - off]
        }
    };
    let pos = |s: &[Spec], d: u8| -> Option<usize> {
        let off = rank - s.len();
        s.iter().position(|&x| x == Spec::D(d)).map(|p| p + off)
    };
    (0..rank)
        .map(|j| {
            let (x, y) = (get(a, j), get(b, j));
            let clash = |s: Spec, other: &[Spec]| {
                s.dim().and_then(|d| pos(other, d)).is_some_and(|p| p != j)
            };
            if clash(x, b) || clash(y, a) {
                Spec::U
            } else if x.is_sharded() {
                x
            } else if y.is_sharded() {
                y
            } else {
                Spec::U
            }
        })
        .collect()
}

/// DTensor's `GetMostShardedLayout` is not needed here; `least_sharded` keeps an axis only where
/// both agree.
pub fn least_sharded(a: &[Spec], b: &[Spec]) -> Specs {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| if x == y { x } else { Spec::U })
        .collect()
}

/// A mesh dim used on two axes leaves both unsharded (DTensor's `VerifyOrFixLayout`).
pub fn fix_duplicates(mut s: Specs) -> Specs {
    let snapshot = s.clone();
    for (j, slot) in s.iter_mut().enumerate() {
        if let Spec::D(d) = *slot {
            if snapshot
                .iter()
                .enumerate()
                .any(|(k, &o)| k != j && o == Spec::D(d))
            {
                *slot = Spec::U;
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::Spec::*;
    use super::*;

    #[test]
    fn consumers_add_sharding_only_where_the_producer_leaves_room() {
        let p = vec![D(0), U];
        assert_eq!(merge(Some(&p), &[&vec![U, D(1)]]), Some(vec![D(0), D(1)]));
        assert_eq!(merge(Some(&p), &[&vec![U, D(0)]]), Some(vec![D(0), U]));
        assert_eq!(merge(Some(&p), &[&vec![D(1), U]]), Some(vec![D(0), U]));
        // Consumers disagree: unsharded.
        assert_eq!(
            merge(Some(&vec![U, U]), &[&vec![D(0), U], &vec![D(1), U]]),
            Some(vec![U, U])
        );
        assert_eq!(merge(None, &[&vec![Any, Any]]), Some(vec![U, U]));
    }

    #[test]
    fn broadcast_folds_right_aligned() {
        assert_eq!(broadcast_pair(&[D(0), U], &[D(1)], 2), vec![D(0), D(1)]);
        assert_eq!(broadcast_pair(&[D(0), U], &[U, D(0)], 2), vec![U, U]);
        assert_eq!(broadcast_pair(&[D(0)], &[D(1)], 1), vec![D(0)]);
    }
}

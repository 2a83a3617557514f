//! Dataflow control flow: `Switch` forwards its input twice, `Merge` outputs the shape all its
//! inputs share (dims that differ become unknown) plus the chosen index.

use super::super::shape::Shape;
use super::super::tensor::Tensor;
use super::Ctx;

pub(super) fn infer(op: &str, ctx: &Ctx<'_>) -> Option<Vec<Tensor>> {
    match op {
        "Switch" | "RefSwitch" => {
            let s = ctx.shape(0);
            Some(vec![Tensor::shaped(s.clone()), Tensor::shaped(s.clone())])
        }
        "Merge" | "RefMerge" => Some(vec![
            Tensor::shaped(generalize(ctx.inputs.iter().map(|t| &t.shape))),
            Tensor::shaped(Shape::scalar()),
        ]),
        _ => None,
    }
}

/// The most specific shape every one of `shapes` conforms to.
fn generalize<'s>(mut shapes: impl Iterator<Item = &'s Shape>) -> Shape {
    let Some(first) = shapes.next() else {
        return Shape::Unknown;
    };
    shapes.fold(first.clone(), |acc, s| match (acc.dims(), s.dims()) {
        (Some(a), Some(b)) if a.len() == b.len() => Shape::Known(
            a.iter()
                .zip(b)
                .map(|(&x, &y)| if x == y { x } else { -1 })
                .collect(),
        ),
        _ => Shape::Unknown,
    })
}

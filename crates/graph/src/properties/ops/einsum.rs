//! `Einsum`: the output's dims by label from the inputs' dims, as TensorFlow's shape function
//! does (`linalg_ops.cc`): explicit (`ij,jk->ik`) and implicit (`ij,jk`: labels used once,
//! sorted) equations, with `...` standing for broadcast leading dims.

use super::super::shape::Shape;
use super::super::tensor::Tensor;
use super::Ctx;

pub(super) fn infer(op: &str, ctx: &Ctx<'_>) -> Option<Vec<Tensor>> {
    if op != "Einsum" {
        return None;
    }
    let shape = ctx
        .attrs
        .string("equation")
        .and_then(|e| output_shape(&e, ctx))
        .unwrap_or(Shape::Unknown);
    Some(vec![Tensor::shaped(shape)])
}

/// The output shape, or None when the equation is malformed or an input's rank is unknown.
fn output_shape(equation: &str, ctx: &Ctx<'_>) -> Option<Shape> {
    let equation: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (inputs, output) = match equation.split_once("->") {
        Some((i, o)) => (i, Some(o.to_string())),
        None => (equation.as_str(), None),
    };
    let inputs: Vec<&str> = inputs.split(',').collect();
    if inputs.len() != ctx.inputs.len() {
        return None;
    }
    let mut dims_of = std::collections::BTreeMap::<char, i64>::new();
    let mut uses = std::collections::BTreeMap::<char, usize>::new();
    let mut ellipsis = Shape::Known(Vec::new());
    for (i, subscripts) in inputs.iter().enumerate() {
        let dims = ctx.shape(i).dims()?;
        let (before, after) = match subscripts.split_once("...") {
            Some((b, a)) => (b, a),
            None => (*subscripts, ""),
        };
        let labels = before.len() + after.len();
        let batch = dims.len().checked_sub(labels)?;
        if batch > 0 && !subscripts.contains("...") {
            return None;
        }
        let before_dims = dims.iter().take(before.len());
        let after_dims = dims.iter().skip(before.len() + batch);
        for (label, &dim) in before
            .chars()
            .zip(before_dims)
            .chain(after.chars().zip(after_dims))
        {
            if !label.is_ascii_alphabetic() {
                return None;
            }
            let known = dims_of.entry(label).or_insert(-1);
            if *known < 0 || *known == 1 {
                *known = dim;
            }
            *uses.entry(label).or_default() += 1;
        }
        let batch_dims = Shape::Known(dims[before.len()..before.len() + batch].to_vec());
        ellipsis = ellipsis.broadcast(&batch_dims);
    }
    let output = output.unwrap_or_else(|| {
        let once: String = uses
            .iter()
            .filter(|(_, &n)| n == 1)
            .map(|(&c, _)| c)
            .collect();
        format!("...{once}")
    });
    let mut out = Vec::new();
    let (before, after) = match output.split_once("...") {
        Some((b, a)) => (b, Some(a)),
        None => (output.as_str(), None),
    };
    for label in before.chars() {
        out.push(*dims_of.get(&label)?);
    }
    if let Some(after) = after {
        out.extend_from_slice(ellipsis.dims()?);
        for label in after.chars() {
            out.push(*dims_of.get(&label)?);
        }
    }
    Some(Shape::known(out))
}

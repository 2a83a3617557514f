//! SignatureDefs and TensorInfos: dtypes and shapes as `saved_model_cli` shows them (dtype
//! names from [`unbound_bundle::dtype`], the one table).

use unbound_bundle::dtype::enum_name;
use unbound_proto::tensorflow::{
    tensor_info::Encoding, SignatureDef, TensorInfo, TensorShapeProto,
};

use super::{SignatureInfo, TensorInfoView};

/// Dimensions of a shape (`-1` unknown), `None` for unknown rank. A missing shape is a
/// scalar, as protobuf's default `TensorShapeProto` is.
pub fn dims(shape: Option<&TensorShapeProto>) -> Option<Vec<i64>> {
    match shape {
        Some(s) if s.unknown_rank => None,
        Some(s) => Some(s.dim.iter().map(|d| d.size).collect()),
        None => Some(Vec::new()),
    }
}

/// `saved_model_cli`'s shape text: `(-1, 3)`, `()` or `unknown_rank`.
pub fn shape_text(shape: &Option<Vec<i64>>) -> String {
    match shape {
        None => "unknown_rank".into(),
        Some(d) => format!(
            "({})",
            d.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// One `TensorInfo`.
pub fn tensor_info(t: &TensorInfo) -> TensorInfoView {
    let mut view = TensorInfoView {
        dtype: enum_name(t.dtype),
        shape: dims(t.tensor_shape.as_ref()),
        name: String::new(),
        encoding: "none".into(),
        coo_sparse: None,
        components: Vec::new(),
    };
    match &t.encoding {
        Some(Encoding::Name(n)) => {
            view.name = n.clone();
            view.encoding = "name".into();
        }
        Some(Encoding::CooSparse(c)) => {
            view.encoding = "coo_sparse".into();
            view.coo_sparse = Some([
                c.values_tensor_name.clone(),
                c.indices_tensor_name.clone(),
                c.dense_shape_tensor_name.clone(),
            ]);
        }
        Some(Encoding::CompositeTensor(c)) => {
            view.encoding = "composite_tensor".into();
            view.components = c.components.iter().map(tensor_info).collect();
        }
        None => {}
    }
    view
}

/// One `SignatureDef`.
pub fn signature_info(s: &SignatureDef) -> SignatureInfo {
    SignatureInfo {
        method_name: s.method_name.clone(),
        inputs: s
            .inputs
            .iter()
            .map(|(k, t)| (k.clone(), tensor_info(t)))
            .collect(),
        outputs: s
            .outputs
            .iter()
            .map(|(k, t)| (k.clone(), tensor_info(t)))
            .collect(),
        defaults: s
            .defaults
            .iter()
            .map(|(k, t)| {
                (
                    k.clone(),
                    TensorInfoView {
                        dtype: enum_name(t.dtype),
                        shape: dims(t.tensor_shape.as_ref()),
                        name: String::new(),
                        encoding: "none".into(),
                        coo_sparse: None,
                        components: Vec::new(),
                    },
                )
            })
            .collect(),
    }
}

//! Makes a model past 2 GiB whose size is constants, for `interop/externalize/huge.sh`: reads
//! a TensorFlow-made SavedModel, gives every rank-1 `float32` constant of 64 or more elements
//! inside a function `ELEMENTS` elements (element `i` is `((i * 2654435761) % 1000003) as
//! f32`), and writes the result to `OUT` (split into `saved_model.cpb` as TensorFlow splits,
//! records uncompressed, or with `--zstd` compressed as `unbound split` compresses; the other
//! files carried over). `--max-size BYTES` splits at that size instead of TensorFlow's 2 GiB,
//! so that a smaller model is a `.cpb` too.
//!
//! usage: cargo run --release -p unbound-externalize --example inflate_consts SRC OUT ELEMENTS [--zstd] [--max-size BYTES]

use std::path::PathBuf;

use bytes::Bytes;
use prost::Message;
use unbound_proto::tensorflow::{attr_value, DataType, SavedModel};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: inflate_consts SRC OUT ELEMENTS [--zstd] [--max-size BYTES]";
    let (mut zstd, mut max_size, mut positional) = (false, None, Vec::new());
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--zstd" => zstd = true,
            "--max-size" => max_size = Some(rest.next().ok_or(usage)?.parse::<u64>()?),
            _ => positional.push(arg),
        }
    }
    let [src, out, elements] = positional.as_slice() else {
        return Err(usage.into());
    };
    let (src, out) = (PathBuf::from(src), PathBuf::from(out));
    let elements: usize = elements.parse()?;
    let model = unbound_savedmodel::SavedModel::open(&src)?;
    let mut saved = SavedModel::decode(model.data()?)?;
    let mut value = Vec::with_capacity(elements * 4);
    for i in 0..elements as u64 {
        value.extend_from_slice(&(((i * 2_654_435_761) % 1_000_003) as f32).to_le_bytes());
    }
    let value = Bytes::from(value);
    let mut inflated = 0;
    for meta in &mut saved.meta_graphs {
        let Some(library) = meta.graph_def.as_mut().and_then(|g| g.library.as_mut()) else {
            continue;
        };
        for f in &mut library.function {
            for node in f.node_def.iter_mut().filter(|n| n.op == "Const") {
                let Some(attr_value::Value::Tensor(t)) =
                    node.attr.get_mut("value").and_then(|v| v.value.as_mut())
                else {
                    continue;
                };
                let dims = t.tensor_shape.as_ref().map(|s| s.dim.len()).unwrap_or(0);
                if t.dtype != DataType::DtFloat as i32 || dims != 1 || t.tensor_content.len() < 256
                {
                    continue;
                }
                t.tensor_shape = Some(unbound_bundle::shape_to_proto(&[elements as i64]));
                t.tensor_content = value.clone();
                node.attr.remove("_output_shapes");
                inflated += 1;
            }
        }
    }
    eprintln!("inflated {inflated} constants to {elements} elements");
    let encoded = Bytes::from(saved.encode_to_vec());
    drop(saved);
    let desc = unbound_savedmodel::dir::saved_model_descriptor()?;
    let wire = unbound_wire::WireMessage::parse(&encoded, Some(desc))?;
    let report = unbound_savedmodel::write::write_model_dir(
        &src,
        &out,
        wire,
        // Records stored uncompressed: the model is written and read back faster (real weights
        // barely compress, and are stored so anyway).
        &max_size
            .map_or_else(unbound_savedmodel::write::WriteOptions::default, |size| {
                unbound_savedmodel::write::WriteOptions::default().with_max_size(size)
            })
            .with_writer(unbound_records::WriterOptions {
                compression: if zstd {
                    unbound_records::Compression::Zstd { level: 3 }
                } else {
                    unbound_records::Compression::None
                },
                ..unbound_records::WriterOptions::default()
            }),
    )?;
    eprintln!(
        "wrote {} ({} bytes of model)",
        report.written.path.display(),
        report.model_bytes
    );
    Ok(())
}

//! A plugin built with the SDK that changes nothing and reports what the host's util functions
//! told it through the SDK's safe API: for each graph, one JSON line appended to the file named
//! by `UNBOUND_SDK_PROBE_DUMP` with the node names, the preserve and fetch lists (sorted), the
//! serialized input and output `TensorProperties` of every node (hex), the serialized `OpDef`
//! of `Add` (hex), and whether `UnboundNoSuchOp` is unknown.
//!
//! `interop/grappler/sdk_probe_check.sh` loads it into TensorFlow 2.21 (a `tensorflow-plugins`
//! directory) and into `unbound optimize`, and compares the lines: the same `.so`, through the
//! SDK's run-time symbol resolution, must hear the same answers from both hosts.
//!
//! ```text
//! cargo build --release -p unbound-grappler-sdk --example sdk_probe
//! ```

use std::fmt::Write as _;
use std::io::Write as _;

use prost::Message;
use unbound_grappler_sdk::{
    export_plugin, Error, GraphDef, Item, Optimizer, Outcome, PropertiesOptions, Result,
    TensorProperties,
};

/// The probe.
pub struct SdkProbe;

impl Optimizer for SdkProbe {
    fn new() -> Self {
        SdkProbe
    }

    fn optimize(&mut self, graph: GraphDef, item: &Item<'_>) -> Result<Outcome> {
        let Some(path) = std::env::var_os("UNBOUND_SDK_PROBE_DUMP") else {
            return Ok(Outcome::Unchanged);
        };
        let line = report(&graph, item)?;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(line.as_bytes()))
            .map_err(|e| Error::internal(format!("sdk_probe: {e}")))?;
        Ok(Outcome::Unchanged)
    }
}

export_plugin!(SdkProbe, device_type = "CPU");

/// One JSON line describing what the item answers for `graph`.
fn report(graph: &GraphDef, item: &Item<'_>) -> Result<String> {
    let mut names: Vec<String> = graph.node.iter().map(|n| n.name.clone()).collect();
    names.sort();
    let mut preserve = item.nodes_to_preserve()?;
    preserve.sort();
    let mut fetch = item.fetch_nodes()?;
    fetch.sort();
    let properties = item.properties(PropertiesOptions::default())?;
    let hexes = |list: Vec<TensorProperties>| -> Vec<String> {
        list.iter().map(|p| hex(&p.encode_to_vec())).collect()
    };
    let mut props = serde_json::Map::new();
    for name in &names {
        let inputs = hexes(properties.input_properties(name)?);
        let outputs = hexes(properties.output_properties(name)?);
        props.insert(
            name.clone(),
            serde_json::json!({ "inputs": inputs, "outputs": outputs }),
        );
    }
    let line = serde_json::json!({
        "nodes": names,
        "preserve": preserve,
        "fetch": fetch,
        "props": props,
        "op_def_add": item.op_def("Add")?.map(|d| hex(&d.encode_to_vec())),
        "missing_op_is_none": item.op_def("UnboundNoSuchOp")?.is_none(),
    });
    Ok(format!("{line}\n"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

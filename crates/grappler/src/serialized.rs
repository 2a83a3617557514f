//! A serialized `GraphDef` read at the wire level: what the host needs to know before it hands
//! the bytes to a plugin (node count, device types, the function library, versions), without
//! decoding a node; and the library spliced back with rewritten functions.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use unbound_graph::device::{parse_full_name, DeviceError};
use unbound_proto::fields::tensorflow::{function_def_library, graph_def, node_def};
use unbound_proto::tensorflow::VersionDef;
use unbound_wire::codec::{put_key, put_varint, read_field, WireType};

use crate::error::GraphFault;

/// What [`scan_graph`] found.
#[derive(Debug)]
pub struct GraphScan {
    /// How many nodes the graph has.
    pub nodes: usize,
    /// The device types its nodes name (see [`unbound_graph::device::graph_device_types`]).
    pub device_types: Result<BTreeSet<String>, DeviceError>,
    /// Its `library`, serialized (all occurrences, which protobuf merges, concatenated).
    pub library: Bytes,
    /// Its `versions`.
    pub versions: Option<VersionDef>,
}

/// Reads `graph` one node at a time: each node's `name` and `device`, the library's bytes and
/// the versions. Errors (with what is wrong) when the bytes are not a GraphDef at this depth.
pub fn scan_graph(graph: &Bytes) -> Result<GraphScan, GraphFault> {
    let mut nodes = 0usize;
    let mut types = BTreeSet::new();
    let mut device_error = None;
    let mut last_device: &[u8] = b"";
    let mut libraries: Vec<Bytes> = Vec::new();
    // Every occurrence of `versions`, merged as protobuf merges them: concatenated.
    let mut versions_bytes: Option<Vec<u8>> = None;
    let mut pos = 0;
    while pos < graph.len() {
        let field = read_field(graph, &mut pos).map_err(GraphFault::Malformed)?;
        let value = &graph[field.start..field.end];
        match (field.number, field.wire_type) {
            (graph_def::NODE, WireType::Len) => {
                nodes += 1;
                let (name, device) = node_name_and_device(value)?;
                // Millions of nodes share a handful of device strings: parse each run once.
                if device_error.is_some() || (nodes > 1 && device == last_device) {
                    continue;
                }
                last_device = device;
                let device = utf8(device, "NodeDef.device")?;
                match parse_full_name(device) {
                    Some(parsed) => {
                        if let Some(t) = parsed.device_type.filter(|t| !t.is_empty()) {
                            types.insert(t);
                        }
                    }
                    None => {
                        device_error = Some(DeviceError::Node {
                            node: utf8(name, "NodeDef.name")?.to_string(),
                            device: device.to_string(),
                        })
                    }
                }
            }
            (graph_def::LIBRARY, WireType::Len) => {
                libraries.push(graph.slice(field.start..field.end))
            }
            (graph_def::VERSIONS, WireType::Len) => versions_bytes
                .get_or_insert_with(Vec::new)
                .extend_from_slice(value),
            // A known number of another wire type is an unknown field to protobuf C++,
            // which TensorFlow parses graphs with: skipped, as every unknown field is.
            _ => {}
        }
    }
    let versions = match versions_bytes {
        Some(bytes) => Some(
            unbound_wire::decode_lenient::<VersionDef>(bytes, unbound_proto::descriptor_pool())
                .map_err(GraphFault::Versions)?,
        ),
        None => None,
    };
    let library = match libraries.len() {
        0 => Bytes::new(),
        1 => libraries.pop().unwrap_or_default(),
        _ => Bytes::from(libraries.concat()),
    };
    Ok(GraphScan {
        nodes,
        device_types: match device_error {
            Some(e) => Err(e),
            None => Ok(types),
        },
        library,
        versions,
    })
}

/// The last `name` and `device` of a serialized NodeDef (the ones a parser keeps).
fn node_name_and_device(node: &[u8]) -> Result<(&[u8], &[u8]), GraphFault> {
    let (mut name, mut device): (&[u8], &[u8]) = (b"", b"");
    let mut pos = 0;
    while pos < node.len() {
        let field = read_field(node, &mut pos).map_err(GraphFault::MalformedNode)?;
        match (field.number, field.wire_type) {
            (node_def::NAME, WireType::Len) => name = &node[field.start..field.end],
            (node_def::DEVICE, WireType::Len) => device = &node[field.start..field.end],
            _ => {}
        }
    }
    Ok((name, device))
}

/// `bytes` as text, or the fault naming `field`.
fn utf8<'a>(bytes: &'a [u8], field: &'static str) -> Result<&'a str, GraphFault> {
    std::str::from_utf8(bytes).map_err(|_| GraphFault::NotUtf8 { field })
}

/// `graph` with the functions at the given library positions (in library order, counting
/// across `library` occurrences) replaced by the serialized `FunctionDef`s given. The library
/// is written as one field where its first occurrence was; everything else is copied as it
/// was.
pub fn splice_library(
    graph: &[u8],
    replacements: &BTreeMap<usize, Vec<u8>>,
) -> Result<Vec<u8>, GraphFault> {
    let mut out = Vec::with_capacity(graph.len());
    let mut library = Vec::new();
    let mut library_at = None;
    let mut function = 0usize;
    let mut pos = 0;
    while pos < graph.len() {
        let start = pos;
        let field = read_field(graph, &mut pos).map_err(GraphFault::Malformed)?;
        if field.number != graph_def::LIBRARY || field.wire_type != WireType::Len {
            out.extend_from_slice(&graph[start..pos]);
            continue;
        }
        library_at.get_or_insert(out.len());
        let value = &graph[field.start..field.end];
        let mut inner = 0;
        while inner < value.len() {
            let entry_start = inner;
            let entry = read_field(value, &mut inner).map_err(GraphFault::Malformed)?;
            let is_function =
                entry.number == function_def_library::FUNCTION && entry.wire_type == WireType::Len;
            match replacements.get(&function).filter(|_| is_function) {
                Some(new) => {
                    put_key(function_def_library::FUNCTION, WireType::Len, &mut library);
                    put_varint(new.len() as u64, &mut library);
                    library.extend_from_slice(new);
                }
                None => library.extend_from_slice(&value[entry_start..inner]),
            }
            function += usize::from(is_function);
        }
    }
    if let Some(at) = library_at {
        let mut head = Vec::with_capacity(16);
        put_key(graph_def::LIBRARY, WireType::Len, &mut head);
        put_varint(library.len() as u64, &mut head);
        out.splice(at..at, head.into_iter().chain(library));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use unbound_proto::tensorflow::{FunctionDef, FunctionDefLibrary, GraphDef, NodeDef, OpDef};

    fn function(name: &str) -> FunctionDef {
        FunctionDef {
            signature: Some(OpDef {
                name: name.into(),
                ..OpDef::default()
            }),
            ..FunctionDef::default()
        }
    }

    fn graph() -> GraphDef {
        let node = |name: &str, device: &str| NodeDef {
            name: name.into(),
            op: "NoOp".into(),
            device: device.into(),
            ..NodeDef::default()
        };
        GraphDef {
            node: vec![
                node("a", "/device:CPU:0"),
                node("b", "/device:CPU:0"),
                node("c", ""),
                node("d", "/job:w/device:GPU:1"),
            ],
            library: Some(FunctionDefLibrary {
                function: vec![function("f"), function("g")],
                ..FunctionDefLibrary::default()
            }),
            versions: Some(VersionDef {
                producer: 7,
                ..VersionDef::default()
            }),
            ..GraphDef::default()
        }
    }

    #[test]
    fn the_scan_finds_nodes_devices_library_and_versions() {
        let g = graph();
        let bytes = Bytes::from(g.encode_to_vec());
        let scan = scan_graph(&bytes).unwrap();
        assert_eq!(scan.nodes, 4);
        assert_eq!(
            scan.device_types.unwrap(),
            unbound_graph::device::graph_device_types(&g).unwrap()
        );
        assert_eq!(
            FunctionDefLibrary::decode(scan.library).unwrap(),
            g.library.unwrap()
        );
        assert_eq!(scan.versions.unwrap().producer, 7);

        let mut bad = graph();
        bad.node[2].device = "CPU:0".into();
        let scan = scan_graph(&Bytes::from(bad.encode_to_vec())).unwrap();
        assert_eq!(
            scan.device_types.unwrap_err(),
            unbound_graph::device::graph_device_types(&bad).unwrap_err()
        );
        let bytes = Bytes::from(graph().encode_to_vec());
        assert!(scan_graph(&bytes.slice(..bytes.len() - 1)).is_err());
        assert!(scan_graph(&Bytes::from_static(&[0x0a, 0x02, 0xff, 0xff])).is_err());
    }

    #[test]
    fn splicing_replaces_only_the_named_functions() {
        let g = graph();
        let bytes = g.encode_to_vec();
        assert_eq!(splice_library(&bytes, &BTreeMap::new()).unwrap(), bytes);
        let mut h = function("h");
        h.attr.insert("x".into(), Default::default());
        let replacements = BTreeMap::from([(1, h.encode_to_vec())]);
        let spliced = splice_library(&bytes, &replacements).unwrap();
        let mut expected = g.clone();
        expected.library.as_mut().unwrap().function[1] = h;
        assert_eq!(spliced, expected.encode_to_vec());
    }
}

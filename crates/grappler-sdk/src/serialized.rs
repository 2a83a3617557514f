//! Looking at a serialized `GraphDef` without decoding it: an optimizer that has nothing to do
//! on most graphs can tell so from the bytes ([`node_ops`]) and return
//! [`crate::Outcome::Unchanged`] without building a million-node [`crate::GraphDef`].

use prost::encoding::{decode_varint, WireType};

use crate::error::{Error, Result};

/// Decodes the serialized GraphDef `graph` (bad bytes: `INVALID_ARGUMENT`), as the default
/// [`crate::Optimizer::optimize_serialized`] does.
pub fn decode(graph: &[u8]) -> Result<crate::GraphDef> {
    use prost::Message;
    crate::GraphDef::decode(graph)
        .map_err(|e| Error::invalid_argument(format!("the input is not a GraphDef: {e}")))
}

/// `GraphDef.node`.
const GRAPH_NODE: u64 = 1;
/// `NodeDef.op`.
const NODE_OP: u64 = 2;

/// The `op` of each node of the serialized GraphDef `graph`, in order, read field by field
/// (nothing is decoded or allocated). A node with several `op` fields yields the last, as a
/// parser keeps it. Yields an `INVALID_ARGUMENT` error, then stops, where the bytes are not a
/// GraphDef at this depth.
pub fn node_ops(graph: &[u8]) -> NodeOps<'_> {
    NodeOps { rest: graph }
}

/// The iterator [`node_ops`] returns.
#[derive(Debug, Clone)]
pub struct NodeOps<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for NodeOps<'a> {
    type Item = Result<&'a str>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.rest.is_empty() {
            let field = match next_field(&mut self.rest) {
                Ok(f) => f,
                Err(e) => {
                    self.rest = &[];
                    return Some(Err(e));
                }
            };
            if let (GRAPH_NODE, Some(node)) = field {
                return Some(last_op(node).inspect_err(|_| self.rest = &[]));
            }
        }
        None
    }
}

/// The last `op` of a serialized NodeDef ("" when it has none).
fn last_op(mut node: &[u8]) -> Result<&str> {
    let mut op: &[u8] = b"";
    while !node.is_empty() {
        if let (NODE_OP, Some(value)) = next_field(&mut node)? {
            op = value;
        }
    }
    std::str::from_utf8(op).map_err(|_| bad("a NodeDef's op is not UTF-8"))
}

fn bad(what: &str) -> Error {
    Error::invalid_argument(format!("the input is not a GraphDef: {what}"))
}

/// Reads one field from `buf`: its number and, when length-delimited, its value.
fn next_field<'a>(buf: &mut &'a [u8]) -> Result<(u64, Option<&'a [u8]>)> {
    let key = decode_varint(buf).map_err(|_| bad("a truncated key"))?;
    let number = key >> 3;
    let wire_type = WireType::try_from(key & 7).map_err(|_| bad("an unknown wire type"))?;
    if number == 0 {
        return Err(bad("field number 0"));
    }
    let skip = |buf: &mut &'a [u8], n: u64| -> Result<&'a [u8]> {
        let n = usize::try_from(n).ok().filter(|&n| n <= buf.len());
        let n = n.ok_or_else(|| bad("a value past the end"))?;
        let (value, rest) = buf.split_at(n);
        *buf = rest;
        Ok(value)
    };
    match wire_type {
        WireType::Varint => {
            decode_varint(buf).map_err(|_| bad("a truncated varint"))?;
            Ok((number, None))
        }
        WireType::SixtyFourBit => skip(buf, 8).map(|_| (number, None)),
        WireType::ThirtyTwoBit => skip(buf, 4).map(|_| (number, None)),
        WireType::LengthDelimited => {
            let len = decode_varint(buf).map_err(|_| bad("a truncated length"))?;
            skip(buf, len).map(|v| (number, Some(v)))
        }
        WireType::StartGroup | WireType::EndGroup => Err(bad("a group")),
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;
    use unbound_proto::tensorflow::{GraphDef, NodeDef};

    use super::*;

    #[test]
    fn ops_are_read_from_the_bytes() {
        let node = |name: &str, op: &str| NodeDef {
            name: name.into(),
            op: op.into(),
            input: vec!["x".into()],
            device: "/device:CPU:0".into(),
            ..NodeDef::default()
        };
        let graph = GraphDef {
            node: vec![node("a", "Const"), node("b", "Identity"), node("c", "")],
            versions: Some(Default::default()),
            ..GraphDef::default()
        };
        let bytes = graph.encode_to_vec();
        let ops: Vec<&str> = node_ops(&bytes).collect::<Result<_>>().unwrap();
        assert_eq!(ops, ["Const", "Identity", ""]);
        assert_eq!(node_ops(&[]).count(), 0);
        let cut: Vec<_> = node_ops(&bytes[..bytes.len() - 3]).collect();
        assert!(cut.last().unwrap().is_err());
        assert!(node_ops(&[0x0a, 0x05, 0x12]).next().unwrap().is_err());
    }
}

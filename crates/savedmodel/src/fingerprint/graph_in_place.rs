//! `graph_def_program_hash` of a graph whose serialized bytes are already canonical, hashed
//! where they lie: runs of nodes `SimpleDelete` leaves alone are fed to the hash as they are,
//! one slice per run, and only the nodes it edits are built and encoded.
//!
//! The general path ([`super::regularize::simple_delete`], then the [`Encoder`]) lists every
//! node as a field of a message before hashing it; on a graph of millions of nodes that list,
//! and the shared buffers each entry holds, were a quarter of a `verify` (issue 15).
//!
//! It applies when the graph is one slice that [`Encoder::is_canonical`] vouched for (as part
//! of the whole model) and is laid out as canonical graphs are: its `node` fields first, then
//! at most `library`, `version` and `versions`, in that order. The regularized graph's
//! deterministic serialization is then:
//!
//! ```text
//! node* (edited ones re-encoded)   12 00 (library, cleared)   version?   22 00 (versions, cleared)   unknown*
//! ```
//!
//! Unknown fields (numbers `GraphDef` does not have: other writers' additions) come last in
//! a canonical graph, and stay last, as read. Anything else (a known field after an unknown
//! one, a known number of another wire type, a field of a newer `GraphDef` such as
//! `debug_info`, a graph in several occurrences) takes the general path.

use std::sync::atomic::{AtomicBool, Ordering};

use unbound_proto::fields::tensorflow::{graph_def, node_def};
use unbound_wire::codec::{put_key, put_varint, read_field, WireType};
use unbound_wire::{Payload, WireValue};

use super::canonical::{Encoder, Source};
use super::farmhash::Fingerprint64;
use super::hashes::descriptor;
use super::regularize::{regularize_node, REGULARIZED_OPS};
use super::{model_fault, Result};

/// `library` and `versions` as `SimpleDelete` leaves them: present and empty.
const CLEARED_LIBRARY: [u8; 2] = [(graph_def::LIBRARY << 3 | 2) as u8, 0];
const CLEARED_VERSIONS: [u8; 2] = [(graph_def::VERSIONS << 3 | 2) as u8, 0];

/// The program hash of the graph made of `graph`, when it is one canonical slice laid out as
/// the module describes; `None` when it must take the general path. `graph` must be a part of
/// a model [`Encoder::is_canonical`] accepted.
pub fn canonical_graph_hash(graph: &[Source<'_>]) -> Result<Option<u64>> {
    canonical_graph_hash_unless(graph, &AtomicBool::new(false))
}

/// [`canonical_graph_hash`], given up (`None`) once `stop` is set: the hash made on a second
/// thread while the whole model is checked is of no use once the check found the model not
/// canonical.
pub fn canonical_graph_hash_unless(graph: &[Source<'_>], stop: &AtomicBool) -> Result<Option<u64>> {
    let mut hash = Fingerprint64::new();
    let walked = canonical_graph_walk(graph, stop, &mut |bytes| hash.update(bytes))?;
    Ok(walked.map(|()| hash.finish()))
}

/// What [`canonical_graph_hash`] would refuse (a call node without its function, a constant
/// without its dtype), refused the same way, without hashing: `Some(())` when the graph is
/// one canonical slice that regularizes, `None` when it must take the general path.
pub fn canonical_graph_check(graph: &[Source<'_>]) -> Result<Option<()>> {
    canonical_graph_walk(graph, &AtomicBool::new(false), &mut |_| {})
}

/// The bytes of the regularized graph's deterministic serialization, in order, handed to
/// `feed` (see [`canonical_graph_hash`]).
fn canonical_graph_walk(
    graph: &[Source<'_>],
    stop: &AtomicBool,
    feed: &mut dyn FnMut(&[u8]),
) -> Result<Option<()>> {
    let (buf, start, end) = match graph {
        [Source::Slice(buf, start, end)] => (*buf, *start, *end),
        [Source::Raw(buf)] => (buf, 0, buf.len()),
        _ => return Ok(None),
    };
    let within = &buf[..end];
    let mut node_desc = None;
    // Nodes from `run_start` on are hashed as they lie, once the run ends.
    let mut run_start = start;
    let mut pos = start;
    let mut version: Option<(usize, usize)> = None;
    let mut last_tail_number = 0;
    // Where the unknown fields begin, once one is met: every field from there is unknown.
    let mut unknown_from: Option<usize> = None;
    // Whether `GraphDef` has a field numbered so (its descriptor looked up once, when first
    // asked: most graphs end with their known fields).
    let mut graph_desc = None;
    let mut graph_has = |number: u32| -> Result<bool> {
        let desc = match &graph_desc {
            Some(desc) => desc,
            None => graph_desc.insert(descriptor("tensorflow.GraphDef")?),
        };
        Ok(desc.get_field(number).is_some())
    };
    let mut fields = 0u32;
    while pos < end {
        fields = fields.wrapping_add(1);
        if fields % 4096 == 0 && stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let field_start = pos;
        let raw = read_field(within, &mut pos).map_err(|e| model_fault(e.to_string()))?;
        let is_len = raw.wire_type == WireType::Len;
        if unknown_from.is_some() {
            if graph_has(raw.number)? {
                return Ok(None);
            }
            continue;
        }
        if raw.number == graph_def::NODE && is_len && last_tail_number == 0 {
            if !may_be_regularized(&buf[raw.start..raw.end])? {
                continue;
            }
            let value = WireValue::Bytes(Payload::Inline(buf.slice(raw.start..raw.end)));
            let Some(node) = regularize_node(&value)? else {
                continue;
            };
            feed(&buf[run_start..field_start]);
            run_start = pos;
            let desc = match &node_desc {
                Some(desc) => desc,
                None => node_desc.insert(descriptor("tensorflow.NodeDef")?),
            };
            let encoded = Encoder::new().encode(&[Source::Ref(&node)], desc)?;
            let mut head = Vec::with_capacity(11);
            put_key(graph_def::NODE, WireType::Len, &mut head);
            put_varint(encoded.len(), &mut head);
            feed(&head);
            encoded.for_each(|piece| feed(piece))?;
            continue;
        }
        // The tail: `library`, `version`, `versions`, each at most once and in that order.
        let expected = match raw.number {
            graph_def::LIBRARY | graph_def::VERSIONS => is_len,
            graph_def::VERSION => raw.wire_type == WireType::Varint,
            _ => false,
        };
        if !expected {
            if graph_has(raw.number)? {
                return Ok(None);
            }
            if last_tail_number == 0 {
                feed(&buf[run_start..field_start]);
            }
            unknown_from = Some(field_start);
            continue;
        }
        if raw.number <= last_tail_number {
            return Ok(None);
        }
        if last_tail_number == 0 {
            feed(&buf[run_start..field_start]);
        }
        last_tail_number = raw.number;
        if raw.number == graph_def::VERSION {
            version = Some((field_start, pos));
        }
    }
    if last_tail_number == 0 && unknown_from.is_none() {
        feed(&buf[run_start..end]);
    }
    feed(&CLEARED_LIBRARY);
    if let Some((from, to)) = version {
        feed(&buf[from..to]);
    }
    feed(&CLEARED_VERSIONS);
    if let Some(from) = unknown_from {
        feed(&buf[from..end]);
    }
    Ok(Some(()))
}

/// Whether the canonical node `node` may be one `SimpleDelete` edits: its `op` (a canonical
/// node holds it at most once, right after the `name`) is one of [`REGULARIZED_OPS`].
fn may_be_regularized(node: &[u8]) -> Result<bool> {
    let mut pos = 0;
    while pos < node.len() {
        let raw = read_field(node, &mut pos).map_err(|e| model_fault(e.to_string()))?;
        if raw.number > node_def::OP {
            return Ok(false);
        }
        if raw.number == node_def::OP && raw.wire_type == WireType::Len {
            return Ok(REGULARIZED_OPS.contains(&&node[raw.start..raw.end]));
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::hashes::{hash_message, merged};
    use crate::fingerprint::regularize::simple_delete;
    use bytes::Bytes;

    /// A message under construction.
    #[derive(Default, Clone)]
    struct W(Vec<u8>);

    impl W {
        fn int(mut self, number: u32, value: u64) -> Self {
            put_key(number, WireType::Varint, &mut self.0);
            put_varint(value, &mut self.0);
            self
        }
        fn bytes(mut self, number: u32, value: &[u8]) -> Self {
            put_key(number, WireType::Len, &mut self.0);
            put_varint(value.len() as u64, &mut self.0);
            self.0.extend_from_slice(value);
            self
        }
        fn msg(self, number: u32, value: W) -> Self {
            self.bytes(number, &value.0)
        }
    }

    fn w() -> W {
        W::default()
    }

    fn node(name: &str, op: &str, attrs: &[(&str, W)]) -> W {
        let mut n = w().bytes(1, name.as_bytes()).bytes(2, op.as_bytes());
        for (key, value) in attrs {
            n = n.msg(5, w().bytes(1, key.as_bytes()).msg(2, value.clone()));
        }
        n
    }

    fn func(name: &str) -> W {
        w().msg(10, w().bytes(1, name.as_bytes()))
    }

    /// Nodes `SimpleDelete` edits and nodes it leaves, between plain ones.
    fn nodes() -> Vec<W> {
        let plain = |i: usize| node(&format!("n{i}"), "AddV2", &[("T", w().int(6, 1))]);
        vec![
            plain(0),
            node(
                "call",
                "StatefulPartitionedCall",
                &[
                    ("config_proto", w().bytes(2, b"device config")),
                    ("f", func("__inference_call_42")),
                ],
            ),
            plain(1),
            plain(2),
            node("pcall", "PartitionedCall", &[("f", func("no_uid"))]),
            node(
                "str",
                "Const",
                &[
                    ("dtype", w().int(6, 7)),
                    ("value", w().msg(8, w().int(1, 7).bytes(8, b"platform"))),
                ],
            ),
            node("float", "Const", &[("dtype", w().int(6, 1))]),
            plain(3),
        ]
    }

    /// The general path's hash of `graph`: `SimpleDelete` on the listed fields, then the
    /// encoder.
    fn general(graph: &Bytes) -> u64 {
        let desc = descriptor("tensorflow.GraphDef").unwrap();
        let mut message = merged(&[Source::Raw(graph.clone())], &desc).unwrap();
        simple_delete(&mut message).unwrap();
        hash_message(&mut Encoder::new(), &[Source::Ref(&message)], &desc).unwrap()
    }

    /// `graph` in canonical form.
    fn canonical(graph: W) -> Bytes {
        let desc = descriptor("tensorflow.GraphDef").unwrap();
        let rope = Encoder::new()
            .encode(&[Source::Raw(Bytes::from(graph.0))], &desc)
            .unwrap();
        Bytes::from(rope.to_vec().unwrap())
    }

    #[test]
    fn hashing_in_place_equals_the_general_path_on_canonical_graphs() {
        let library = w().msg(1, w().msg(1, w().bytes(1, b"lib_fn_1")));
        let versions = w().int(1, 1700);
        let tails: Vec<(&str, W)> = vec![
            ("nothing", w()),
            ("library", w().msg(2, library.clone())),
            ("version", w().int(3, 21)),
            ("versions", w().msg(4, versions.clone())),
            (
                "all three",
                w().msg(2, library.clone())
                    .int(3, 21)
                    .msg(4, versions.clone()),
            ),
            ("unknown fields", w().int(9, 1).bytes(1000, b"other writer")),
            (
                "all three, then unknown fields",
                w().msg(2, library)
                    .int(3, 21)
                    .msg(4, versions)
                    .bytes(77, b"x")
                    .int(9, 1),
            ),
        ];
        for (what, tail) in tails {
            for count in [0, 1, nodes().len()] {
                let mut graph = w();
                for n in nodes().into_iter().take(count) {
                    graph = graph.msg(1, n);
                }
                graph.0.extend_from_slice(&tail.0);
                let graph = canonical(graph);
                let fast = canonical_graph_hash(&[Source::Raw(graph.clone())])
                    .unwrap()
                    .unwrap_or_else(|| panic!("{what}, {count} nodes: not hashed in place"));
                assert_eq!(fast, general(&graph), "{what}, {count} nodes");
            }
        }
    }

    #[test]
    fn graphs_laid_out_otherwise_take_the_general_path() {
        let node = || w().msg(1, node("n", "AddV2", &[]));
        let cases = [
            (
                "a node after an unknown field",
                node().int(9, 1).msg(1, node()),
            ),
            (
                "versions after an unknown field",
                node().int(9, 1).msg(4, w()),
            ),
            ("a node number of another wire type", node().int(1, 5)),
            ("a node after the library", w().msg(2, w()).msg(1, node())),
            ("versions before the library", w().msg(4, w()).msg(2, w())),
            ("the library twice", w().msg(2, w()).msg(2, w())),
            ("a node that is a varint", w().int(1, 5)),
        ];
        for (what, graph) in cases {
            let graph = Bytes::from(graph.0);
            assert_eq!(
                canonical_graph_hash(&[Source::Raw(graph)]).unwrap(),
                None,
                "{what}"
            );
        }
        let graph = canonical(node());
        let two = [Source::Raw(graph.clone()), Source::Raw(graph)];
        assert_eq!(canonical_graph_hash(&two).unwrap(), None, "two occurrences");
    }
}

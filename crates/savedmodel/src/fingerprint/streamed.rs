//! The hashes of a serialized model that is not in canonical form, by the streaming encoder of
//! `unbound_canonical`: its bytes are read where they lie and the canonical form hashed as it
//! is written, with no message built (issue 29: the general path, which lists every field of
//! every message, made a non-canonical model ten times slower to fingerprint than a canonical
//! one).

use std::sync::OnceLock;

use bytes::Bytes;
use unbound_canonical::{CanonicalError, Schema};
use unbound_proto::fields::tensorflow::graph_def;
use unbound_wire::codec::{put_key, put_varint, read_field, WireType};
use unbound_wire::{Payload, WireValue};

use super::canonical::Source;
use super::hashes::descriptor;
use super::regularize::regularize_node;
use super::{model_fault, Result};
use crate::SavedModelError;

/// `library` and `versions` as `SimpleDelete` leaves them: present and empty.
const CLEARED: [u8; 4] = [
    (graph_def::LIBRARY << 3 | 2) as u8,
    0,
    (graph_def::VERSIONS << 3 | 2) as u8,
    0,
];

/// The compiled schema of `tensorflow.SavedModel` (and every type it reaches), built once.
fn schema() -> Result<&'static Schema> {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    if let Some(schema) = SCHEMA.get() {
        return Ok(schema);
    }
    let desc = descriptor("tensorflow.SavedModel")?;
    Ok(SCHEMA.get_or_init(|| Schema::new(&desc)))
}

/// The error of a fault the encoder found, named as the general path names it.
fn encoding_error(error: CanonicalError) -> SavedModelError {
    match error {
        CanonicalError::Malformed { type_name, error } => {
            SavedModelError::malformed(format!("{type_name} being fingerprinted"), error)
        }
        CanonicalError::TooDeep { type_name, limit } => SavedModelError::TooDeep {
            source_name: format!("{type_name} being fingerprinted"),
            limit,
        },
    }
}

/// FarmHash `Fingerprint64` of the deterministic serialization of the `SavedModel` serialized
/// in `bytes` (`saved_model_checksum`).
pub fn model_hash(bytes: &[u8]) -> Result<u64> {
    let schema = schema()?;
    unbound_canonical::fingerprint64(schema, schema.root(), &[bytes]).map_err(encoding_error)
}

/// `graph_def_program_hash` of the graph made of `graph` (the occurrences of `graph_def` in
/// the first meta graph), `SimpleDelete` applied: the graph's fields are taken where they lie
/// but for `library` and `versions` (cleared: written empty at the end, which the encoder
/// puts in their place) and the nodes `SimpleDelete` edits (built, written out and taken from
/// there). `None` when a part of the graph is not a slice of a buffer (a built message: the
/// general path).
pub fn graph_program_hash(graph: &[Source<'_>]) -> Result<Option<u64>> {
    let schema = schema()?;
    let ty = schema
        .type_id("tensorflow.GraphDef")
        .ok_or_else(|| model_fault("the schema has no tensorflow.GraphDef"))?;
    // Where each part of the regularized graph lies: a run of the input's fields, or an
    // edited node written into `edited`.
    enum Piece {
        Input(usize, usize, usize),
        Edited(usize, usize),
    }
    let mut pieces = Vec::new();
    let mut edited = Vec::new();
    let mut buffers: Vec<&Bytes> = Vec::new();
    for source in graph {
        let (buf, start, end) = match source {
            Source::Slice(buf, start, end) => (*buf, *start, *end),
            Source::Raw(buf) => (buf, 0, buf.len()),
            _ => return Ok(None),
        };
        let b = buffers.len();
        buffers.push(buf);
        let within = &buf[..end];
        let mut run_start = start;
        let mut pos = start;
        while pos < end {
            let field_start = pos;
            let raw = read_field(within, &mut pos).map_err(|e| model_fault(e.to_string()))?;
            if raw.wire_type != WireType::Len {
                continue;
            }
            let replacement = match raw.number {
                graph_def::LIBRARY | graph_def::VERSIONS => None,
                graph_def::NODE => {
                    let value = WireValue::Bytes(Payload::Inline(buf.slice(raw.start..raw.end)));
                    match regularize_node(&value)? {
                        Some(node) => Some(node.to_vec().map_err(|e| model_fault(e.to_string()))?),
                        None => continue,
                    }
                }
                _ => continue,
            };
            pieces.push(Piece::Input(b, run_start, field_start));
            run_start = pos;
            if let Some(node) = replacement {
                let at = edited.len();
                put_key(graph_def::NODE, WireType::Len, &mut edited);
                put_varint(node.len() as u64, &mut edited);
                edited.extend_from_slice(&node);
                pieces.push(Piece::Edited(at, edited.len()));
            }
        }
        pieces.push(Piece::Input(b, run_start, end));
    }
    let mut parts: Vec<&[u8]> = pieces
        .iter()
        .map(|piece| match *piece {
            Piece::Input(b, from, to) => &buffers[b][from..to],
            Piece::Edited(from, to) => &edited[from..to],
        })
        .filter(|part| !part.is_empty())
        .collect();
    parts.push(&CLEARED);
    unbound_canonical::fingerprint64(schema, ty, &parts)
        .map(Some)
        .map_err(encoding_error)
}

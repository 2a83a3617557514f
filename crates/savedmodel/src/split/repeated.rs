//! `RepeatedMessageSplitter`: walks a repeated message field, lets element splitters chunk
//! parts of each element, and moves runs of elements into new chunks of the parent's type when
//! the running size reaches the maximum.

use prost_reflect::MessageDescriptor;
use unbound_chunked::{Chunk, PathElem, Scope};

use crate::Result;
use unbound_wire::{WireField, WireMessage};

use super::SplitContext;

/// A splitter for one element: gets the element, its current size and a scope at the element;
/// returns the bytes it moved out. Every splitter leaves an element of at most a third of the
/// maximum alone (TensorFlow's smallest threshold, `_GREEDY_SPLIT`, see
/// [`SplitContext::is_large`]), so [`split_repeated`] neither decodes such an element nor calls
/// them on it: on a graph of millions of small nodes, decoding each one was a third of a split
/// (issue 15).
pub type ElementSplitter =
    fn(&mut WireMessage, &MessageDescriptor, i64, &mut Scope<'_>, &mut SplitContext) -> Result<i64>;

/// Splits repeated field `field_name` of `parent` (of type `parent_desc`). `scope` is at
/// `parent`. Returns the size difference, with TensorFlow's quirk of also counting each
/// finished run's size.
pub fn split_repeated(
    parent: &mut WireMessage,
    parent_desc: &MessageDescriptor,
    field_name: &str,
    element_splitters: &[ElementSplitter],
    scope: &mut Scope<'_>,
    ctx: &mut SplitContext,
) -> Result<i64> {
    let fd = super::field(parent_desc, field_name)?;
    let elem_desc = unbound_wire::navigate::message_type(&fd)?;
    let max = ctx.max_size as i64;
    let positions = parent.message_positions(fd.number());
    let mut total_size_diff: i64 = 0;
    let mut total_size: i64 = 0;
    let mut splits: Vec<usize> = Vec::new();
    let mut handles = Vec::new();

    for (n, &pos) in positions.iter().enumerate() {
        let mut size = element_len(&parent.fields[pos]);
        if !element_splitters.is_empty() && ctx.is_large(size.max(0) as u64) {
            let element = parent.expand_at(pos, &elem_desc)?;
            for splitter in element_splitters {
                let mut child =
                    scope.child(&[PathElem::from(field_name), PathElem::Index(n as u64)]);
                let diff = splitter(element, &elem_desc, size, &mut child, ctx)?;
                total_size_diff += diff;
                size -= diff;
            }
        }
        if total_size + size >= max {
            splits.push(n);
            // The chunk is placed now (so it interleaves with element chunks in chunk order, as
            // TensorFlow does) and filled once the run is known.
            handles.push(scope.add_chunk(Chunk::Message(WireMessage::default()), &[], None)?);
            total_size_diff += total_size;
            total_size = 0;
        }
        total_size += size;
    }

    if let Some(&first_split) = splits.first() {
        let mut moved: Vec<Vec<WireField>> = vec![Vec::new(); splits.len()];
        let mut rank = 0usize;
        let mut run = 0usize;
        let mut kept = Vec::with_capacity(parent.fields.len());
        for f in std::mem::take(&mut parent.fields) {
            if f.number != fd.number() {
                kept.push(f);
                continue;
            }
            if rank < first_split {
                kept.push(f);
            } else {
                while run + 1 < splits.len() && rank >= splits[run + 1] {
                    run += 1;
                }
                moved[run].push(f);
            }
            rank += 1;
        }
        parent.fields = kept;
        for (handle, fields) in handles.into_iter().zip(moved) {
            let mut msg = WireMessage::new(Some(parent_desc.clone()));
            msg.fields = fields;
            scope.set_chunk(handle, Chunk::Message(msg));
        }
    }
    Ok(total_size_diff)
}

/// The size of the element a field occurrence holds, without its key and length prefix (for a
/// scalar, the whole occurrence): what TensorFlow counts per element. Read off the payload
/// rather than as the field's size minus its framing, which computed the field's size twice
/// per node.
fn element_len(field: &WireField) -> i64 {
    match &field.value {
        unbound_wire::WireValue::Bytes(p) => p.len() as i64,
        unbound_wire::WireValue::Message(m) => m.encoded_len() as i64,
        _ => field.encoded_len() as i64,
    }
}

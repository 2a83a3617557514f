//! The chunks a merge will stream, streamed ahead of it on a second core.
//!
//! A merge walks its metadata in order and streams each chunk too large to keep decoded as
//! it reaches it ([`crate::FileChunks::streams_chunk_at`]): of a `.cpb` of gigabytes of
//! compressed constants, one core decompresses while the other waits, and that one
//! decompression is the time of `verify` and of every writer (which verifies first).
//! [`crate::FileChunks::stream_ahead`] resolves the message type of each such chunk from
//! the metadata tree first ([`message_types`]: the merge's own walk, reading nothing), and a
//! helper thread streams them from the last one backwards while the merge goes forward. The
//! merge takes what the helper streamed, waits for the chunk the helper is streaming, and
//! streams the rest itself; a chunk the merge asks for as another type than the one
//! resolved is streamed again as asked. A stream's result is the same whichever thread made
//! it (the same bytes of the same record, parsed as the same type), and so are its faults.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use prost_reflect::{Kind, MessageDescriptor};
use unbound_proto::tensorflow::proto_splitter::ChunkedMessage;
use unbound_wire::WireMessage;

use crate::error::Result;
use crate::layout::MAX_NESTING;
use crate::tags::{sort_for_merge, steps};

/// The message type of each chunk a merge of `metadata` into a message of type `root`
/// merges as a message, in the merge's order (a chunk may come more than once). Fields whose
/// tags do not resolve are passed over: the merge reports them.
pub(crate) fn message_types(
    root: &MessageDescriptor,
    metadata: &ChunkedMessage,
) -> Vec<(u64, MessageDescriptor)> {
    let mut out = Vec::new();
    walk(root, metadata, 0, &mut out);
    out
}

/// [`message_types`] of the message `cm` describes, of type `desc`.
fn walk(
    desc: &MessageDescriptor,
    cm: &ChunkedMessage,
    depth: usize,
    out: &mut Vec<(u64, MessageDescriptor)>,
) {
    if depth > MAX_NESTING {
        return;
    }
    if let Some(index) = cm.chunk_index {
        out.push((index, desc.clone()));
    }
    let Ok(ordered) = sort_for_merge(&cm.chunked_fields) else {
        return;
    };
    let empty = ChunkedMessage::default();
    for cf in ordered {
        let child = cf.message.as_ref().unwrap_or(&empty);
        if cf.field_tag.is_empty() {
            // Merged into the message itself, as the merge does (chunk 0 without an index).
            out.push((child.chunk_index.unwrap_or(0), desc.clone()));
            continue;
        }
        let Ok(path) = steps(&cf.field_tag) else {
            continue;
        };
        let mut at = desc.clone();
        let resolved = path.iter().all(|step| {
            let Some(fd) = at.get_field(step.field) else {
                return false;
            };
            let kind = if fd.is_map() {
                match fd.kind() {
                    Kind::Message(entry) => entry.map_entry_value_field().kind(),
                    _ => return false,
                }
            } else {
                fd.kind()
            };
            match kind {
                Kind::Message(next) => {
                    at = next;
                    true
                }
                // A scalar: read from a bytes chunk, not merged as a message.
                _ => false,
            }
        });
        if resolved {
            walk(&at, child, depth + 1, out);
        }
    }
}

/// A chunk to stream ahead, and where it stands.
enum Slot {
    /// Not started; streamed as this type.
    Waiting(MessageDescriptor),
    /// The helper is streaming it.
    Running,
    /// Streamed as the type named.
    Done(String, Result<WireMessage>),
    /// Given to the merge, or left to it.
    Taken,
}

/// What the merge and the helper share.
struct Shared {
    slots: Mutex<HashMap<u64, Slot>>,
    changed: Condvar,
    cancelled: AtomicBool,
}

/// The chunks streamed ahead of a merge, and the helper streaming them; dropping it stops
/// the helper after the chunk it is streaming.
pub(crate) struct Ahead {
    shared: Arc<Shared>,
    helper: Option<JoinHandle<()>>,
}

/// What a merge asking for a chunk gets.
pub(crate) enum Claim {
    /// The chunk, streamed by the helper.
    Streamed(Result<WireMessage>),
    /// Nothing: the merge streams it.
    Yours,
}

impl Ahead {
    /// Starts a helper streaming `chunks` (index and type, in the merge's order) from the
    /// last one, each by `stream`.
    pub(crate) fn start(
        chunks: Vec<(u64, MessageDescriptor)>,
        stream: impl Fn(u64, &MessageDescriptor) -> Result<WireMessage> + Send + 'static,
    ) -> Option<Self> {
        let mut slots = HashMap::new();
        let mut order = Vec::new();
        for (index, desc) in chunks {
            if let std::collections::hash_map::Entry::Vacant(slot) = slots.entry(index) {
                slot.insert(Slot::Waiting(desc));
                order.push(index);
            }
        }
        let shared = Arc::new(Shared {
            slots: Mutex::new(slots),
            changed: Condvar::new(),
            cancelled: AtomicBool::new(false),
        });
        let helper_shared = Arc::clone(&shared);
        let helper = std::thread::Builder::new()
            .name("unbound-stream-ahead".into())
            .spawn(move || {
                for index in order.into_iter().rev() {
                    if helper_shared.cancelled.load(Ordering::Relaxed) {
                        return;
                    }
                    let Some(desc) = helper_shared.take_waiting(index) else {
                        continue;
                    };
                    let running = Running {
                        shared: &helper_shared,
                        index,
                    };
                    let streamed = stream(index, &desc);
                    std::mem::forget(running);
                    helper_shared.done(index, desc.full_name().to_string(), streamed);
                }
            })
            .ok()?;
        Some(Self {
            shared,
            helper: Some(helper),
        })
    }

    /// Chunk `index` as the merge asks for it, as type `desc`: what the helper streamed (once
    /// it has), or [`Claim::Yours`] when the helper has not begun it (it then never will),
    /// never streams it, or streamed it as another type.
    pub(crate) fn claim(&self, index: u64, desc: &MessageDescriptor) -> Claim {
        let Ok(mut slots) = self.shared.slots.lock() else {
            return Claim::Yours;
        };
        loop {
            match slots.get_mut(&index) {
                None | Some(Slot::Taken) => return Claim::Yours,
                Some(Slot::Running) => {
                    slots = match self.shared.changed.wait(slots) {
                        Ok(slots) => slots,
                        Err(_) => return Claim::Yours,
                    };
                }
                Some(slot) => {
                    return match std::mem::replace(slot, Slot::Taken) {
                        Slot::Done(name, streamed) if name == desc.full_name() => {
                            Claim::Streamed(streamed)
                        }
                        _ => Claim::Yours,
                    };
                }
            }
        }
    }
}

impl Shared {
    /// Marks chunk `index` running and returns its type, if it is still waiting.
    fn take_waiting(&self, index: u64) -> Option<MessageDescriptor> {
        let mut slots = self.slots.lock().ok()?;
        let slot = slots.get_mut(&index)?;
        match std::mem::replace(slot, Slot::Running) {
            Slot::Waiting(desc) => Some(desc),
            other => {
                *slot = other;
                None
            }
        }
    }

    /// Keeps what streaming chunk `index` as type `name` gave, for the merge.
    fn done(&self, index: u64, name: String, streamed: Result<WireMessage>) {
        if let Ok(mut slots) = self.slots.lock() {
            slots.insert(index, Slot::Done(name, streamed));
        }
        self.changed.notify_all();
    }
}

/// A chunk the helper is streaming: should the stream panic, the chunk is left to the merge
/// rather than waited for.
struct Running<'a> {
    shared: &'a Shared,
    index: u64,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Ok(mut slots) = self.shared.slots.lock() {
            slots.insert(self.index, Slot::Taken);
        }
        self.shared.changed.notify_all();
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        self.shared.cancelled.store(true, Ordering::Relaxed);
        if let Some(helper) = self.helper.take() {
            if let Err(panic) = helper.join() {
                std::panic::resume_unwind(panic);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use bytes::Bytes;
    use unbound_proto::tensorflow::proto_splitter::{field_index, ChunkedField, FieldIndex};

    use super::*;
    use crate::merger::{ChunkSource, Merger};

    /// Chunks whose every message chunk is "streamed" as an empty message, recording the
    /// type each was asked for; other chunks read as `bytes`.
    struct Recording {
        asked: RefCell<Vec<(u64, String)>>,
        bytes: Bytes,
    }

    impl ChunkSource for Recording {
        fn name(&self) -> &str {
            "recording"
        }
        fn len(&self) -> usize {
            16
        }
        fn bytes(&self, _: u64) -> Result<Bytes> {
            Ok(self.bytes.clone())
        }
        fn streamed(&self, index: u64, desc: &MessageDescriptor) -> Option<Result<WireMessage>> {
            self.asked
                .borrow_mut()
                .push((index, desc.full_name().to_string()));
            Some(Ok(WireMessage::new(Some(desc.clone()))))
        }
    }

    fn field(number: u32) -> FieldIndex {
        FieldIndex {
            kind: Some(field_index::Kind::Field(number)),
        }
    }

    fn index(i: u64) -> FieldIndex {
        FieldIndex {
            kind: Some(field_index::Kind::Index(i)),
        }
    }

    fn key(k: &str) -> FieldIndex {
        FieldIndex {
            kind: Some(field_index::Kind::MapKey(field_index::MapKey {
                r#type: Some(field_index::map_key::Type::S(k.into())),
            })),
        }
    }

    fn chunked(tags: Vec<FieldIndex>, chunk: u64, inner: Vec<ChunkedField>) -> ChunkedField {
        ChunkedField {
            field_tag: tags,
            message: Some(ChunkedMessage {
                chunk_index: Some(chunk),
                chunked_fields: inner,
            }),
        }
    }

    #[test]
    fn the_types_resolved_ahead_are_those_the_merge_asks_for() {
        let root = unbound_proto::descriptor_pool()
            .get_message_by_name("tensorflow.SavedModel")
            .unwrap();
        // SavedModel.meta_graphs[0].graph_def (GraphDef), with node[1] (NodeDef) and
        // library (FunctionDefLibrary), with function[0] (FunctionDef), inside it;
        // meta_graphs[0].signature_def["serve"] (a map of messages); and a chunk merged
        // into the message itself (no tag).
        let metadata = ChunkedMessage {
            chunk_index: Some(0),
            chunked_fields: vec![
                chunked(
                    vec![field(2), index(0), field(2)],
                    1,
                    vec![
                        chunked(vec![field(1), index(1)], 2, vec![]),
                        chunked(
                            vec![field(2)],
                            3,
                            vec![chunked(vec![field(1), index(0)], 4, vec![])],
                        ),
                    ],
                ),
                chunked(vec![field(2), index(0), field(5), key("serve")], 5, vec![]),
                chunked(vec![], 6, vec![]),
            ],
        };
        let source = Recording {
            asked: RefCell::new(Vec::new()),
            bytes: Bytes::new(),
        };
        Merger::new(&source).merge(&root, &metadata).unwrap();
        let resolved: Vec<(u64, String)> = message_types(&root, &metadata)
            .into_iter()
            .map(|(i, d)| (i, d.full_name().to_string()))
            .collect();
        assert_eq!(resolved, source.asked.into_inner());
        assert_eq!(
            resolved
                .iter()
                .map(|(i, name)| format!("{i} {name}"))
                .collect::<Vec<_>>(),
            [
                "0 tensorflow.SavedModel",
                "6 tensorflow.SavedModel",
                "1 tensorflow.GraphDef",
                "2 tensorflow.NodeDef",
                "3 tensorflow.FunctionDefLibrary",
                "4 tensorflow.FunctionDef",
                "5 tensorflow.SignatureDef",
            ]
        );
    }
}

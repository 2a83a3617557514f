//! A `saved_model.pb` whose bytes are not canonical, read as its canonical form (issue 29).
//!
//! Every pass over a `.pb` has a fast path for a model in canonical form (the deterministic
//! serialization protobuf C++ writes: TensorFlow's own `.pb` files): its schema check is the
//! fingerprint's canonical check, its graph is hashed where it lies, its split takes its nodes
//! as they are. A model written otherwise (fields out of order, map entries without their
//! default keys, unknown fields, padded varints: other writers, hand-assembled bytes) took
//! the general path in each pass, and each pass made the canonical form again (a `split`
//! twice: to fingerprint its source and its output). Made once, in memory, and read by every
//! pass in place of the file ([`SavedModel::canonicalized`]), it costs one encoding, and the
//! passes after it are those of a canonical model. Every answer is the same: a message has
//! one canonical form, and TensorFlow's fingerprint of a `.pb` hashes that form.

use std::path::Path;

use crate::dir::SavedModel;
use crate::format::ModelFormat;
use bytes::Bytes;
use prost_reflect::MessageDescriptor;
use unbound_proto::fields::tensorflow::{function_def_library, graph_def, meta_graph_def};
use unbound_wire::codec::{read_field, WireType};
use unbound_wire::{Payload, WireMessage, WireValue};

use super::canonical::{Encoder, Source};
use super::hashes::{descriptor, field_sources, first_meta_graph};
use super::streamed;

/// `model`, reading the canonical form of its `saved_model.pb` in place of the file when
/// most of a sample of its messages are not canonical ([`mostly_canonical_pb`]); unchanged
/// when the model is not a `.pb`, is mostly canonical, or does not encode (a malformed model
/// is left for its readers to refuse in their words).
///
/// A model mostly canonical keeps the per-message fast paths (each canonical node or function
/// taken as it lies, the few others encoded one by one): TensorFlow's Python writes such
/// models (a function's `arg_attr` without its default key 0), and encoding them whole would
/// cost more than those few. The sample decides only which path is taken: the answers are the
/// same on both.
pub fn in_canonical_form(model: SavedModel) -> SavedModel {
    if model.format() != ModelFormat::Pb || model.canonicalized() {
        return model;
    }
    let Ok(bytes) = model.data() else {
        return model;
    };
    match canonical_form_unless_mostly_canonical(&bytes) {
        Some(canonical) => model.reading(canonical),
        None => model,
    }
}

/// The canonical form of the SavedModel serialized in `bytes` when most of a sample of it is
/// not canonical ([`mostly_canonical_pb`]), made in memory; `None` when it is mostly canonical,
/// or does not encode. What [`in_canonical_form`] reads in place of a `.pb`, for a writer that
/// holds the model rather than a file (`unbound.tensorflow.SavedModelSplitter`), so that it
/// splits what `unbound split` splits.
pub fn canonical_form_unless_mostly_canonical(bytes: &Bytes) -> Option<Bytes> {
    if mostly_canonical_pb(bytes) {
        return None;
    }
    streamed::canonical_model(bytes).ok().map(Bytes::from)
}

/// Whether most of a sample of the SavedModel serialized in `bytes` is canonical: its first
/// graph's first nodes and its library's first functions, up to 256 KiB of each,
/// each message checked on its own and counted by its size. A cheap sample (a millisecond
/// whatever the model's size): nodes and functions are nearly all of a large model, and a
/// writer that does not write canonical form shows it in its first messages. A model that
/// cannot be sampled (no meta graph, malformed) counts as canonical: its readers refuse it.
pub fn mostly_canonical_pb(bytes: &Bytes) -> bool {
    let parsed = || -> super::Result<WireMessage> {
        WireMessage::parse(bytes, Some(descriptor("tensorflow.SavedModel")?))
            .map_err(|e| super::model_fault(e.to_string()))
    };
    parsed().is_ok_and(|model| mostly_canonical_model(&model))
}

/// [`mostly_canonical_pb`] of a SavedModel held as a message (merged from a `.cpb`'s chunks,
/// say): its nodes and functions held serialized are sampled (a model whose are all held
/// built counts as canonical: it is written as held).
pub(crate) fn mostly_canonical_model(model: &WireMessage) -> bool {
    let sampled = || -> super::Result<bool> {
        let meta_graph = [first_meta_graph(model)?];
        let graph = field_sources(&meta_graph, meta_graph_def::GRAPH_DEF)?;
        let library = leading_field_sources(&graph, graph_def::LIBRARY, LIBRARY_SOUGHT)?;
        let mut enc = Encoder::new();
        let mut tally = Tally::default();
        tally.sample(&mut enc, &graph, graph_def::NODE, "tensorflow.NodeDef")?;
        tally.sample(
            &mut enc,
            &library,
            function_def_library::FUNCTION,
            "tensorflow.FunctionDef",
        )?;
        Ok(tally.not_canonical <= tally.canonical)
    };
    sampled().unwrap_or(true)
}

/// What `merge` writes for a model it merged from a `.cpb`'s chunks ([`canonical_form_of_held`]).
pub(crate) enum HeldCanonical {
    /// The model as held: mostly canonical (made canonical when written, if it is not).
    AsHeld(WireMessage),
    /// Its canonical form, made in memory.
    Made(Bytes),
    /// Its canonical form with its large values still lazy references
    /// ([`super::opaque_values`]), and the model.
    KeepingValues {
        canonical: WireMessage,
        model: WireMessage,
    },
}

/// What to write for the SavedModel `model` (merged from a `.cpb`'s chunks): its canonical
/// form without reading its large values when it holds many ([`super::opaque_values`]: the
/// sample below sees only small messages, and a model of values whose small messages are not
/// canonical was written as held, then made canonical in memory, values and all); else as
/// held when most of a sample of it is canonical ([`mostly_canonical_model`]); else its
/// canonical form made in memory from its serialization. Written as held and made canonical
/// afterwards, the model was written twice and read back between (issue 29).
/// Faults are named after `file`, the model file `model` was read from. The model is let go
/// once serialized when its canonical form is made (it and the chunks it holds were a third
/// of the peak memory of such a merge).
pub(crate) fn canonical_form_of_held(
    model: WireMessage,
    file: &Path,
) -> super::Result<HeldCanonical> {
    let made = || -> super::Result<HeldCanonical> {
        if let Some(canonical) = super::opaque_values::canonical_keeping_values(&model)? {
            return Ok(HeldCanonical::KeepingValues { canonical, model });
        }
        if mostly_canonical_model(&model) {
            return Ok(HeldCanonical::AsHeld(model));
        }
        let serialized = model
            .to_vec()
            .map_err(|e| super::model_fault(e.to_string()))?;
        drop(model);
        Ok(HeldCanonical::Made(Bytes::from(streamed::canonical_model(
            &serialized,
        )?)))
    };
    made().map_err(|e| super::naming_file(file, e))
}

/// How many bytes of nodes, and of functions, [`mostly_canonical_pb`] checks.
const SAMPLED: usize = 256 << 10;

/// How far into a graph's fields [`mostly_canonical_pb`] looks for its library. Protobuf
/// writes the library after the nodes (field 2 after field 1): a graph with more nodes than
/// this before its library is judged by its nodes, which are then most of it. Sought to the
/// end, the library of a graph of millions of nodes cost a scan of every node's key and
/// length, on one core before the encoding could start (0.3 s of a 6 s split, issue 29).
const LIBRARY_SOUGHT: usize = 16 << 20;

/// The occurrences of message field `number` among the fields of `sources` (a message's, in
/// order) that start within their first `within` bytes.
fn leading_field_sources<'s>(
    sources: &'s [Source<'_>],
    number: u32,
    within: usize,
) -> super::Result<Vec<Source<'s>>> {
    let mut found = Vec::new();
    let mut passed = 0usize;
    for source in sources {
        if passed >= within {
            break;
        }
        match source {
            Source::Raw(_) | Source::Slice(..) => {
                let (buf, start, end) = match source {
                    Source::Slice(buf, start, end) => (*buf, *start, *end),
                    Source::Raw(buf) => (buf, 0, buf.len()),
                    _ => unreachable!("matched above"),
                };
                let mut pos = start;
                while pos < end && passed + (pos - start) < within {
                    let raw = read_field(&buf[..end], &mut pos)
                        .map_err(|e| super::model_fault(e.to_string()))?;
                    if raw.number == number && raw.wire_type == WireType::Len {
                        found.push(Source::Slice(buf, raw.start, raw.end));
                    }
                }
                passed += pos - start;
            }
            Source::Ref(message) | Source::Written(message, _) => {
                for field in &message.fields {
                    if passed >= within {
                        break;
                    }
                    passed += match &field.value {
                        WireValue::Bytes(p) => usize::try_from(p.len()).unwrap_or(usize::MAX),
                        _ => 1,
                    };
                    if field.number == number {
                        let value = super::fields::Val::from_wire(&field.value);
                        if value.is_len() {
                            found.extend(value.to_source()?);
                        }
                    }
                }
            }
        }
    }
    Ok(found)
}

/// Bytes of sampled messages found canonical and not.
#[derive(Default)]
struct Tally {
    canonical: usize,
    not_canonical: usize,
}

impl Tally {
    /// Checks the messages of field `number` (of type `name`) in `sources`, one by one, until
    /// [`SAMPLED`] bytes of them have been.
    fn sample(
        &mut self,
        enc: &mut Encoder,
        sources: &[Source<'_>],
        number: u32,
        name: &str,
    ) -> super::Result<()> {
        let desc = descriptor(name)?;
        let mut seen = 0;
        for source in sources {
            let (buf, start, end) = match source {
                Source::Raw(buf) => (buf.clone(), 0, buf.len()),
                Source::Slice(buf, start, end) => ((*buf).clone(), *start, *end),
                // A message the merge built (a graph whose chunks it appended): its elements
                // are slices of those chunks. Unsampled, a model of nodes none of which is
                // canonical was taken as mostly canonical, written as held and then made
                // canonical and written again (issue 29).
                Source::Ref(message) | Source::Written(message, _) => {
                    self.sample_held(enc, message, number, &desc, &mut seen);
                    continue;
                }
            };
            let mut pos = start;
            while pos < end && seen < SAMPLED {
                let raw = read_field(&buf[..end], &mut pos)
                    .map_err(|e| super::model_fault(e.to_string()))?;
                if raw.number != number || raw.wire_type != WireType::Len {
                    continue;
                }
                let len = raw.end - raw.start;
                seen += len;
                if enc.is_canonical(&buf.slice(raw.start..raw.end), &desc) {
                    self.canonical += len;
                } else {
                    self.not_canonical += len;
                }
            }
        }
        Ok(())
    }

    /// [`Tally::sample`] of the elements of field `number` of a message held built, those
    /// held as bytes (a built element is not sampled).
    fn sample_held(
        &mut self,
        enc: &mut Encoder,
        message: &WireMessage,
        number: u32,
        desc: &MessageDescriptor,
        seen: &mut usize,
    ) {
        for field in &message.fields {
            if *seen >= SAMPLED {
                return;
            }
            let WireValue::Bytes(Payload::Inline(bytes)) = &field.value else {
                continue;
            };
            if field.number != number {
                continue;
            }
            *seen += bytes.len();
            if enc.is_canonical(bytes, desc) {
                self.canonical += bytes.len();
            } else {
                self.not_canonical += bytes.len();
            }
        }
    }
}

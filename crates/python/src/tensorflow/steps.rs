//! A merged message handed to Python by parts: a list of merge steps.
//!
//! Reading a `.cpb` gives a [`WireMessage`] of any size; Python's protobuf runtime cannot parse
//! one serialization past 2 GiB. So the message is cut into *steps*, each `(path, bytes)` with
//! `bytes` at most [`STEP_LIMIT`] long (unless a single value is larger, see below): Python
//! walks `path` (a list of `(field_number, index)`, index `-1` for a singular field) from the
//! root message and calls `MergeFromString(bytes)` there.
//!
//! A message no larger than [`STEP_LIMIT`] is one step. A larger one is one step for its
//! *shell* (every field that is not message-typed), then its message-typed fields (maps
//! included), field by field, in batches of whole elements of at most [`STEP_LIMIT`] bytes
//! (merging concatenated records appends repeated elements in order). An element larger than
//! the limit is appended empty (a zero-length record) and then filled by the steps of its own
//! parts, at its path. Merging every step gives a message equal to the original.
//!
//! A map entry larger than the limit (a `NodeDef`'s `attr` holding a large constant) cannot be
//! filled by parts, since Python reaches map values by key: it goes as a step of its own. A map
//! entry or a shell past 2 GiB - 1 cannot be handed over at all and is refused with
//! `unbound.TooLargeError`.

use std::collections::VecDeque;

use prost_reflect::{Kind as FieldKind, MessageDescriptor};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use unbound_wire::{Payload, WireField, WireMessage, WireValue};

use crate::errors::{py_err, raise, Kind};

/// Largest serialization one step hands over (16 MiB). Python's `MergeFromString` of a step
/// cannot be interrupted, so this bounds how long Ctrl-C waits (about 0.25 s per step on a
/// graph of small nodes; with 512 MiB steps a 260 MB model was one 2.3 s step, and Ctrl-C came
/// 2.6 to 5 s late). Smaller steps cost no measurable time (`read_saved_model` of 1.5M nodes:
/// 3.6 s with 512 MiB steps, 3.8 s with 16 MiB) and bound the transient memory of a step.
pub const STEP_LIMIT: u64 = 16 << 20;

/// Largest serialization protobuf accepts: 2 GiB - 1.
const PROTO_LIMIT: u64 = (1 << 31) - 1;

/// Where a step merges: `(field_number, index)` pairs from the root, index `-1` for a
/// singular field.
pub type StepPath = Vec<(u32, i64)>;

/// One merge step: the message at a path, and fields to merge into it.
pub struct Step {
    /// Where to merge.
    pub path: StepPath,
    /// The fields to merge, serialized in their order.
    pub fields: WireMessage,
}

/// Cuts `message` (of type `desc`) into merge steps of at most `limit` bytes (see the module
/// documentation; [`STEP_LIMIT`] but in tests).
pub fn plan(
    message: WireMessage,
    desc: &MessageDescriptor,
    limit: u64,
) -> PyResult<VecDeque<Step>> {
    let mut steps = VecDeque::new();
    plan_at(message, desc, Vec::new(), limit, &mut steps)?;
    Ok(steps)
}

fn plan_at(
    mut message: WireMessage,
    desc: &MessageDescriptor,
    path: StepPath,
    limit: u64,
    steps: &mut VecDeque<Step>,
) -> PyResult<()> {
    if message.encoded_len() <= limit {
        steps.push_back(Step {
            path,
            fields: message,
        });
        return Ok(());
    }
    let is_message_field = |number: u32| {
        desc.get_field(number)
            .is_some_and(|f| matches!(f.kind(), FieldKind::Message(_)))
    };
    let (parts, shell): (Vec<WireField>, Vec<WireField>) = std::mem::take(&mut message.fields)
        .into_iter()
        .partition(|f| is_message_field(f.number) && is_length_delimited(&f.value));
    let shell = WireMessage {
        fields: shell,
        descriptor: Some(desc.clone()),
    };
    check_size(&shell, desc)?;
    steps.push_back(Step {
        path: path.clone(),
        fields: shell,
    });
    let mut numbers: Vec<u32> = parts.iter().map(|f| f.number).collect();
    numbers.sort_unstable();
    numbers.dedup();
    let mut parts: VecDeque<WireField> = parts.into();
    for number in numbers {
        let Some(field) = desc.get_field(number) else {
            continue;
        };
        let FieldKind::Message(child_desc) = field.kind() else {
            continue;
        };
        let repeated = field.is_list() || field.is_map();
        let (this, rest): (Vec<WireField>, Vec<WireField>) = std::mem::take(&mut parts)
            .into_iter()
            .partition(|f| f.number == number);
        parts = rest.into();
        let mut batch = WireMessage::new(None);
        let mut batch_len = 0;
        for (index, element) in this.into_iter().enumerate() {
            let len = element.encoded_len();
            // A map entry cannot be filled by parts (Python reaches map values by key, not
            // position): one past the step limit goes alone, up to protobuf's own limit.
            if len <= limit || (field.is_map() && len <= PROTO_LIMIT) {
                if batch_len + len > limit {
                    flush(&mut batch, &mut batch_len, &path, steps);
                }
                batch_len += len;
                batch.fields.push(element);
                continue;
            }
            if field.is_map() {
                return Err(raise(
                    Kind::TooLarge,
                    format!(
                        "an entry of map {} ({len} bytes) is too large to hand to Python's protobuf",
                        field.full_name()
                    ),
                ));
            }
            flush(&mut batch, &mut batch_len, &path, steps);
            let child = expand(element.value, &child_desc)?;
            let mut child_path = path.clone();
            if repeated {
                // Append an empty element, then fill it by parts.
                steps.push_back(Step {
                    path: path.clone(),
                    fields: WireMessage {
                        fields: vec![WireField {
                            number,
                            value: WireValue::Bytes(Payload::Inline(bytes::Bytes::new())),
                        }],
                        descriptor: None,
                    },
                });
                child_path.push((number, index as i64));
            } else {
                child_path.push((number, -1));
            }
            plan_at(child, &child_desc, child_path, limit, steps)?;
        }
        flush(&mut batch, &mut batch_len, &path, steps);
    }
    Ok(())
}

/// Whether a field value is a length-delimited one (a message field could in principle hold
/// something else on the wire; such a value stays in the shell).
fn is_length_delimited(value: &WireValue) -> bool {
    matches!(value, WireValue::Bytes(_) | WireValue::Message(_))
}

/// Pushes the batch as a step, if it holds anything.
fn flush(
    batch: &mut WireMessage,
    batch_len: &mut u64,
    path: &StepPath,
    steps: &mut VecDeque<Step>,
) {
    if !batch.fields.is_empty() {
        steps.push_back(Step {
            path: path.clone(),
            fields: std::mem::take(batch),
        });
    }
    *batch_len = 0;
}

/// A message value as a [`WireMessage`] (parsed one level deep if still bytes).
fn expand(value: WireValue, desc: &MessageDescriptor) -> PyResult<WireMessage> {
    match value {
        WireValue::Message(mut m) => {
            m.descriptor = Some(desc.clone());
            Ok(m)
        }
        WireValue::Bytes(payload) => {
            let bytes = payload.bytes().map_err(py_err)?;
            WireMessage::parse(&bytes, Some(desc.clone())).map_err(|e| {
                raise(
                    Kind::Format,
                    format!("a {} in the model is malformed: {e}", desc.full_name()),
                )
            })
        }
        _ => Err(raise(
            Kind::Format,
            format!(
                "a {} in the model is not length-delimited",
                desc.full_name()
            ),
        )),
    }
}

/// Refuses a shell protobuf could not parse.
fn check_size(shell: &WireMessage, desc: &MessageDescriptor) -> PyResult<()> {
    let len = shell.encoded_len();
    if len > PROTO_LIMIT {
        return Err(raise(
            Kind::TooLarge,
            format!(
                "the non-message fields of a {} take {len} bytes, past protobuf's 2 GiB limit",
                desc.full_name()
            ),
        ));
    }
    Ok(())
}

/// The steps of a message, produced one at a time so that only one step's bytes exist on the
/// Python side beyond the message being built. Iterating yields `(path, bytes)`.
#[pyclass(module = "unbound._unbound", name = "MergeSteps", unsendable)]
pub struct MergeSteps {
    /// Steps not yet handed over.
    pub steps: VecDeque<Step>,
}

#[pymethods]
impl MergeSteps {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __len__(&self) -> usize {
        self.steps.len()
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let Some(step) = self.steps.pop_front() else {
            return Ok(None);
        };
        let len = step.fields.encoded_len();
        if len > PROTO_LIMIT {
            return Err(raise(
                Kind::TooLarge,
                format!("a part of {len} bytes is past protobuf's 2 GiB limit"),
            ));
        }
        let mut fault = None;
        // Written straight into the new `bytes` object: no second copy of the step.
        let bytes = PyBytes::new_with(py, len as usize, |buf| {
            let mut out: &mut [u8] = buf;
            if let Err(e) = step.fields.write_to(&mut out) {
                fault = Some(e);
            } else if !out.is_empty() {
                fault = None;
                return Err(raise(
                    Kind::Other,
                    "a merge step wrote fewer bytes than it declared (a bug: please report it)",
                ));
            }
            Ok(())
        })?;
        if let Some(e) = fault {
            return Err(py_err(e));
        }
        let path: Vec<(u32, i64)> = step.path;
        Ok(Some(PyTuple::new(
            py,
            [path.into_pyobject(py)?.into_any(), bytes.into_any()],
        )?))
    }
}

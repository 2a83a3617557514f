//! Graph properties through the util C API: `TF_NewGraphProperties`, `TF_InferStatically` and
//! the input/output property lists, each property a serialized `OpInfo.TensorProperties`,
//! answered by [`unbound_graph::properties::GraphProperties`] (static shape inference).

use std::ffi::{c_char, c_int, c_void};

use prost::Message;

use crate::abi::TfBuffer;
use crate::buffer::fill_buffer;
use crate::status::{c_str_arg, code, StatusOut, TfStatus};
use crate::util_api::item_context;
use unbound_graph::properties::{GraphProperties, InferOptions, TensorProperties};

/// What a `TF_GraphProperties*` points to: the item it was made for and, once inferred, the
/// properties.
pub struct PropertiesHandle {
    item: *const c_void,
    properties: Option<GraphProperties>,
}

impl PropertiesHandle {
    fn list(&self, node: &str, inputs: bool) -> &[TensorProperties] {
        match &self.properties {
            Some(p) if inputs => p.input_properties(node),
            Some(p) => p.output_properties(node),
            None => &[],
        }
    }
}

/// `TF_NewGraphProperties`: properties of the item's graph, empty until `TF_InferStatically`.
/// The item must outlive them.
///
/// # Safety
/// `item` is the item pointer given to `optimize_func`. It is only stored here, and read by
/// `TF_InferStatically`.
#[no_mangle]
pub unsafe extern "C" fn TF_NewGraphProperties(item: *const c_void) -> *mut PropertiesHandle {
    Box::into_raw(Box::new(PropertiesHandle {
        item,
        properties: None,
    }))
}

/// `TF_DeleteGraphProperties`. Null is a no-op.
///
/// # Safety
/// `props` is null or came from `TF_NewGraphProperties` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn TF_DeleteGraphProperties(props: *mut PropertiesHandle) {
    if !props.is_null() {
        // SAFETY: non-null, so it is the Box TF_NewGraphProperties leaked; freed once
        // (contract).
        drop(unsafe { Box::from_raw(props) });
    }
}

/// `TF_InferStatically`: infers dtypes and shapes of every node's inputs and outputs.
///
/// # Safety
/// `props` is null or came from `TF_NewGraphProperties` and its item is still live; `status`
/// is null or a live status.
#[no_mangle]
pub unsafe extern "C" fn TF_InferStatically(
    props: *mut PropertiesHandle,
    assume_valid_feeds: u8,
    aggressive_shape_inference: u8,
    include_input_tensor_values: u8,
    include_output_tensor_values: u8,
    status: *mut TfStatus,
) {
    // SAFETY: `status` is null or the caller's live status (contract).
    let mut status = unsafe { StatusOut::reset(status) };
    // SAFETY: `props` is null or a live handle from TF_NewGraphProperties that only this call
    // touches (contract).
    let Some(handle) = (unsafe { props.as_mut() }) else {
        status.set(code::INVALID_ARGUMENT, "TF_GraphProperties is null");
        return;
    };
    // SAFETY: the handle's item is null or the item given to optimize_func, still live
    // (contract).
    let Some(context) = (unsafe { item_context(handle.item) }) else {
        status.set(code::INVALID_ARGUMENT, "TF_GrapplerItem is null");
        return;
    };
    let Some(graph) = context.graph() else {
        status.set(code::INVALID_ARGUMENT, "the item's graph does not parse");
        return;
    };
    let item = context.item;
    let options = InferOptions {
        assume_valid_feeds: assume_valid_feeds != 0,
        aggressive_shape_inference: aggressive_shape_inference != 0,
        include_input_tensor_values: include_input_tensor_values != 0,
        include_output_tensor_values: include_output_tensor_values != 0,
    };
    match GraphProperties::infer(graph, &item.ops, &item.feed, options) {
        Ok(p) => handle.properties = Some(p),
        Err(e) => status.set(code::INVALID_ARGUMENT, &e.to_string()),
    }
}

/// The input (or output) properties of the node named `name`, after setting the status to OK;
/// None, with INVALID_ARGUMENT, when `props` or `name` is null.
///
/// # Safety
/// `props` is null or came from `TF_NewGraphProperties` and lives for `'a`; `name` is null or
/// a NUL-terminated string; `status` is null or a live status.
unsafe fn node_list<'a>(
    props: *mut PropertiesHandle,
    name: *const c_char,
    status: &mut StatusOut<'_>,
    inputs: bool,
) -> Option<&'a [TensorProperties]> {
    // SAFETY: `props` is null or a live handle (contract); it is only read.
    let (Some(handle), false) = (unsafe { props.as_ref() }, name.is_null()) else {
        let message = "properties and node name must not be null";
        status.set(code::INVALID_ARGUMENT, message);
        return None;
    };
    // SAFETY: `name` is non-null (checked) and NUL-terminated (contract).
    let name = unsafe { c_str_arg(name) };
    Some(handle.list(&name, inputs))
}

/// `...PropertiesListSize`.
///
/// # Safety
/// As [`TF_GetInputPropertiesListSize`].
unsafe fn list_size(
    props: *mut PropertiesHandle,
    name: *const c_char,
    num_values: *mut c_int,
    status: *mut TfStatus,
    inputs: bool,
) {
    // SAFETY: `status` is null or the caller's live status (contract).
    let mut status = unsafe { StatusOut::reset(status) };
    // SAFETY: the caller's `props` and `name`, under the same contract.
    let Some(list) = (unsafe { node_list(props, name, &mut status, inputs) }) else {
        return;
    };
    // SAFETY: `num_values` is null or writable (contract); as_mut checks null.
    if let Some(n) = unsafe { num_values.as_mut() } {
        *n = c_int::try_from(list.len()).unwrap_or(c_int::MAX);
    }
}

/// `...PropertiesList`.
///
/// # Safety
/// As [`TF_GetInputPropertiesList`].
unsafe fn list_fill(
    props: *mut PropertiesHandle,
    name: *const c_char,
    out: *mut *mut TfBuffer,
    num_values: c_int,
    status: *mut TfStatus,
    inputs: bool,
) {
    // SAFETY: `status` is null or the caller's live status (contract).
    let mut status = unsafe { StatusOut::reset(status) };
    // SAFETY: the caller's `props` and `name`, under the same contract.
    let Some(list) = (unsafe { node_list(props, name, &mut status, inputs) }) else {
        return;
    };
    let count = usize::try_from(num_values).unwrap_or(0).min(list.len());
    if count > 0 && out.is_null() {
        status.set(code::INVALID_ARGUMENT, "the properties array is null");
        return;
    }
    for (i, property) in list.iter().take(count).enumerate() {
        // SAFETY: `out` is non-null (checked) and holds `num_values` buffer pointers
        // (contract), and `i < count <= num_values`; each is null or a live buffer, and
        // fill_buffer checks null.
        let filled = unsafe { fill_buffer(*out.add(i), &property.encode_to_vec()) };
        if let Err(e) = filled {
            status.set(code::INVALID_ARGUMENT, &e.to_string());
            return;
        }
    }
}

/// `TF_GetInputPropertiesListSize`: how many input properties `name` has (0 for an unknown
/// node or before inference).
///
/// # Safety
/// `props` is null or came from `TF_NewGraphProperties`; `name` is null or a NUL-terminated
/// string; `num_values` is null or writable; `status` is null or a live status.
#[no_mangle]
pub unsafe extern "C" fn TF_GetInputPropertiesListSize(
    props: *mut PropertiesHandle,
    name: *const c_char,
    num_values: *mut c_int,
    status: *mut TfStatus,
) {
    // SAFETY: the caller's arguments, under the same contract.
    unsafe { list_size(props, name, num_values, status, true) }
}

/// `TF_GetOutputPropertiesListSize`.
///
/// # Safety
/// As `TF_GetInputPropertiesListSize`.
#[no_mangle]
pub unsafe extern "C" fn TF_GetOutputPropertiesListSize(
    props: *mut PropertiesHandle,
    name: *const c_char,
    num_values: *mut c_int,
    status: *mut TfStatus,
) {
    // SAFETY: the caller's arguments, under the same contract.
    unsafe { list_size(props, name, num_values, status, false) }
}

/// `TF_GetInputPropertiesList`: fills `min(num_values, count)` empty buffers (made with
/// `TF_NewBuffer`) with serialized `OpInfo.TensorProperties`.
///
/// # Safety
/// As `TF_GetInputPropertiesListSize`; `properties` is null or holds `num_values` pointers to
/// live buffers.
#[no_mangle]
pub unsafe extern "C" fn TF_GetInputPropertiesList(
    props: *mut PropertiesHandle,
    name: *const c_char,
    properties: *mut *mut TfBuffer,
    num_values: c_int,
    status: *mut TfStatus,
) {
    // SAFETY: the caller's arguments, under the same contract.
    unsafe { list_fill(props, name, properties, num_values, status, true) }
}

/// `TF_GetOutputPropertiesList`.
///
/// # Safety
/// As `TF_GetInputPropertiesList`.
#[no_mangle]
pub unsafe extern "C" fn TF_GetOutputPropertiesList(
    props: *mut PropertiesHandle,
    name: *const c_char,
    properties: *mut *mut TfBuffer,
    num_values: c_int,
    status: *mut TfStatus,
) {
    // SAFETY: the caller's arguments, under the same contract.
    unsafe { list_fill(props, name, properties, num_values, status, false) }
}

//! Graph properties through the util C API: `TF_NewGraphProperties`, `TF_InferStatically` and
//! the input/output property lists, each property a serialized `OpInfo.TensorProperties`,
//! answered by [`unbound_graph::properties::GraphProperties`] (static shape inference).

use std::ffi::{c_char, c_int, c_void, CStr};

use prost::Message;

use crate::abi::TfBuffer;
use crate::buffer::fill_buffer;
use crate::status::{code, set_status, TfStatus};
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
/// `item` is the item pointer given to `optimize_func`.
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
/// `props` is null or came from `TF_NewGraphProperties`.
#[no_mangle]
pub unsafe extern "C" fn TF_DeleteGraphProperties(props: *mut PropertiesHandle) {
    if !props.is_null() {
        drop(Box::from_raw(props));
    }
}

/// `TF_InferStatically`: infers dtypes and shapes of every node's inputs and outputs.
///
/// # Safety
/// `props` came from `TF_NewGraphProperties` and its item is still live.
#[no_mangle]
pub unsafe extern "C" fn TF_InferStatically(
    props: *mut PropertiesHandle,
    assume_valid_feeds: u8,
    aggressive_shape_inference: u8,
    include_input_tensor_values: u8,
    include_output_tensor_values: u8,
    status: *mut TfStatus,
) {
    set_status(status, code::OK, "");
    let Some(handle) = props.as_mut() else {
        set_status(status, code::INVALID_ARGUMENT, "TF_GraphProperties is null");
        return;
    };
    let Some(context) = item_context(handle.item) else {
        set_status(status, code::INVALID_ARGUMENT, "TF_GrapplerItem is null");
        return;
    };
    let Some(graph) = context.graph() else {
        set_status(
            status,
            code::INVALID_ARGUMENT,
            "the item's graph does not parse",
        );
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
        Err(e) => set_status(status, code::INVALID_ARGUMENT, &e.to_string()),
    }
}

/// The input (or output) properties of the node named `name`, after setting the status to OK;
/// None, with INVALID_ARGUMENT, when `props` or `name` is null.
unsafe fn node_list<'a>(
    props: *mut PropertiesHandle,
    name: *const c_char,
    status: *mut TfStatus,
    inputs: bool,
) -> Option<&'a [TensorProperties]> {
    set_status(status, code::OK, "");
    let (Some(handle), false) = (props.as_ref(), name.is_null()) else {
        let message = "properties and node name must not be null";
        set_status(status, code::INVALID_ARGUMENT, message);
        return None;
    };
    Some(handle.list(&CStr::from_ptr(name).to_string_lossy(), inputs))
}

unsafe fn list_size(
    props: *mut PropertiesHandle,
    name: *const c_char,
    num_values: *mut c_int,
    status: *mut TfStatus,
    inputs: bool,
) {
    if let (Some(list), Some(n)) = (node_list(props, name, status, inputs), num_values.as_mut()) {
        *n = c_int::try_from(list.len()).unwrap_or(c_int::MAX);
    }
}

unsafe fn list_fill(
    props: *mut PropertiesHandle,
    name: *const c_char,
    out: *mut *mut TfBuffer,
    num_values: c_int,
    status: *mut TfStatus,
    inputs: bool,
) {
    let Some(list) = node_list(props, name, status, inputs) else {
        return;
    };
    let count = usize::try_from(num_values).unwrap_or(0).min(list.len());
    if count > 0 && out.is_null() {
        set_status(
            status,
            code::INVALID_ARGUMENT,
            "the properties array is null",
        );
        return;
    }
    for (i, property) in list.iter().take(count).enumerate() {
        if let Err(message) = fill_buffer(*out.add(i), &property.encode_to_vec()) {
            set_status(status, code::INVALID_ARGUMENT, &message);
            return;
        }
    }
}

/// `TF_GetInputPropertiesListSize`: how many input properties `name` has (0 for an unknown
/// node or before inference).
///
/// # Safety
/// `props` came from `TF_NewGraphProperties`; `name` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn TF_GetInputPropertiesListSize(
    props: *mut PropertiesHandle,
    name: *const c_char,
    num_values: *mut c_int,
    status: *mut TfStatus,
) {
    list_size(props, name, num_values, status, true)
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
    list_size(props, name, num_values, status, false)
}

/// `TF_GetInputPropertiesList`: fills `min(num_values, count)` empty buffers (made with
/// `TF_NewBuffer`) with serialized `OpInfo.TensorProperties`.
///
/// # Safety
/// As `TF_GetInputPropertiesListSize`; `properties` holds `num_values` live buffers.
#[no_mangle]
pub unsafe extern "C" fn TF_GetInputPropertiesList(
    props: *mut PropertiesHandle,
    name: *const c_char,
    properties: *mut *mut TfBuffer,
    num_values: c_int,
    status: *mut TfStatus,
) {
    list_fill(props, name, properties, num_values, status, true)
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
    list_fill(props, name, properties, num_values, status, false)
}

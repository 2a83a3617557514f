//! [`Item`]: the `TF_GrapplerItem` TensorFlow passes with each graph, and what the util C API
//! tells about it (preserved and fetched nodes, inferred tensor properties, op definitions).

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void, CString};
use std::marker::PhantomData;

use prost::Message;
use unbound_proto::tensorflow::op_info::TensorProperties;
use unbound_proto::tensorflow::OpDef;

use crate::abi::{TfBuffer, TfFunctionLibraryDefinition, TfGraphProperties, TfGrapplerItem};
use crate::api::{self, Api, ListFn, ListSizeFn};
use crate::error::{Code, Error, Result};
use crate::status::Status;

/// The item of one `optimize_func` call: valid only during that call.
pub struct Item<'a> {
    raw: *const TfGrapplerItem,
    graph: *const TfBuffer,
    api: &'static Api,
    flib: Cell<*mut TfFunctionLibraryDefinition>,
    _call: PhantomData<&'a TfGrapplerItem>,
}

/// What [`Item::properties`] infers (the flags of `TF_InferStatically`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PropertiesOptions {
    /// Assume fed tensors have the shapes the graph declares.
    pub assume_valid_feeds: bool,
    /// Try harder (constant propagation through shape ops).
    pub aggressive_shape_inference: bool,
    /// Fill [`TensorProperties::value`] of inputs when known.
    pub include_input_tensor_values: bool,
    /// Fill [`TensorProperties::value`] of outputs when known.
    pub include_output_tensor_values: bool,
}

impl<'a> Item<'a> {
    /// Wraps the pointers of an `optimize_func` call.
    ///
    /// # Safety
    /// `raw` is the call's `TF_GrapplerItem*` (or null) and `graph` its input `TF_Buffer*`;
    /// both stay valid for `'a`.
    #[doc(hidden)]
    pub unsafe fn from_raw(raw: *const TfGrapplerItem, graph: *const TfBuffer) -> Item<'a> {
        Item {
            raw,
            graph,
            api: api::get(),
            flib: Cell::new(std::ptr::null_mut()),
            _call: PhantomData,
        }
    }

    /// The raw `TF_GrapplerItem*`, for util functions this crate does not wrap.
    pub fn as_raw(&self) -> *const TfGrapplerItem {
        self.raw
    }

    fn checked_raw(&self) -> Result<*const TfGrapplerItem> {
        if self.raw.is_null() {
            Err(Error::invalid_argument(
                "the TF_GrapplerItem pointer is null",
            ))
        } else {
            Ok(self.raw)
        }
    }

    /// Names of the nodes the optimizer must keep (fetch, feed, init, keep and save/restore
    /// nodes), `TF_GetNodesToPreserveList`. Order is the host's (TensorFlow's is a hash set).
    pub fn nodes_to_preserve(&self) -> Result<Vec<String>> {
        self.string_list(
            "TF_GetNodesToPreserveList",
            self.api.preserve_size,
            self.api.preserve_list,
        )
    }

    /// The fetched tensors as given (they may carry `:port`), `TF_GetFetchNodesList`.
    pub fn fetch_nodes(&self) -> Result<Vec<String>> {
        self.string_list(
            "TF_GetFetchNodesList",
            self.api.fetch_size,
            self.api.fetch_list,
        )
    }

    fn string_list(
        &self,
        what: &str,
        size_fn: Option<ListSizeFn>,
        list_fn: Option<ListFn>,
    ) -> Result<Vec<String>> {
        let (Some(size_fn), Some(list_fn)) = (size_fn, list_fn) else {
            return Err(Error::unavailable_function(what));
        };
        let raw = self.checked_raw()?;
        let status = Status::new(self.api)?;
        let (mut count, mut storage_size): (c_int, usize) = (0, 0);
        // SAFETY: a live item and status, and out-pointers to locals.
        unsafe { size_fn(raw, &mut count, &mut storage_size, status.as_ptr()) };
        status.check(&format!("{what}Size"))?;
        let count = usize::try_from(count)
            .map_err(|_| Error::internal(format!("{what}Size returned a negative count")))?;
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut values: Vec<*mut c_char> = vec![std::ptr::null_mut(); count];
        let mut lengths = vec![0usize; count];
        let mut storage = vec![0u8; storage_size.max(1)];
        // SAFETY: `values` and `lengths` hold `count` slots and `storage` `storage_size` bytes,
        // as the function's contract asks.
        unsafe {
            list_fn(
                raw,
                values.as_mut_ptr(),
                lengths.as_mut_ptr(),
                count as c_int,
                storage.as_mut_ptr().cast::<c_void>(),
                storage_size,
                status.as_ptr(),
            )
        };
        status.check(what)?;
        let base = storage.as_ptr() as usize;
        let mut out = Vec::with_capacity(count);
        for (&value, &len) in values.iter().zip(&lengths) {
            let start = (value as usize).wrapping_sub(base);
            let bytes = start
                .checked_add(len)
                .and_then(|end| storage.get(start..end))
                .ok_or_else(|| {
                    Error::internal(format!("{what} returned a value outside storage"))
                })?;
            out.push(String::from_utf8_lossy(bytes).into_owned());
        }
        Ok(out)
    }

    /// Infers every node's input and output types and shapes (`TF_NewGraphProperties` +
    /// `TF_InferStatically`).
    pub fn properties(&self, options: PropertiesOptions) -> Result<Properties<'_>> {
        let api = self.api;
        let (Some(new), Some(infer), Some(_)) = (
            api.new_properties,
            api.infer_statically,
            api.delete_properties,
        ) else {
            return Err(Error::unavailable_function("TF_NewGraphProperties"));
        };
        let raw = self.checked_raw()?;
        let status = Status::new(api)?;
        // SAFETY: a live item; the properties are deleted (Drop) before the item's call ends,
        // as `Properties` borrows `self`.
        let props = unsafe { new(raw) };
        if props.is_null() {
            return Err(Error::internal("TF_NewGraphProperties returned null"));
        }
        let props = Properties {
            raw: props,
            api,
            _item: PhantomData,
        };
        // SAFETY: live properties and status.
        unsafe {
            infer(
                props.raw,
                options.assume_valid_feeds.into(),
                options.aggressive_shape_inference.into(),
                options.include_input_tensor_values.into(),
                options.include_output_tensor_values.into(),
                status.as_ptr(),
            )
        };
        status.check("TF_InferStatically")?;
        Ok(props)
    }

    /// The `OpDef` of `op` from TensorFlow's op registry and the graph's function library
    /// (`TF_NewFunctionLibraryDefinition` of the input graph, once, then `TF_LookUpOpDef`);
    /// `None` when the op is unknown.
    pub fn op_def(&self, op: &str) -> Result<Option<OpDef>> {
        let api = self.api;
        let (Some(look_up), Some(new_buffer), Some(delete_buffer)) =
            (api.look_up_op_def, api.new_buffer, api.delete_buffer)
        else {
            return Err(Error::unavailable_function("TF_LookUpOpDef"));
        };
        let flib = self.flib()?;
        let name = c_string(op)?;
        let status = Status::new(api)?;
        // SAFETY: TF_NewBuffer returns an owned empty buffer, deleted below.
        let buffer = unsafe { new_buffer() };
        if buffer.is_null() {
            return Err(Error::internal("TF_NewBuffer returned null"));
        }
        // SAFETY: live library, name, buffer and status.
        unsafe { look_up(flib, name.as_ptr(), buffer, status.as_ptr()) };
        let result = match status.code() {
            Code::NotFound => Ok(None),
            _ => status.check("TF_LookUpOpDef").and_then(|()| {
                // SAFETY: the host filled `buffer`, which is still alive.
                let bytes = unsafe { buffer_bytes(buffer) };
                OpDef::decode(bytes).map(Some).map_err(|e| {
                    Error::internal(format!("TF_LookUpOpDef returned a bad OpDef: {e}"))
                })
            }),
        };
        // SAFETY: `buffer` came from TF_NewBuffer and is not used afterwards.
        unsafe { delete_buffer(buffer) };
        result
    }

    fn flib(&self) -> Result<*mut TfFunctionLibraryDefinition> {
        if !self.flib.get().is_null() {
            return Ok(self.flib.get());
        }
        let (Some(new), Some(_)) = (self.api.new_flib, self.api.delete_flib) else {
            return Err(Error::unavailable_function(
                "TF_NewFunctionLibraryDefinition",
            ));
        };
        if self.graph.is_null() {
            return Err(Error::invalid_argument("the input graph buffer is null"));
        }
        let status = Status::new(self.api)?;
        // SAFETY: the call's input buffer is live; the library is deleted in Drop.
        let flib = unsafe { new(self.graph, status.as_ptr()) };
        status.check("TF_NewFunctionLibraryDefinition")?;
        if flib.is_null() {
            return Err(Error::internal(
                "TF_NewFunctionLibraryDefinition returned null",
            ));
        }
        self.flib.set(flib);
        Ok(flib)
    }
}

impl Drop for Item<'_> {
    fn drop(&mut self) {
        let flib = self.flib.get();
        if let (false, Some(delete)) = (flib.is_null(), self.api.delete_flib) {
            // SAFETY: made by TF_NewFunctionLibraryDefinition, not used afterwards.
            unsafe { delete(flib) };
        }
    }
}

/// Inferred properties of an item's graph; see [`Item::properties`].
pub struct Properties<'i> {
    raw: *mut TfGraphProperties,
    api: &'static Api,
    _item: PhantomData<&'i ()>,
}

impl Properties<'_> {
    /// Type, shape (and value, if asked) of each data input of `node`; empty for unknown nodes.
    pub fn input_properties(&self, node: &str) -> Result<Vec<TensorProperties>> {
        let (size, list) = (
            self.api.input_properties_size,
            self.api.input_properties_list,
        );
        self.list("TF_GetInputPropertiesList", size, list, node)
    }

    /// Type, shape (and value, if asked) of each output of `node`; empty for unknown nodes.
    pub fn output_properties(&self, node: &str) -> Result<Vec<TensorProperties>> {
        let (size, list) = (
            self.api.output_properties_size,
            self.api.output_properties_list,
        );
        self.list("TF_GetOutputPropertiesList", size, list, node)
    }

    fn list(
        &self,
        what: &str,
        size_fn: Option<api::PropertiesSizeFn>,
        list_fn: Option<api::PropertiesListFn>,
        node: &str,
    ) -> Result<Vec<TensorProperties>> {
        let (Some(size_fn), Some(list_fn), Some(new_buffer), Some(delete_buffer)) = (
            size_fn,
            list_fn,
            self.api.new_buffer,
            self.api.delete_buffer,
        ) else {
            return Err(Error::unavailable_function(what));
        };
        let name = c_string(node)?;
        let status = Status::new(self.api)?;
        let mut count: c_int = 0;
        // SAFETY: live properties, name and status.
        unsafe { size_fn(self.raw, name.as_ptr(), &mut count, status.as_ptr()) };
        status.check(&format!("{what}Size"))?;
        let count = usize::try_from(count).unwrap_or(0);
        if count == 0 {
            return Ok(Vec::new());
        }
        // One fresh buffer per slot: TensorFlow refuses to fill a non-empty one.
        // SAFETY: TF_NewBuffer returns owned empty buffers, all deleted below.
        let mut buffers: Vec<*mut TfBuffer> = (0..count).map(|_| unsafe { new_buffer() }).collect();
        let result = if buffers.iter().any(|b| b.is_null()) {
            Err(Error::internal("TF_NewBuffer returned null"))
        } else {
            // SAFETY: `buffers` holds `count` live buffers.
            unsafe {
                list_fn(
                    self.raw,
                    name.as_ptr(),
                    buffers.as_mut_ptr(),
                    count as c_int,
                    status.as_ptr(),
                )
            };
            status.check(what).and_then(|()| {
                buffers
                    .iter()
                    .map(|&b| {
                        // SAFETY: a live buffer the host filled.
                        TensorProperties::decode(unsafe { buffer_bytes(b) }).map_err(|e| {
                            Error::internal(format!("{what} returned bad TensorProperties: {e}"))
                        })
                    })
                    .collect()
            })
        };
        for b in buffers.into_iter().filter(|b| !b.is_null()) {
            // SAFETY: from TF_NewBuffer, not used afterwards.
            unsafe { delete_buffer(b) };
        }
        result
    }
}

impl Drop for Properties<'_> {
    fn drop(&mut self) {
        if let Some(delete) = self.api.delete_properties {
            // SAFETY: made by TF_NewGraphProperties, not used afterwards.
            unsafe { delete(self.raw) };
        }
    }
}

fn c_string(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::invalid_argument(format!("{s:?} contains a NUL byte")))
}

pub(crate) use crate::abi::buffer_bytes;

//! The C functions behind [`crate::export_plugin!`]: registration, create, optimize, destroy.
//! Nothing here unwinds into the caller: every Rust panic is caught and reported as a status.

use std::any::Any;
use std::ffi::{c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use prost::Message;

use crate::abi::{
    ConfigsLayout, TfBuffer, TfGrapplerItem, TfStatus, TpOptimizerConfigs,
    TpOptimizerRegistrationParams, TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE,
    TP_OPTIMIZER_STRUCT_SIZE,
};
use crate::api::{self, set_status};
use crate::error::{Code, Error, Result};
use crate::item::{buffer_bytes, Item};
use crate::{Configs, Optimizer, Outcome};

/// What a caught panic said.
fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// `TF_InitGraph` for optimizer `O`.
///
/// Without `TF_SetStatus` in the process no error can be reported, so nothing is registered:
/// `params` is left untouched and the host refuses the plugin ("'device_type' field in
/// TP_OptimizerRegistrationParams must be set.").
///
/// # Safety
/// `params` is null or TensorFlow's registration params with valid `optimizer_configs` and
/// `optimizer` pointers (or null); `status` is null or a live `TF_Status`.
pub unsafe fn init_graph<O: Optimizer>(
    params: *mut TpOptimizerRegistrationParams,
    status: *mut TfStatus,
    device_type: &'static CStr,
    configs: Configs,
) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        if api::get().set_status.is_none() {
            return Err(None);
        }
        // SAFETY: per this function's contract.
        unsafe { register::<O>(params, device_type, configs) }.map_err(Some)
    }));
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(Some(e))) => {
            // SAFETY: `status` per the contract.
            unsafe { set_status(status, e.code as i32, &e.message) }
        }
        Ok(Err(None)) => {
            // Nothing to report errors with: say why on stderr, register nothing.
            eprintln!(
                "unbound-grappler-sdk: TF_SetStatus is not exported by this process (no \
                 TensorFlow or unbound host found); the optimizer is not registered"
            );
        }
        Err(panic) => {
            let message = format!("TF_InitGraph panicked: {}", panic_message(&*panic));
            // SAFETY: `status` per the contract.
            unsafe { set_status(status, Code::Internal as i32, &message) }
        }
    }
}

/// Fills the three structs.
///
/// # Safety
/// As [`init_graph`].
unsafe fn register<O: Optimizer>(
    params: *mut TpOptimizerRegistrationParams,
    device_type: &'static CStr,
    configs: Configs,
) -> Result<()> {
    // SAFETY: null or valid (contract).
    let Some(params) = (unsafe { params.as_mut() }) else {
        return Err(Error::invalid_argument(
            "TP_OptimizerRegistrationParams is null",
        ));
    };
    if params.optimizer.is_null() {
        return Err(Error::invalid_argument(
            "TP_OptimizerRegistrationParams.optimizer is null",
        ));
    }
    let cfg = params.optimizer_configs;
    if !cfg.is_null() {
        // SAFETY: the host allocated a TP_OptimizerConfigs of the size it pre-filled; a host
        // that pre-fills 88 (TensorFlow 2.5-2.9) gets the older layout, without the bfloat16
        // field, written field by field so nothing past 88 bytes is touched.
        unsafe { write_configs(cfg, &configs) };
    }
    let optimizer = params.optimizer;
    // SAFETY: non-null, host-allocated TP_Optimizer; written field by field.
    unsafe {
        (*optimizer).struct_size = TP_OPTIMIZER_STRUCT_SIZE;
        (*optimizer).ext = std::ptr::null_mut();
        (*optimizer).create_func = Some(create::<O>);
        (*optimizer).optimize_func = Some(optimize::<O>);
        (*optimizer).destroy_func = Some(destroy::<O>);
    }
    params.struct_size = TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE;
    params.device_type = device_type.as_ptr();
    Ok(())
}

/// # Safety
/// `cfg` points to a host-allocated configs struct of at least the size it pre-filled
/// (or of the current size when that is neither 88 nor 92).
unsafe fn write_configs(cfg: *mut TpOptimizerConfigs, configs: &Configs) {
    let raw = configs.to_raw();
    // SAFETY: see the contract; the toggles start at offset 16 in both layouts, and each
    // layout's words end at its struct_size, so no word past the pre-filled size is written.
    unsafe {
        let layout = ConfigsLayout::from_struct_size((*cfg).struct_size);
        let toggles = std::ptr::addr_of_mut!((*cfg).toggles).cast::<u32>();
        for (field, value) in raw.into_iter().enumerate() {
            if let Some(word) = layout.word(field) {
                toggles.add(word).write(value);
            }
        }
        (*cfg).ext = std::ptr::null_mut();
        (*cfg).struct_size = layout.struct_size();
    }
}

/// `create_func`: a boxed `O`, or null if `O::new` panicked (then `optimize_func` reports it).
pub extern "C" fn create<O: Optimizer>() -> *mut c_void {
    match catch_unwind(O::new) {
        Ok(optimizer) => Box::into_raw(Box::new(optimizer)).cast(),
        Err(_) => std::ptr::null_mut(),
    }
}

/// `destroy_func`: drops what `create` made; null is a no-op.
///
/// # Safety
/// `optimizer` is null or came from `create::<O>` and is not used afterwards.
pub unsafe extern "C" fn destroy<O: Optimizer>(optimizer: *mut c_void) {
    if optimizer.is_null() {
        return;
    }
    // SAFETY: per the contract, a `Box<O>` made by `create::<O>`.
    let boxed = unsafe { Box::from_raw(optimizer.cast::<O>()) };
    // A panicking Drop must not unwind into TensorFlow; there is no status to report it.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(boxed)));
}

/// `optimize_func`.
///
/// # Safety
/// TensorFlow's arguments: `optimizer` from `create::<O>` (or null), a live input buffer and
/// item, an empty output buffer and a live status.
pub unsafe extern "C" fn optimize<O: Optimizer>(
    optimizer: *mut c_void,
    graph_in: *const TfBuffer,
    item: *const TfGrapplerItem,
    graph_out: *mut TfBuffer,
    status: *mut TfStatus,
) {
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the arguments, per this function's contract.
        unsafe { run::<O>(optimizer, graph_in, item, graph_out) }
    }));
    let (code, message) = match result {
        Ok(Ok(())) => (Code::Ok, String::new()),
        Ok(Err(e)) => (e.code, e.message),
        Err(panic) => (
            Code::Internal,
            format!("the optimizer panicked: {}", panic_message(&*panic)),
        ),
    };
    // SAFETY: a live status (contract).
    unsafe { set_status(status, code as i32, &message) };
}

/// # Safety
/// As [`optimize`].
unsafe fn run<O: Optimizer>(
    optimizer: *mut c_void,
    graph_in: *const TfBuffer,
    item: *const TfGrapplerItem,
    graph_out: *mut TfBuffer,
) -> Result<()> {
    // SAFETY: from `create::<O>` (contract), used by this call only.
    let Some(optimizer) = (unsafe { optimizer.cast::<O>().as_mut() }) else {
        return Err(Error::internal(
            "the optimizer could not be created (O::new panicked)",
        ));
    };
    if graph_in.is_null() || graph_out.is_null() {
        return Err(Error::invalid_argument("a graph buffer pointer is null"));
    }
    // SAFETY: live input buffer (contract).
    let bytes = unsafe { buffer_bytes(graph_in) };
    // SAFETY: item and buffer live for this call; `item` is dropped before returning.
    let item = unsafe { Item::from_raw(item, graph_in) };
    match optimizer.optimize_serialized(bytes, &item)? {
        Outcome::Unchanged => Err(Error::new(Code::Aborted, "did nothing")),
        Outcome::Changed(graph) => {
            // SAFETY: non-null output buffer (checked), owned by the host.
            unsafe { write_output(graph_out, &graph.encode_to_vec()) }
        }
    }
}

/// Frees output buffers: TensorFlow calls it through `TF_DeleteBuffer`.
unsafe extern "C" fn free_output(data: *mut c_void, _length: usize) {
    // SAFETY: `data` came from `libc::malloc` in `write_output`.
    unsafe { libc::free(data) }
}

/// # Safety
/// `out` is a live `TF_Buffer` the caller owns.
unsafe fn write_output(out: *mut TfBuffer, bytes: &[u8]) -> Result<()> {
    // SAFETY: malloc of at least one byte; checked for null.
    let data = unsafe { libc::malloc(bytes.len().max(1)) };
    if data.is_null() {
        return Err(Error::new(
            Code::ResourceExhausted,
            format!("cannot allocate {} bytes for the output graph", bytes.len()),
        ));
    }
    // SAFETY: `data` holds at least `bytes.len()` bytes and does not overlap `bytes`; `out` is
    // live (contract).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), data.cast::<u8>(), bytes.len());
        (*out).data = data;
        (*out).length = bytes.len();
        (*out).data_deallocator = Some(free_output);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{TP_OPTIMIZER_CONFIGS_STRUCT_SIZE, TP_OPTIMIZER_CONFIGS_STRUCT_SIZE_V1};
    use crate::TriState;

    fn written(prefilled: usize) -> TpOptimizerConfigs {
        let mut cfg = TpOptimizerConfigs {
            struct_size: prefilled,
            ext: std::ptr::null_mut(),
            toggles: [7; 19],
        };
        let configs = Configs {
            auto_mixed_precision_mkl: TriState::Off,
            scoped_allocator_optimization: TriState::On,
            ..Configs::DEFAULT
        };
        // SAFETY: a live struct of the current (largest) layout.
        unsafe { write_configs(&mut cfg, &configs) };
        cfg
    }

    #[test]
    fn current_layout_fills_all_nineteen() {
        let cfg = written(TP_OPTIMIZER_CONFIGS_STRUCT_SIZE);
        assert_eq!(cfg.struct_size, 92);
        assert_eq!(cfg.toggles[10], 1);
        assert_eq!(cfg.toggles[18], 2);
        assert_eq!(cfg.toggles.iter().filter(|&&v| v == 0).count(), 17);
    }

    #[test]
    fn old_layout_skips_the_bfloat16_field_and_stops_at_88_bytes() {
        let cfg = written(TP_OPTIMIZER_CONFIGS_STRUCT_SIZE_V1);
        assert_eq!(cfg.struct_size, 88);
        // auto_mixed_precision_mkl is at index 9 of the old layout, the last field at 17.
        assert_eq!(cfg.toggles[9], 1);
        assert_eq!(cfg.toggles[17], 2);
        // Byte 88 onwards (the 19th word) is not written.
        assert_eq!(cfg.toggles[18], 7);
    }
}

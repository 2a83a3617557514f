//! The C ABI of TensorFlow's pluggable graph optimizer (`tensorflow/c/experimental/grappler/
//! grappler.h`, TensorFlow 2.10 and later), laid out byte for byte.
//!
//! Tri-state fields are plain `u32`, not a Rust enum: a plugin can write any value, and reading
//! an out-of-range value through an enum type would be undefined behaviour.

use std::ffi::{c_char, c_void};

/// `TF_TriState_Default`: leave the built-in optimizer as the user configured it.
pub const TRI_STATE_DEFAULT: u32 = 0;
/// `TF_TriState_Off`: turn the built-in optimizer off.
pub const TRI_STATE_OFF: u32 = 1;
/// `TF_TriState_On`.
pub const TRI_STATE_ON: u32 = 2;

/// `GO_MAJOR`, `GO_MINOR`, `GO_PATCH`: the version TensorFlow writes into the registration
/// params before calling `TF_InitGraph`.
pub const GO_VERSION: (i32, i32, i32) = (0, 0, 1);

/// `TF_Buffer`: 24 bytes, `data`, `length`, `data_deallocator`.
#[repr(C)]
#[derive(Debug)]
pub struct TfBuffer {
    /// The bytes.
    pub data: *const c_void,
    /// Their length.
    pub length: usize,
    /// Frees `data`; called by `TF_DeleteBuffer`. Null when nothing needs freeing.
    pub data_deallocator: Option<unsafe extern "C" fn(data: *mut c_void, length: usize)>,
}

/// `TP_OptimizerConfigs` as TensorFlow 2.10+ lays it out (with
/// `auto_mixed_precision_onednn_bfloat16`). The host allocates this layout (96 bytes) whatever
/// the plugin was built against, so a plugin built for the older 88-byte layout writes inside it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TpOptimizerConfigs {
    /// Size the plugin says it filled in: 92 (current layout) or 88 (TF 2.5-2.9 layout).
    pub struct_size: usize,
    /// Reserved.
    pub ext: *mut c_void,
    /// Tri-states from `disable_model_pruning` to `scoped_allocator_optimization` (19 of them in
    /// the current layout, 18 in the old one), as raw words; see [`crate::configs`].
    pub toggles: [u32; 19],
    /// Padding to `sizeof` 96.
    pub _pad: u32,
}

/// `TP_OPTIMIZER_CONFIGS_STRUCT_SIZE` of TensorFlow 2.10+ (end of `scoped_allocator_optimization`).
pub const TP_OPTIMIZER_CONFIGS_STRUCT_SIZE: usize = 92;
/// The same macro in TensorFlow 2.5-2.9, before `auto_mixed_precision_onednn_bfloat16`.
pub const TP_OPTIMIZER_CONFIGS_STRUCT_SIZE_V1: usize = 88;

/// The optimize function: `(optimizer, graph_in, item, graph_out, status)`.
pub type OptimizeFn = unsafe extern "C" fn(
    optimizer: *mut c_void,
    graph_in: *const TfBuffer,
    item: *const c_void,
    graph_out: *mut TfBuffer,
    status: *mut c_void,
);

/// `TP_Optimizer`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TpOptimizer {
    /// Size the plugin filled in.
    pub struct_size: usize,
    /// Reserved.
    pub ext: *mut c_void,
    /// Optional: creates the optimizer's state, passed to `optimize_func` and `destroy_func`.
    pub create_func: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Required: optimizes one graph.
    pub optimize_func: Option<OptimizeFn>,
    /// Optional: frees what `create_func` made.
    pub destroy_func: Option<unsafe extern "C" fn(*mut c_void)>,
}

/// `TP_OPTIMIZER_STRUCT_SIZE` (end of `destroy_func`).
pub const TP_OPTIMIZER_STRUCT_SIZE: usize = 40;

/// `TP_OptimizerRegistrationParams`.
#[repr(C)]
#[derive(Debug)]
pub struct TpOptimizerRegistrationParams {
    /// Size the plugin filled in.
    pub struct_size: usize,
    /// Reserved.
    pub ext: *mut c_void,
    /// Set by the host to [`GO_VERSION`]; TensorFlow never reads them back.
    pub major_version: i32,
    /// See `major_version`.
    pub minor_version: i32,
    /// See `major_version`.
    pub patch_version: i32,
    /// The device type the optimizer is for (a static string of the plugin).
    pub device_type: *const c_char,
    /// Host-allocated; the plugin fills it in.
    pub optimizer_configs: *mut TpOptimizerConfigs,
    /// Host-allocated; the plugin fills it in.
    pub optimizer: *mut TpOptimizer,
}

/// `TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE` (end of `optimizer`).
pub const TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE: usize = 56;

/// `TF_InitGraph`'s type.
pub type InitGraphFn =
    unsafe extern "C" fn(params: *mut TpOptimizerRegistrationParams, status: *mut c_void);

/// The name of the plugin's entry point.
pub const INIT_GRAPH_SYMBOL: &[u8] = b"TF_InitGraph";

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_grappler_h() {
        assert_eq!(size_of::<TfBuffer>(), 24);
        assert_eq!(size_of::<TpOptimizerConfigs>(), 96);
        assert_eq!(offset_of!(TpOptimizerConfigs, toggles), 16);
        assert_eq!(size_of::<TpOptimizer>(), TP_OPTIMIZER_STRUCT_SIZE);
        assert_eq!(offset_of!(TpOptimizer, optimize_func), 24);
        assert_eq!(
            size_of::<TpOptimizerRegistrationParams>(),
            TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE
        );
        assert_eq!(offset_of!(TpOptimizerRegistrationParams, major_version), 16);
        assert_eq!(offset_of!(TpOptimizerRegistrationParams, device_type), 32);
        assert_eq!(
            offset_of!(TpOptimizerRegistrationParams, optimizer_configs),
            40
        );
        assert_eq!(offset_of!(TpOptimizerRegistrationParams, optimizer), 48);
    }
}

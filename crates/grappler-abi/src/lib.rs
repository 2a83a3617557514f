//! The C ABI of TensorFlow's pluggable graph optimizer (`tensorflow/c/experimental/grappler/
//! grappler.h`, TensorFlow 2.10 and later), laid out byte for byte.
//!
//! Only what a plugin writes or passes on is declared; the handles TensorFlow owns
//! (`TF_Status`, `TF_GrapplerItem`, `TF_GraphProperties`, `TF_FunctionLibraryDefinition`) are
//! opaque. With them, the `TF_Code` values ([`code`]), [`buffer_bytes`] (the reader of a
//! `TF_Buffer`), and the plugin configs: their field names ([`CONFIG_FIELDS`], from
//! [`config_fields!`]), [`TriState`] and the two [`ConfigsLayout`]s. Shared by the host (`unbound-grappler`) and the SDK (`unbound-grappler-sdk`), so
//! these facts are declared once.
//!
//! Tri-state fields are plain `u32` in the structs, not a Rust enum: a plugin can write any
//! value, and reading an out-of-range value through an enum type would be undefined behaviour.
//! [`TriState`] is what such a word means, with room for the out-of-range ones.

use std::ffi::{c_char, c_void};

/// TensorFlow's status codes (`TF_Code`, a C enum).
pub mod code {
    /// Success.
    pub const OK: i32 = 0;
    /// `TF_CANCELLED`.
    pub const CANCELLED: i32 = 1;
    /// `TF_UNKNOWN`.
    pub const UNKNOWN: i32 = 2;
    /// `TF_INVALID_ARGUMENT`.
    pub const INVALID_ARGUMENT: i32 = 3;
    /// `TF_DEADLINE_EXCEEDED`.
    pub const DEADLINE_EXCEEDED: i32 = 4;
    /// `TF_NOT_FOUND`.
    pub const NOT_FOUND: i32 = 5;
    /// `TF_ALREADY_EXISTS`.
    pub const ALREADY_EXISTS: i32 = 6;
    /// `TF_PERMISSION_DENIED`.
    pub const PERMISSION_DENIED: i32 = 7;
    /// `TF_RESOURCE_EXHAUSTED`.
    pub const RESOURCE_EXHAUSTED: i32 = 8;
    /// `TF_FAILED_PRECONDITION`.
    pub const FAILED_PRECONDITION: i32 = 9;
    /// `TF_ABORTED`: for an optimizer, "did nothing".
    pub const ABORTED: i32 = 10;
    /// `TF_OUT_OF_RANGE`.
    pub const OUT_OF_RANGE: i32 = 11;
    /// `TF_UNIMPLEMENTED`.
    pub const UNIMPLEMENTED: i32 = 12;
    /// `TF_INTERNAL`.
    pub const INTERNAL: i32 = 13;
    /// `TF_UNAVAILABLE`.
    pub const UNAVAILABLE: i32 = 14;
    /// `TF_DATA_LOSS`.
    pub const DATA_LOSS: i32 = 15;
    /// `TF_UNAUTHENTICATED`.
    pub const UNAUTHENTICATED: i32 = 16;

    /// The name TensorFlow prints for a code (`INVALID_ARGUMENT`, ...).
    pub fn name(code: i32) -> String {
        let known = [
            "OK",
            "CANCELLED",
            "UNKNOWN",
            "INVALID_ARGUMENT",
            "DEADLINE_EXCEEDED",
            "NOT_FOUND",
            "ALREADY_EXISTS",
            "PERMISSION_DENIED",
            "RESOURCE_EXHAUSTED",
            "FAILED_PRECONDITION",
            "ABORTED",
            "OUT_OF_RANGE",
            "UNIMPLEMENTED",
            "INTERNAL",
            "UNAVAILABLE",
            "DATA_LOSS",
            "UNAUTHENTICATED",
        ];
        usize::try_from(code)
            .ok()
            .and_then(|i| known.get(i))
            .map(|s| s.to_string())
            .unwrap_or_else(|| format!("code {code}"))
    }
}

/// `TF_Status`: opaque, created and read only through the host's functions.
#[repr(C)]
pub struct TfStatus {
    _opaque: [u8; 0],
}

/// `TF_GrapplerItem`: opaque (a `tensorflow::grappler::GrapplerItem*` in TensorFlow).
#[repr(C)]
pub struct TfGrapplerItem {
    _opaque: [u8; 0],
}

/// `TF_GraphProperties`: opaque.
#[repr(C)]
pub struct TfGraphProperties {
    _opaque: [u8; 0],
}

/// `TF_FunctionLibraryDefinition`: opaque.
#[repr(C)]
pub struct TfFunctionLibraryDefinition {
    _opaque: [u8; 0],
}

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

/// The bytes a `TF_Buffer` holds: an empty slice for a null buffer, null data or length 0.
///
/// # Safety
/// `buffer` is null or points to a live buffer whose `data` holds `length` readable bytes,
/// which stay valid and unchanged for `'a`.
pub unsafe fn buffer_bytes<'a>(buffer: *const TfBuffer) -> &'a [u8] {
    // SAFETY: null or a live buffer, per the function's contract; only read.
    match unsafe { buffer.as_ref() } {
        // SAFETY: `data` is non-null (checked) and holds `length` readable bytes that stay
        // valid and unchanged for 'a (contract).
        Some(b) if !b.data.is_null() && b.length > 0 => unsafe {
            std::slice::from_raw_parts(b.data.cast::<u8>(), b.length)
        },
        _ => &[],
    }
}

/// `TP_OptimizerConfigs`, TensorFlow 2.10+ layout: `struct_size`, `ext`, then 19 `TF_TriState`s
/// (4-byte C enums) from `disable_model_pruning` to `scoped_allocator_optimization`.
#[repr(C)]
#[derive(Debug)]
pub struct TpOptimizerConfigs {
    /// [`TP_OPTIMIZER_CONFIGS_STRUCT_SIZE`] (or 88 for a TensorFlow 2.5-2.9 host).
    pub struct_size: usize,
    /// Reserved.
    pub ext: *mut c_void,
    /// The tri-states, from `disable_model_pruning` to `scoped_allocator_optimization`.
    pub toggles: [u32; CONFIG_FIELD_COUNT],
}

/// `TP_OPTIMIZER_CONFIGS_STRUCT_SIZE`: the end of `scoped_allocator_optimization`.
pub const TP_OPTIMIZER_CONFIGS_STRUCT_SIZE: usize = 92;
/// The same macro in TensorFlow 2.5-2.9, before `auto_mixed_precision_onednn_bfloat16` (field 9)
/// was inserted.
pub const TP_OPTIMIZER_CONFIGS_STRUCT_SIZE_V1: usize = 88;
/// Index of `auto_mixed_precision_onednn_bfloat16` among the tri-states (absent before 2.10).
pub const ONEDNN_BFLOAT16_INDEX: usize = 9;

/// `optimize_func`: `(optimizer, graph_in, item, graph_out, status)`.
pub type OptimizeFn = unsafe extern "C" fn(
    optimizer: *mut c_void,
    graph_in: *const TfBuffer,
    item: *const TfGrapplerItem,
    graph_out: *mut TfBuffer,
    status: *mut TfStatus,
);

/// `TP_Optimizer`.
#[repr(C)]
#[derive(Debug)]
pub struct TpOptimizer {
    /// [`TP_OPTIMIZER_STRUCT_SIZE`].
    pub struct_size: usize,
    /// Reserved.
    pub ext: *mut c_void,
    /// Creates the optimizer's state.
    pub create_func: Option<unsafe extern "C" fn() -> *mut c_void>,
    /// Optimizes one graph.
    pub optimize_func: Option<OptimizeFn>,
    /// Frees what `create_func` made.
    pub destroy_func: Option<unsafe extern "C" fn(*mut c_void)>,
}

/// `TP_OPTIMIZER_STRUCT_SIZE`.
pub const TP_OPTIMIZER_STRUCT_SIZE: usize = 40;

/// `TP_OptimizerRegistrationParams`.
#[repr(C)]
#[derive(Debug)]
pub struct TpOptimizerRegistrationParams {
    /// [`TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE`].
    pub struct_size: usize,
    /// Reserved.
    pub ext: *mut c_void,
    /// Set by the host (0.0.1); never read back by TensorFlow.
    pub major_version: i32,
    /// See `major_version`.
    pub minor_version: i32,
    /// See `major_version`.
    pub patch_version: i32,
    /// The device type the optimizer is for; TensorFlow keeps the pointer, so it is static.
    pub device_type: *const c_char,
    /// Host-allocated; the plugin fills it in.
    pub optimizer_configs: *mut TpOptimizerConfigs,
    /// Host-allocated; the plugin fills it in.
    pub optimizer: *mut TpOptimizer,
}

/// `TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE`.
pub const TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE: usize = 56;

/// `TF_InitGraph`'s type: the plugin's entry point.
pub type InitGraphFn =
    unsafe extern "C" fn(params: *mut TpOptimizerRegistrationParams, status: *mut TfStatus);

/// The name of the plugin's entry point (not the RFC's `TF_InitGraphPlugin`).
pub const INIT_GRAPH_SYMBOL: &[u8] = b"TF_InitGraph";

/// `GO_MAJOR`, `GO_MINOR`, `GO_PATCH`: the version TensorFlow writes into the registration
/// params before calling `TF_InitGraph`.
pub const GO_VERSION: (i32, i32, i32) = (0, 0, 1);

/// `TF_TriState_Default`: leave the built-in optimizer as the user configured it.
pub const TRI_STATE_DEFAULT: u32 = 0;
/// `TF_TriState_Off`: turn the built-in optimizer off.
pub const TRI_STATE_OFF: u32 = 1;
/// `TF_TriState_On`.
pub const TRI_STATE_ON: u32 = 2;

/// A plugin's wish for one of TensorFlow's built-in passes: one `TF_TriState` word of
/// `TP_OptimizerConfigs`, as the host reads it and the SDK writes it.
///
/// TensorFlow only honours `Off`: `Default` and `On` both leave the pass as the user configured
/// it (except `disable_model_pruning`, where `On` disables pruning). A plugin can write any
/// word, so a value outside the C enum is kept as [`TriState::Invalid`] rather than being read
/// through an enum type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TriState {
    /// `TF_TriState_Default`.
    #[default]
    Default,
    /// `TF_TriState_Off`.
    Off,
    /// `TF_TriState_On`.
    On,
    /// Any other word; TensorFlow treats it like Default/On (anything but Off).
    Invalid(u32),
}

impl TriState {
    /// The value of a `TF_TriState` word.
    pub const fn from_raw(raw: u32) -> Self {
        match raw {
            TRI_STATE_DEFAULT => TriState::Default,
            TRI_STATE_OFF => TriState::Off,
            TRI_STATE_ON => TriState::On,
            other => TriState::Invalid(other),
        }
    }

    /// The `TF_TriState` word for this value (the inverse of [`TriState::from_raw`]).
    pub const fn to_raw(self) -> u32 {
        match self {
            TriState::Default => TRI_STATE_DEFAULT,
            TriState::Off => TRI_STATE_OFF,
            TriState::On => TRI_STATE_ON,
            TriState::Invalid(other) => other,
        }
    }
}

/// Calls the macro named `$callback` with the names of `TP_OptimizerConfigs`' tri-state
/// fields, in struct order (TensorFlow 2.10+ layout), as comma-separated identifiers: the one
/// place these names are written. [`CONFIG_FIELDS`] is made from it, and so is the SDK's
/// `Configs` struct.
///
/// ```
/// macro_rules! count { ($($field:ident),*) => { [$(stringify!($field)),*].len() } }
/// assert_eq!(unbound_grappler_abi::config_fields!(count), 19);
/// ```
#[macro_export]
macro_rules! config_fields {
    ($callback:ident) => {
        $callback! {
            disable_model_pruning,
            implementation_selector,
            function_optimization,
            common_subgraph_elimination,
            arithmetic_optimization,
            debug_stripper,
            constant_folding,
            shape_optimization,
            auto_mixed_precision,
            auto_mixed_precision_onednn_bfloat16,
            auto_mixed_precision_mkl,
            pin_to_host_optimization,
            layout_optimizer,
            remapping,
            loop_optimization,
            dependency_optimization,
            auto_parallel,
            memory_optimization,
            scoped_allocator_optimization
        }
    };
}

/// How many tri-state fields `TP_OptimizerConfigs` has (TensorFlow 2.10+).
pub const CONFIG_FIELD_COUNT: usize = 19;

macro_rules! field_names {
    ($($field:ident),*) => {
        [$(stringify!($field)),*]
    };
}

/// The names of `TP_OptimizerConfigs`' tri-state fields, in struct order (TensorFlow 2.10+);
/// the index of a name is its word in [`TpOptimizerConfigs::toggles`] in the current layout.
pub const CONFIG_FIELDS: [&str; CONFIG_FIELD_COUNT] = config_fields!(field_names);

/// Which `TP_OptimizerConfigs` layout a `struct_size` selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConfigsLayout {
    /// TensorFlow 2.10+: 92 bytes, with `auto_mixed_precision_onednn_bfloat16`.
    Current,
    /// TensorFlow 2.5-2.9: 88 bytes, without it; later fields sit 4 bytes earlier.
    Before2_10,
}

impl ConfigsLayout {
    /// The layout a `struct_size` selects: 88 is TensorFlow 2.5-2.9's, anything else the
    /// current one.
    pub const fn from_struct_size(struct_size: usize) -> Self {
        if struct_size == TP_OPTIMIZER_CONFIGS_STRUCT_SIZE_V1 {
            ConfigsLayout::Before2_10
        } else {
            ConfigsLayout::Current
        }
    }

    /// The `struct_size` of this layout.
    pub const fn struct_size(self) -> usize {
        match self {
            ConfigsLayout::Current => TP_OPTIMIZER_CONFIGS_STRUCT_SIZE,
            ConfigsLayout::Before2_10 => TP_OPTIMIZER_CONFIGS_STRUCT_SIZE_V1,
        }
    }

    /// The word of [`TpOptimizerConfigs::toggles`] that holds field `field` (an index into
    /// [`CONFIG_FIELDS`]) in this layout; None for the field the old layout lacks and for
    /// indices past the last field.
    pub const fn word(self, field: usize) -> Option<usize> {
        if field >= CONFIG_FIELD_COUNT {
            return None;
        }
        match self {
            ConfigsLayout::Current => Some(field),
            ConfigsLayout::Before2_10 if field < ONEDNN_BFLOAT16_INDEX => Some(field),
            ConfigsLayout::Before2_10 if field == ONEDNN_BFLOAT16_INDEX => None,
            ConfigsLayout::Before2_10 => Some(field - 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_grappler_h() {
        assert_eq!(size_of::<TfBuffer>(), 24);
        assert_eq!(size_of::<TpOptimizerConfigs>(), 96);
        assert_eq!(offset_of!(TpOptimizerConfigs, toggles), 16);
        assert_eq!(offset_of!(TpOptimizerConfigs, toggles) + 19 * 4, 92);
        assert_eq!(size_of::<TpOptimizer>(), TP_OPTIMIZER_STRUCT_SIZE);
        assert_eq!(offset_of!(TpOptimizer, optimize_func), 24);
        assert_eq!(
            size_of::<TpOptimizerRegistrationParams>(),
            TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE
        );
        assert_eq!(offset_of!(TpOptimizerRegistrationParams, device_type), 32);
        assert_eq!(
            offset_of!(TpOptimizerRegistrationParams, optimizer_configs),
            40
        );
        assert_eq!(offset_of!(TpOptimizerRegistrationParams, optimizer), 48);
    }

    #[test]
    fn config_names_and_layouts_agree_with_grappler_h() {
        assert_eq!(CONFIG_FIELDS[0], "disable_model_pruning");
        assert_eq!(
            CONFIG_FIELDS[ONEDNN_BFLOAT16_INDEX],
            "auto_mixed_precision_onednn_bfloat16"
        );
        assert_eq!(CONFIG_FIELDS[13], "remapping");
        assert_eq!(
            CONFIG_FIELDS[CONFIG_FIELD_COUNT - 1],
            "scoped_allocator_optimization"
        );
        // The old layout: every field but one, each word 4 bytes, ending at its struct_size.
        let old = ConfigsLayout::Before2_10;
        let words: Vec<usize> = (0..CONFIG_FIELD_COUNT)
            .filter_map(|f| old.word(f))
            .collect();
        assert_eq!(words, (0..CONFIG_FIELD_COUNT - 1).collect::<Vec<_>>());
        assert_eq!(16 + 4 * words.len(), old.struct_size());
        assert_eq!(old.word(13), Some(12));
        let current = ConfigsLayout::Current;
        assert_eq!(16 + 4 * CONFIG_FIELD_COUNT, current.struct_size());
        assert_eq!(current.word(CONFIG_FIELD_COUNT), None);
        assert_eq!(ConfigsLayout::from_struct_size(88), old);
        assert_eq!(ConfigsLayout::from_struct_size(92), current);
        assert_eq!(ConfigsLayout::from_struct_size(1000), current);
    }

    #[test]
    fn tri_states_round_trip_every_word() {
        for raw in [0, 1, 2, 3, 7, u32::MAX] {
            assert_eq!(TriState::from_raw(raw).to_raw(), raw);
        }
        assert_eq!(TriState::from_raw(TRI_STATE_OFF), TriState::Off);
        assert_eq!(TriState::from_raw(9), TriState::Invalid(9));
        assert_eq!(TriState::default(), TriState::Default);
    }
}

//! Write TensorFlow graph-optimizer plugins in safe Rust.
//!
//! A plugin is a shared library exporting `TF_InitGraph` (TensorFlow's pluggable Grappler C API,
//! TensorFlow 2.10+). Implement [`Optimizer`] over a typed [`GraphDef`] and export it with
//! [`export_plugin!`]:
//!
//! ```
//! use unbound_grappler_sdk::{export_plugin, Item, Optimizer, Outcome, Result};
//! use unbound_proto::tensorflow::GraphDef;
//!
//! struct Nothing;
//!
//! impl Optimizer for Nothing {
//!     fn new() -> Self {
//!         Nothing
//!     }
//!     fn optimize(&mut self, _graph: GraphDef, _item: &Item<'_>) -> Result<Outcome> {
//!         Ok(Outcome::Unchanged)
//!     }
//! }
//!
//! export_plugin!(Nothing, device_type = "CPU", configs = { remapping: Off });
//! ```
//!
//! with `crate-type = ["cdylib"]` (add `"rlib"` to test it from other crates). TensorFlow's
//! Python package loads every shared object in a `tensorflow-plugins` directory under a
//! `site-packages` directory of `sys.path`; `unbound optimize --plugin` loads it too.
//!
//! # Linking
//!
//! The plugin links no TensorFlow library and leaves no `TF_*` symbol undefined: the functions
//! it calls (`TF_SetStatus`, `TF_NewBuffer`, the util API) are looked up at run time in the
//! process, first in the global scope (the `unbound` host exports them from its executable),
//! then in the already loaded `libtensorflow_framework.so.2`, `libtensorflow_cc.so.2` or
//! `_pywrap_tensorflow_internal.so` (TensorFlow's Python package loads them `RTLD_LOCAL`). If
//! `TF_SetStatus` is not found, `TF_InitGraph` cannot report an error, so it registers nothing
//! and returns: the host then refuses the plugin with "'device_type' field in
//! TP_OptimizerRegistrationParams must be set." (TensorFlow aborts the process on that, as on any
//! plugin initialization error).
//!
//! # Behaviour at the boundary
//!
//! - The input buffer is decoded into a [`GraphDef`] (bad bytes: `INVALID_ARGUMENT`). Fields
//!   unknown to the schema are not kept. An optimizer that overrides
//!   [`Optimizer::optimize_serialized`] gets the bytes first and decides whether to decode.
//! - [`Outcome::Changed`] is encoded into a `malloc`ed buffer freed with `free` by the
//!   deallocator set on it; [`Outcome::Unchanged`] reports `ABORTED` ("did nothing"), which
//!   TensorFlow and the unbound host take as "no change".
//! - An [`Error`] becomes the status; a panic becomes `INTERNAL` with the panic's message. No
//!   panic unwinds into the host.
//! - One optimizer value is made per `create_func` call (TensorFlow: once per graph or function
//!   optimized) and dropped by `destroy_func`.
//!
//! # Testing
//!
//! With the `testing` feature, `testing` is a fake host (the `TF_*` functions a plugin calls)
//! for loading and calling a built plugin in a test, and `test_graphs` builds small graphs.
//! `examples/sdk_probe.rs` is a plugin that records what a host answers through this crate's
//! API; `interop/grappler/sdk_probe_check.sh` compares TensorFlow's answers with unbound's.

pub use unbound_grappler_abi as abi;
mod api;
mod configs;
mod error;
#[doc(hidden)]
pub mod export;
mod item;
pub mod serialized;
mod status;
#[cfg(feature = "testing")]
pub mod test_graphs;
#[cfg(feature = "testing")]
pub mod testing;

pub use configs::{Configs, TriState};
pub use error::{Code, Error, Result};
pub use item::{Item, Properties, PropertiesOptions};
pub use unbound_proto::tensorflow::op_info::TensorProperties;
pub use unbound_proto::tensorflow::GraphDef;

/// A graph optimizer. One value is created per graph optimized ([`Optimizer::new`]).
pub trait Optimizer: Send + 'static {
    /// A fresh optimizer.
    fn new() -> Self
    where
        Self: Sized;

    /// Optimizes `graph`; `item` tells what must be preserved and can infer shapes.
    fn optimize(&mut self, graph: GraphDef, item: &Item<'_>) -> Result<Outcome>;

    /// What the exported `optimize_func` calls, with the graph as the host serialized it.
    /// The default decodes it (bad bytes: `INVALID_ARGUMENT`) and calls
    /// [`Optimizer::optimize`]. Override it to look at the bytes first
    /// ([`serialized::node_ops`]) and return [`Outcome::Unchanged`] without decoding a graph
    /// that has nothing for this optimizer: on a graph of millions of nodes the decoded form
    /// costs several times the bytes in memory.
    fn optimize_serialized(&mut self, graph: &[u8], item: &Item<'_>) -> Result<Outcome> {
        self.optimize(serialized::decode(graph)?, item)
    }
}

/// What an optimization did.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // made once per optimized graph; a Box would only add noise
pub enum Outcome {
    /// The graph was rewritten into this one.
    Changed(GraphDef),
    /// Nothing to do: the host keeps the input graph.
    Unchanged,
}

/// Exports `TF_InitGraph`, registering an [`Optimizer`] for a device type with the built-in
/// passes' [`Configs`]:
///
/// ```ignore
/// export_plugin!(MyOptimizer, device_type = "CPU");
/// export_plugin!(MyOptimizer, device_type = "CPU", configs = { remapping: Off, constant_folding: Off });
/// ```
///
/// `configs` names [`Configs`] fields with a [`TriState`] variant (`Default`, `Off`, `On`);
/// unnamed ones stay `Default`. Use it once per shared library.
#[macro_export]
macro_rules! export_plugin {
    ($optimizer:ty, device_type = $device:literal
        $(, configs = { $($field:ident : $state:ident),* $(,)? })? $(,)?) => {
        /// TensorFlow's entry point for graph-optimizer plugins (made by
        /// `unbound_grappler_sdk::export_plugin!`).
        ///
        /// # Safety
        /// Called by TensorFlow (or another host) with its registration params and status.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn TF_InitGraph(
            params: *mut $crate::abi::TpOptimizerRegistrationParams,
            status: *mut $crate::abi::TfStatus,
        ) {
            const DEVICE: &::core::ffi::CStr =
                match ::core::ffi::CStr::from_bytes_with_nul(concat!($device, "\0").as_bytes()) {
                    Ok(device) => device,
                    Err(_) => panic!("device_type must not contain NUL"),
                };
            const CONFIGS: $crate::Configs = $crate::Configs {
                $($($field: $crate::TriState::$state,)*)?
                ..$crate::Configs::DEFAULT
            };
            // SAFETY: TensorFlow's arguments, passed on as they came.
            unsafe { $crate::export::init_graph::<$optimizer>(params, status, DEVICE, CONFIGS) }
        }
    };
}

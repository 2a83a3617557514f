//! Loading one plugin: `dlopen`, `TF_InitGraph` with the registration structs pre-filled as
//! TensorFlow fills them (`InitGraphPlugin` in `grappler.cc`), and TensorFlow's validation with
//! its messages.

use std::ffi::{c_void, CStr};
use std::path::{Path, PathBuf};

use crate::abi::{
    InitGraphFn, TfBuffer, TpOptimizer, TpOptimizerConfigs, TpOptimizerRegistrationParams,
    CONFIG_FIELD_COUNT, GO_VERSION, INIT_GRAPH_SYMBOL, TP_OPTIMIZER_CONFIGS_STRUCT_SIZE,
    TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE, TP_OPTIMIZER_STRUCT_SIZE,
};
use crate::buffer::buffer_bytes;
use crate::configs::PluginConfigs;
use crate::error::{GrapplerError, PluginFault};
use crate::status::{code, TfStatus};

/// What a plugin registered.
#[derive(Debug, Clone)]
pub struct Registration {
    /// The device type its optimizer is for.
    pub device_type: String,
    /// Its recommendations for the built-in optimizers.
    pub configs: PluginConfigs,
}

/// A loaded, registered plugin. The library stays loaded as long as this value lives.
#[derive(Debug)]
pub struct LoadedPlugin {
    /// The file it was loaded from.
    pub path: PathBuf,
    /// What it registered.
    pub registration: Registration,
    optimizer: TpOptimizer,
    _library: libloading::os::unix::Library,
}

/// Room after each struct the plugin fills in: a plugin built against a newer header may write
/// fields we do not know; they land here instead of on the stack or heap.
#[repr(C)]
struct Padded<T> {
    value: T,
    spare: [u8; 256],
}

impl<T> Padded<T> {
    fn new(value: T) -> Box<Self> {
        Box::new(Self {
            value,
            spare: [0; 256],
        })
    }
}

/// Loads the plugin at `path` and registers it.
pub fn load_plugin(path: &Path) -> Result<LoadedPlugin, GrapplerError> {
    open_plugin(path).map_err(|fault| GrapplerError::Plugin {
        path: path.to_path_buf(),
        fault,
    })
}

/// [`load_plugin`], with the fault alone (an `--isolate` worker sends it to the host, which
/// names the file).
pub(crate) fn open_plugin(path: &Path) -> Result<LoadedPlugin, PluginFault> {
    // Referencing the export table keeps every TF_* function in the executable, so the
    // dynamic linker can resolve the plugin's references to them.
    std::hint::black_box(crate::exports::exported_symbols());
    if let Err(e) = crate::shims::ensure_loaded() {
        eprintln!("unbound: warning: {e}; plugins linked against TensorFlow will not load");
    }
    crate::elf::check_shared_object(path)?;
    // SAFETY: loading a plugin runs its initializers; that is the point of a plugin, and the
    // user named it. RTLD_NOW|RTLD_LOCAL as TensorFlow's Env::LoadDynamicLibrary does.
    let library = unsafe {
        libloading::os::unix::Library::open(Some(path), libc::RTLD_NOW | libc::RTLD_LOCAL)
    }
    .map_err(PluginFault::CannotLoad)?;
    // SAFETY: the symbol's type is TensorFlow's TFInitGraphPluginFn.
    let init: InitGraphFn = unsafe { library.get::<InitGraphFn>(INIT_GRAPH_SYMBOL) }
        .map(|s| *s)
        .map_err(|_| PluginFault::NotAPlugin)?;
    let (registration, optimizer) = register(init)?;
    Ok(LoadedPlugin {
        path: path.to_path_buf(),
        registration,
        optimizer,
        _library: library,
    })
}

/// Calls `init` as TensorFlow's `InitGraphPlugin` does and validates what it filled in.
fn register(init: InitGraphFn) -> Result<(Registration, TpOptimizer), PluginFault> {
    let mut configs = Padded::new(TpOptimizerConfigs {
        struct_size: TP_OPTIMIZER_CONFIGS_STRUCT_SIZE,
        ext: std::ptr::null_mut(),
        toggles: [0; CONFIG_FIELD_COUNT],
    });
    let mut optimizer = Padded::new(TpOptimizer {
        struct_size: TP_OPTIMIZER_STRUCT_SIZE,
        ext: std::ptr::null_mut(),
        create_func: None,
        optimize_func: None,
        destroy_func: None,
    });
    let mut params = Padded::new(TpOptimizerRegistrationParams {
        struct_size: TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE,
        ext: std::ptr::null_mut(),
        major_version: GO_VERSION.0,
        minor_version: GO_VERSION.1,
        patch_version: GO_VERSION.2,
        device_type: std::ptr::null(),
        optimizer_configs: &mut configs.value,
        optimizer: &mut optimizer.value,
    });
    let mut status = TfStatus::new();
    // SAFETY: all three structs are zero-initialized, sized as TensorFlow's (plus spare room)
    // and live across the call.
    unsafe { init(&mut params.value, status.as_ptr().cast()) };
    status.to_result().map_err(PluginFault::InitFailed)?;
    let p = &params.value;
    if p.struct_size == 0 {
        return Err(precondition("struct_size field in TP_OptimizerRegistrationParams must be set to TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE."));
    }
    if p.device_type.is_null() {
        return Err(precondition(
            "'device_type' field in TP_OptimizerRegistrationParams must be set.",
        ));
    }
    let o = optimizer.value;
    if o.struct_size == 0 {
        return Err(precondition(
            "struct_size field in TP_Optimizer must be set to TP_OPTIMIZER_STRUCT_SIZE.",
        ));
    }
    if o.optimize_func.is_none() {
        return Err(precondition(
            "'optimize_func' field in TP_Optimizer must be set.",
        ));
    }
    if configs.value.struct_size == 0 {
        return Err(precondition("struct_size field in TP_OptimizerConfigs must be set to TP_OPTIMIZER_CONFIGS_STRUCT_SIZE."));
    }
    // SAFETY: checked non-null; TensorFlow requires a NUL-terminated static string.
    let device_type = unsafe { CStr::from_ptr(p.device_type) }
        .to_str()
        .map_err(|_| PluginFault::DeviceTypeNotUtf8)?
        .to_string();
    if device_type.is_empty() {
        return Err(precondition(
            "'device_type' field in TP_OptimizerRegistrationParams must be set.",
        ));
    }
    let registration = Registration {
        device_type,
        configs: PluginConfigs::read(&configs.value),
    };
    Ok((registration, o))
}

/// TensorFlow's FAILED_PRECONDITION for a registration field left unset.
fn precondition(message: &'static str) -> PluginFault {
    PluginFault::Registration(message)
}

/// What one `optimize_func` call returned, before validation.
#[derive(Debug)]
pub enum RawOutcome {
    /// OK with these bytes (possibly empty).
    Output(Vec<u8>),
    /// ABORTED: the plugin did nothing.
    Aborted,
    /// Any other error: "CODE: message".
    Error(String),
}

impl LoadedPlugin {
    /// Runs the optimizer once on `graph_in`, with `item` as the `TF_GrapplerItem*`: creates
    /// the optimizer (if it has `create_func`), calls `optimize_func`, copies the output, calls
    /// the output's deallocator, and destroys the optimizer (TensorFlow's `CGraphOptimizer`
    /// lifetime: one instance per optimized graph). Also returns how long the plugin's own
    /// code ran (create, optimize, destroy, with the util calls it made), which is what a
    /// report subtracts to get the host's overhead.
    ///
    /// # Safety
    /// `item` is null or points to an [`crate::util_api::ItemContext`] that stays live for
    /// the call: the plugin's util calls dereference it.
    pub unsafe fn call_optimize(
        &self,
        graph_in: &[u8],
        item: *const c_void,
    ) -> (RawOutcome, std::time::Duration) {
        let o = &self.optimizer;
        let Some(optimize) = o.optimize_func else {
            let error = RawOutcome::Error("optimize_func is not set".to_string());
            return (error, std::time::Duration::ZERO);
        };
        let start = std::time::Instant::now();
        let handle = match o.create_func {
            // SAFETY: the plugin's create_func, called as its C signature declares while the
            // library is loaded (self holds it).
            Some(create) => unsafe { create() },
            None => std::ptr::null_mut(),
        };
        let input = TfBuffer {
            data: graph_in.as_ptr().cast(),
            length: graph_in.len(),
            data_deallocator: None,
        };
        let mut output = TfBuffer {
            data: std::ptr::null(),
            length: 0,
            data_deallocator: None,
        };
        let mut status = TfStatus::new();
        // SAFETY: input borrows graph_in for the call; output and status are ours.
        unsafe {
            optimize(
                handle,
                &input,
                item.cast(),
                &mut output,
                status.as_ptr().cast(),
            )
        };
        let mut plugin_time = start.elapsed();
        // SAFETY: the plugin promises `length` readable bytes at `data`.
        let bytes = unsafe { buffer_bytes(&output) }.to_vec();
        let start = std::time::Instant::now();
        if let Some(dealloc) = output.data_deallocator {
            // SAFETY: the plugin's own deallocator, called once on its own data, while loaded.
            unsafe { dealloc(output.data.cast_mut(), output.length) };
        }
        if let Some(destroy) = o.destroy_func {
            // SAFETY: TensorFlow calls destroy_func whenever set, even with a null handle.
            unsafe { destroy(handle) };
        }
        plugin_time += start.elapsed();
        if status.code() == code::ABORTED {
            return (RawOutcome::Aborted, plugin_time);
        }
        let outcome = match status.to_result() {
            Ok(()) => RawOutcome::Output(bytes),
            Err(e) => RawOutcome::Error(e.to_string()),
        };
        (outcome, plugin_time)
    }
}

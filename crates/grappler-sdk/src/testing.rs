//! A fake TensorFlow host for plugin tests (feature `testing`).
//!
//! It defines the `TF_*` functions a plugin resolves at run time (status, buffers, the item's
//! string lists, a small op registry and fixed properties) as `#[no_mangle]` functions. A test
//! executable exports them with `-Wl,--export-dynamic-symbol=TF_*` (build script:
//! `cargo:rustc-link-arg-tests=...`) and calls [`keep_symbols`] so the linker keeps them; the
//! plugin, loaded with `libloading` or linked in, then finds them with `dlsym(RTLD_DEFAULT)`.
//!
//! Fakes: a `TF_GrapplerItem*` is a `*const FakeItem`; `TF_LookUpOpDef` knows the ops in
//! [`FAKE_OPS`] (an `OpDef` with just the name); every node has one input and one output
//! property, `DT_FLOAT` of shape `[2]`.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::PathBuf;

use prost::Message;
use unbound_proto::tensorflow::op_info::TensorProperties;
use unbound_proto::tensorflow::{tensor_shape_proto, DataType, GraphDef, OpDef, TensorShapeProto};

use crate::abi::{
    OptimizeFn, TfBuffer, TfStatus, TpOptimizer, TpOptimizerConfigs, TpOptimizerRegistrationParams,
    TP_OPTIMIZER_CONFIGS_STRUCT_SIZE, TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE,
    TP_OPTIMIZER_STRUCT_SIZE,
};

/// Ops the fake `TF_LookUpOpDef` knows.
pub const FAKE_OPS: [&str; 4] = ["Identity", "Const", "AddV2", "NoOp"];

/// The fake `TF_Status`.
#[derive(Debug, Default)]
pub struct FakeStatus {
    /// The `TF_Code`.
    pub code: i32,
    /// The message.
    pub message: CString,
}

/// The fake `TF_GrapplerItem`.
#[derive(Debug, Default, Clone)]
pub struct FakeItem {
    /// What `TF_GetNodesToPreserveList` answers.
    pub preserve: Vec<String>,
    /// What `TF_GetFetchNodesList` answers.
    pub fetch: Vec<String>,
}

/// Fake `TF_NewStatus`: a new OK status.
///
/// # Safety
/// None (unsafe only to match the C declaration).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_NewStatus() -> *mut FakeStatus {
    Box::into_raw(Box::default())
}

/// Fake `TF_DeleteStatus`. Null is a no-op.
///
/// # Safety
/// `s` is null or came from [`TF_NewStatus`] and is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_DeleteStatus(s: *mut FakeStatus) {
    if !s.is_null() {
        // SAFETY: from TF_NewStatus.
        drop(unsafe { Box::from_raw(s) });
    }
}

/// Fake `TF_SetStatus`.
///
/// # Safety
/// `s` is a live status and `msg` a NUL-terminated string (neither is checked for null).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_SetStatus(s: *mut FakeStatus, code: c_int, msg: *const c_char) {
    // SAFETY: a live status and a NUL-terminated message (test contract).
    unsafe {
        (*s).code = code;
        (*s).message = CStr::from_ptr(msg).to_owned();
    }
}

/// Fake `TF_GetCode`.
///
/// # Safety
/// `s` is a live status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_GetCode(s: *const FakeStatus) -> c_int {
    // SAFETY: a live status.
    unsafe { (*s).code }
}

/// Fake `TF_Message`.
///
/// # Safety
/// `s` is a live status; the message stays valid until it next changes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_Message(s: *const FakeStatus) -> *const c_char {
    // SAFETY: a live status.
    unsafe { (*s).message.as_ptr() }
}

/// Fake `TF_NewBuffer`: an empty buffer.
///
/// # Safety
/// None (unsafe only to match the C declaration).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_NewBuffer() -> *mut TfBuffer {
    Box::into_raw(Box::new(TfBuffer {
        data: std::ptr::null(),
        length: 0,
        data_deallocator: None,
    }))
}

/// Fake `TF_DeleteBuffer`: calls the deallocator, frees the struct. Null is a no-op.
///
/// # Safety
/// `b` is null or came from [`TF_NewBuffer`] and is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_DeleteBuffer(b: *mut TfBuffer) {
    if b.is_null() {
        return;
    }
    // SAFETY: from TF_NewBuffer; the deallocator matches the data.
    unsafe {
        let b = Box::from_raw(b);
        if let Some(free) = b.data_deallocator {
            free(b.data.cast_mut(), b.length);
        }
    }
}

unsafe extern "C" fn free_vec(data: *mut c_void, length: usize) {
    // SAFETY: made by `fill` from a boxed slice of `length` bytes.
    drop(unsafe {
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(
            data.cast::<u8>(),
            length,
        ))
    });
}

/// Puts `bytes` into a buffer (as the host does).
unsafe fn fill(b: *mut TfBuffer, bytes: Vec<u8>) {
    let boxed = bytes.into_boxed_slice();
    let length = boxed.len();
    // SAFETY: a live, empty buffer.
    unsafe {
        (*b).data = Box::into_raw(boxed).cast::<c_void>();
        (*b).length = length;
        (*b).data_deallocator = Some(free_vec);
    }
}

unsafe fn list_size(list: &[String], n: *mut c_int, storage: *mut usize, s: *mut FakeStatus) {
    // SAFETY: out-pointers and status from the caller.
    unsafe {
        *n = list.len() as c_int;
        *storage = list.iter().map(String::len).sum();
        (*s).code = 0;
    }
}

unsafe fn list_fill(
    list: &[String],
    values: *mut *mut c_char,
    lengths: *mut usize,
    n: c_int,
    storage: *mut c_void,
    storage_size: usize,
    s: *mut FakeStatus,
) {
    let mut offset = 0;
    for (i, v) in list.iter().take(n.max(0) as usize).enumerate() {
        if offset + v.len() > storage_size {
            // SAFETY: a live status.
            unsafe { (*s).code = 3 };
            return;
        }
        // SAFETY: `storage` holds `storage_size` bytes; `values`/`lengths` hold `n` slots.
        unsafe {
            let dst = storage.cast::<u8>().add(offset);
            std::ptr::copy_nonoverlapping(v.as_ptr(), dst, v.len());
            *values.add(i) = dst.cast();
            *lengths.add(i) = v.len();
        }
        offset += v.len();
    }
    // SAFETY: a live status.
    unsafe { (*s).code = 0 };
}

/// Fake `TF_GetNodesToPreserveListSize` over [`FakeItem::preserve`].
///
/// # Safety
/// `item` is a live [`FakeItem`]; `n`, `storage` and `s` are live (not checked for null).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_GetNodesToPreserveListSize(
    item: *const FakeItem,
    n: *mut c_int,
    storage: *mut usize,
    s: *mut FakeStatus,
) {
    // SAFETY: a live FakeItem (test contract).
    unsafe { list_size(&(*item).preserve, n, storage, s) }
}

/// Fake `TF_GetNodesToPreserveList` over [`FakeItem::preserve`].
///
/// # Safety
/// `item` is a live [`FakeItem`]; `values` and `lengths` hold `n` slots, `storage` `size`
/// bytes; `s` is a live status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_GetNodesToPreserveList(
    item: *const FakeItem,
    values: *mut *mut c_char,
    lengths: *mut usize,
    n: c_int,
    storage: *mut c_void,
    size: usize,
    s: *mut FakeStatus,
) {
    // SAFETY: a live FakeItem and the caller's arrays.
    unsafe { list_fill(&(*item).preserve, values, lengths, n, storage, size, s) }
}

/// Fake `TF_GetFetchNodesListSize` over [`FakeItem::fetch`].
///
/// # Safety
/// As [`TF_GetNodesToPreserveListSize`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_GetFetchNodesListSize(
    item: *const FakeItem,
    n: *mut c_int,
    storage: *mut usize,
    s: *mut FakeStatus,
) {
    // SAFETY: a live FakeItem.
    unsafe { list_size(&(*item).fetch, n, storage, s) }
}

/// Fake `TF_GetFetchNodesList` over [`FakeItem::fetch`].
///
/// # Safety
/// As [`TF_GetNodesToPreserveList`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_GetFetchNodesList(
    item: *const FakeItem,
    values: *mut *mut c_char,
    lengths: *mut usize,
    n: c_int,
    storage: *mut c_void,
    size: usize,
    s: *mut FakeStatus,
) {
    // SAFETY: a live FakeItem and the caller's arrays.
    unsafe { list_fill(&(*item).fetch, values, lengths, n, storage, size, s) }
}

/// The fake `TF_FunctionLibraryDefinition` (and `TF_GraphProperties`): a marker box.
pub struct FakeHandle(
    /// 1 for a function library, 2 for graph properties.
    pub u32,
);

/// Fake `TF_NewFunctionLibraryDefinition`: a marker handle, or null with INVALID_ARGUMENT
/// when the buffer is not a GraphDef.
///
/// # Safety
/// `graph` is null or a live buffer; `s` is a live status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_NewFunctionLibraryDefinition(
    graph: *const TfBuffer,
    s: *mut FakeStatus,
) -> *mut FakeHandle {
    // SAFETY: a live buffer and status.
    unsafe {
        let bytes = crate::item::buffer_bytes(graph);
        if GraphDef::decode(bytes).is_err() {
            (*s).code = 3;
            return std::ptr::null_mut();
        }
        (*s).code = 0;
    }
    Box::into_raw(Box::new(FakeHandle(1)))
}

/// Fake `TF_DeleteFunctionLibraryDefinition`. Null is a no-op.
///
/// # Safety
/// `f` is null or came from [`TF_NewFunctionLibraryDefinition`] and is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_DeleteFunctionLibraryDefinition(f: *mut FakeHandle) {
    if !f.is_null() {
        // SAFETY: from TF_NewFunctionLibraryDefinition.
        drop(unsafe { Box::from_raw(f) });
    }
}

/// Fake `TF_LookUpOpDef`: an `OpDef` with just the name for the ops in [`FAKE_OPS`],
/// NOT_FOUND for others.
///
/// # Safety
/// `name` is a NUL-terminated string, `buf` a live empty buffer, `s` a live status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_LookUpOpDef(
    _f: *mut FakeHandle,
    name: *const c_char,
    buf: *mut TfBuffer,
    s: *mut FakeStatus,
) {
    // SAFETY: live arguments.
    unsafe {
        let name = CStr::from_ptr(name).to_string_lossy().into_owned();
        if FAKE_OPS.contains(&name.as_str()) {
            fill(
                buf,
                OpDef {
                    name,
                    ..Default::default()
                }
                .encode_to_vec(),
            );
            (*s).code = 0;
        } else {
            (*s).code = 5;
            (*s).message =
                CString::new(format!("Op type not registered '{name}'")).unwrap_or_default();
        }
    }
}

/// Fake `TF_NewGraphProperties`: a marker handle.
///
/// # Safety
/// None: `_item` is not used.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_NewGraphProperties(_item: *const FakeItem) -> *mut FakeHandle {
    Box::into_raw(Box::new(FakeHandle(2)))
}

/// Fake `TF_DeleteGraphProperties`. Null is a no-op.
///
/// # Safety
/// `p` is null or came from [`TF_NewGraphProperties`] and is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_DeleteGraphProperties(p: *mut FakeHandle) {
    if !p.is_null() {
        // SAFETY: from TF_NewGraphProperties.
        drop(unsafe { Box::from_raw(p) });
    }
}

/// Fake `TF_InferStatically`: sets OK.
///
/// # Safety
/// `s` is a live status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_InferStatically(
    _p: *mut FakeHandle,
    _a: u8,
    _b: u8,
    _c: u8,
    _d: u8,
    s: *mut FakeStatus,
) {
    // SAFETY: a live status.
    unsafe { (*s).code = 0 };
}

/// Fake `TF_GetInputPropertiesListSize`: one property per node.
///
/// # Safety
/// `n` and `s` are live (not checked for null).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_GetInputPropertiesListSize(
    _p: *mut FakeHandle,
    _node: *const c_char,
    n: *mut c_int,
    s: *mut FakeStatus,
) {
    // SAFETY: live out-pointer and status.
    unsafe {
        *n = 1;
        (*s).code = 0;
    }
}

/// Fake `TF_GetInputPropertiesList`: fills each of the `n` buffers with a `DT_FLOAT [2]`
/// property.
///
/// # Safety
/// `props` holds `n` live, empty buffers; `s` is a live status.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_GetInputPropertiesList(
    _p: *mut FakeHandle,
    _node: *const c_char,
    props: *mut *mut TfBuffer,
    n: c_int,
    s: *mut FakeStatus,
) {
    let value = TensorProperties {
        dtype: DataType::DtFloat as i32,
        shape: Some(TensorShapeProto {
            dim: vec![tensor_shape_proto::Dim {
                size: 2,
                ..Default::default()
            }],
            ..Default::default()
        }),
        value: None,
    };
    // SAFETY: `props` holds `n` fresh buffers; a live status.
    unsafe {
        for i in 0..n.max(0) as usize {
            let b = *props.add(i);
            if !(*b).data.is_null() {
                (*s).code = 3;
                return;
            }
            fill(b, value.encode_to_vec());
        }
        (*s).code = 0;
    }
}

/// Fake `TF_GetOutputPropertiesListSize`: as the input one.
///
/// # Safety
/// As [`TF_GetInputPropertiesListSize`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_GetOutputPropertiesListSize(
    p: *mut FakeHandle,
    node: *const c_char,
    n: *mut c_int,
    s: *mut FakeStatus,
) {
    // SAFETY: forwarded.
    unsafe { TF_GetInputPropertiesListSize(p, node, n, s) }
}

/// Fake `TF_GetOutputPropertiesList`: as the input one.
///
/// # Safety
/// As [`TF_GetInputPropertiesList`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TF_GetOutputPropertiesList(
    p: *mut FakeHandle,
    node: *const c_char,
    props: *mut *mut TfBuffer,
    n: c_int,
    s: *mut FakeStatus,
) {
    // SAFETY: forwarded.
    unsafe { TF_GetInputPropertiesList(p, node, props, n, s) }
}

/// References every fake so the linker keeps (and, with the export flag, exports) them.
pub fn keep_symbols() {
    let fns: [*const c_void; 21] = [
        TF_NewStatus as *const c_void,
        TF_DeleteStatus as *const c_void,
        TF_SetStatus as *const c_void,
        TF_GetCode as *const c_void,
        TF_Message as *const c_void,
        TF_NewBuffer as *const c_void,
        TF_DeleteBuffer as *const c_void,
        TF_GetNodesToPreserveListSize as *const c_void,
        TF_GetNodesToPreserveList as *const c_void,
        TF_GetFetchNodesListSize as *const c_void,
        TF_GetFetchNodesList as *const c_void,
        TF_NewFunctionLibraryDefinition as *const c_void,
        TF_DeleteFunctionLibraryDefinition as *const c_void,
        TF_LookUpOpDef as *const c_void,
        TF_NewGraphProperties as *const c_void,
        TF_DeleteGraphProperties as *const c_void,
        TF_InferStatically as *const c_void,
        TF_GetInputPropertiesListSize as *const c_void,
        TF_GetInputPropertiesList as *const c_void,
        TF_GetOutputPropertiesListSize as *const c_void,
        TF_GetOutputPropertiesList as *const c_void,
    ];
    std::hint::black_box(fns);
}

/// What a plugin's `TF_InitGraph` filled in.
pub struct Registration {
    /// The status `TF_InitGraph` was given.
    pub status: FakeStatus,
    /// The registration params as the plugin left them.
    pub params: TpOptimizerRegistrationParams,
    /// The configs the plugin filled in.
    pub configs: Box<TpOptimizerConfigs>,
    /// The optimizer the plugin filled in.
    pub optimizer: Box<TpOptimizer>,
}

impl Registration {
    /// `device_type` as a string (None when not set).
    pub fn device_type(&self) -> Option<String> {
        (!self.params.device_type.is_null()).then(|| {
            // SAFETY: non-null (checked): the plugin's static NUL-terminated string.
            unsafe { CStr::from_ptr(self.params.device_type) }
                .to_string_lossy()
                .into_owned()
        })
    }
}

/// Calls `init` as TensorFlow does: zeroed structs with `struct_size` pre-filled, an OK status.
///
/// # Safety
/// `init` is a `TF_InitGraph`.
pub unsafe fn register(
    init: unsafe extern "C" fn(*mut TpOptimizerRegistrationParams, *mut TfStatus),
) -> Registration {
    keep_symbols();
    // SAFETY: all-zero is valid for these plain C structs (null pointers, None fns).
    let mut configs: Box<TpOptimizerConfigs> = Box::new(unsafe { std::mem::zeroed() });
    // SAFETY: as above.
    let mut optimizer: Box<TpOptimizer> = Box::new(unsafe { std::mem::zeroed() });
    // SAFETY: as above.
    let mut params: TpOptimizerRegistrationParams = unsafe { std::mem::zeroed() };
    configs.struct_size = TP_OPTIMIZER_CONFIGS_STRUCT_SIZE;
    optimizer.struct_size = TP_OPTIMIZER_STRUCT_SIZE;
    params.struct_size = TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE;
    (
        params.major_version,
        params.minor_version,
        params.patch_version,
    ) = (0, 0, 1);
    params.optimizer_configs = &mut *configs;
    params.optimizer = &mut *optimizer;
    let mut status = FakeStatus::default();
    // SAFETY: per the function's contract, with live structs.
    unsafe { init(&mut params, (&mut status as *mut FakeStatus).cast()) };
    Registration {
        status,
        params,
        configs,
        optimizer,
    }
}

/// The result of one `optimize_func` call.
#[derive(Debug)]
pub struct Optimized {
    /// The status code.
    pub code: i32,
    /// The status message.
    pub message: String,
    /// The output graph when the status is OK.
    pub graph: Option<GraphDef>,
    /// Whether the output buffer carried a deallocator.
    pub had_deallocator: bool,
}

/// Runs the registered optimizer once (create, optimize, destroy) as TensorFlow does.
///
/// # Safety
/// `optimizer` was filled in by a plugin's `TF_InitGraph` that is still loaded.
pub unsafe fn optimize_bytes(optimizer: &TpOptimizer, graph: &[u8], item: &FakeItem) -> Optimized {
    keep_symbols();
    let optimize: OptimizeFn = optimizer.optimize_func.expect("optimize_func set");
    // SAFETY: the plugin's functions, called in TensorFlow's order with live arguments.
    unsafe {
        let handle = optimizer.create_func.map_or(std::ptr::null_mut(), |c| c());
        let input = TfBuffer {
            data: graph.as_ptr().cast(),
            length: graph.len(),
            data_deallocator: None,
        };
        let output = TF_NewBuffer();
        let mut status = FakeStatus::default();
        optimize(
            handle,
            &input,
            (item as *const FakeItem).cast(),
            output,
            (&mut status as *mut FakeStatus).cast(),
        );
        let had_deallocator = (*output).data_deallocator.is_some();
        let result = (status.code == 0).then(|| {
            GraphDef::decode(crate::item::buffer_bytes(output)).expect("output is a GraphDef")
        });
        TF_DeleteBuffer(output);
        if let Some(destroy) = optimizer.destroy_func {
            destroy(handle);
        }
        Optimized {
            code: status.code,
            message: status.message.to_string_lossy().into_owned(),
            graph: result,
            had_deallocator,
        }
    }
}

/// [`optimize_bytes`] of an encoded graph.
///
/// # Safety
/// As [`optimize_bytes`].
pub unsafe fn optimize(optimizer: &TpOptimizer, graph: &GraphDef, item: &FakeItem) -> Optimized {
    // SAFETY: forwarded.
    unsafe { optimize_bytes(optimizer, &graph.encode_to_vec(), item) }
}

/// Finds the cdylib `lib<name>.so` cargo built next to the running test executable
/// (`target/<profile>/deps/` for dependencies, `target/<profile>/` for the package itself).
pub fn find_cdylib(name: &str) -> Option<PathBuf> {
    let file = format!("lib{}.so", name.replace('-', "_"));
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    [deps.to_path_buf(), deps.parent()?.to_path_buf()]
        .into_iter()
        .map(|dir| dir.join(&file))
        .find(|p| p.is_file())
}

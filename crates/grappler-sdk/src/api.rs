//! The host's `TF_*` functions, resolved at run time so a plugin has no undefined `TF_*` symbols
//! and links no TensorFlow library.
//!
//! Each name is looked up once (on the first `TF_InitGraph`) with `dlsym(RTLD_DEFAULT, name)`,
//! which finds the exports of a host that exports them from its executable (the `unbound` binary)
//! or from a library loaded `RTLD_GLOBAL`; then in the TensorFlow libraries already loaded into
//! the process (`dlopen(soname, RTLD_NOW | RTLD_NOLOAD)`), because TensorFlow's Python package
//! loads them `RTLD_LOCAL`: `TF_SetStatus` and `TF_NewBuffer` live in
//! `libtensorflow_framework.so.2`, the grappler util functions in `libtensorflow_cc.so.2`.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

use crate::abi::{
    TfBuffer, TfFunctionLibraryDefinition, TfGraphProperties, TfGrapplerItem, TfStatus,
};

/// Libraries searched after the global scope, in order.
const SONAMES: [&CStr; 3] = [
    c"libtensorflow_framework.so.2",
    c"libtensorflow_cc.so.2",
    c"_pywrap_tensorflow_internal.so",
];

/// `TF_Get{NodesToPreserve,FetchNodes}ListSize`.
pub type ListSizeFn =
    unsafe extern "C" fn(*const TfGrapplerItem, *mut c_int, *mut usize, *mut TfStatus);
/// `TF_Get{NodesToPreserve,FetchNodes}List`.
pub type ListFn = unsafe extern "C" fn(
    *const TfGrapplerItem,
    *mut *mut c_char,
    *mut usize,
    c_int,
    *mut c_void,
    usize,
    *mut TfStatus,
);
/// `TF_Get{Input,Output}PropertiesListSize`.
pub type PropertiesSizeFn =
    unsafe extern "C" fn(*mut TfGraphProperties, *const c_char, *mut c_int, *mut TfStatus);
/// `TF_Get{Input,Output}PropertiesList`.
pub type PropertiesListFn = unsafe extern "C" fn(
    *mut TfGraphProperties,
    *const c_char,
    *mut *mut TfBuffer,
    c_int,
    *mut TfStatus,
);

/// The functions a plugin may call. Only `set_status` is needed to register.
#[derive(Debug, Default, Clone, Copy)]
pub struct Api {
    pub set_status: Option<unsafe extern "C" fn(*mut TfStatus, c_int, *const c_char)>,
    pub new_status: Option<unsafe extern "C" fn() -> *mut TfStatus>,
    pub delete_status: Option<unsafe extern "C" fn(*mut TfStatus)>,
    pub get_code: Option<unsafe extern "C" fn(*const TfStatus) -> c_int>,
    pub message: Option<unsafe extern "C" fn(*const TfStatus) -> *const c_char>,
    pub new_buffer: Option<unsafe extern "C" fn() -> *mut TfBuffer>,
    pub delete_buffer: Option<unsafe extern "C" fn(*mut TfBuffer)>,
    pub preserve_size: Option<ListSizeFn>,
    pub preserve_list: Option<ListFn>,
    pub fetch_size: Option<ListSizeFn>,
    pub fetch_list: Option<ListFn>,
    pub new_properties:
        Option<unsafe extern "C" fn(*const TfGrapplerItem) -> *mut TfGraphProperties>,
    pub delete_properties: Option<unsafe extern "C" fn(*mut TfGraphProperties)>,
    pub infer_statically:
        Option<unsafe extern "C" fn(*mut TfGraphProperties, u8, u8, u8, u8, *mut TfStatus)>,
    pub input_properties_size: Option<PropertiesSizeFn>,
    pub input_properties_list: Option<PropertiesListFn>,
    pub output_properties_size: Option<PropertiesSizeFn>,
    pub output_properties_list: Option<PropertiesListFn>,
    pub new_flib: Option<
        unsafe extern "C" fn(*const TfBuffer, *mut TfStatus) -> *mut TfFunctionLibraryDefinition,
    >,
    pub delete_flib: Option<unsafe extern "C" fn(*mut TfFunctionLibraryDefinition)>,
    pub look_up_op_def: Option<
        unsafe extern "C" fn(
            *mut TfFunctionLibraryDefinition,
            *const c_char,
            *mut TfBuffer,
            *mut TfStatus,
        ),
    >,
}

/// The address of `name` in the process, or null.
fn lookup(name: &CStr) -> *mut c_void {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only reads the global scope.
    let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if !found.is_null() {
        return found;
    }
    for soname in SONAMES {
        // SAFETY: RTLD_NOLOAD never loads anything: it returns a handle (adding a reference,
        // deliberately kept for the life of the process) only when the library is already
        // loaded, so no initializers run.
        let handle = unsafe { libc::dlopen(soname.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if handle.is_null() {
            continue;
        }
        // SAFETY: a valid handle and a NUL-terminated name.
        let found = unsafe { libc::dlsym(handle, name.as_ptr()) };
        if !found.is_null() {
            return found;
        }
    }
    std::ptr::null_mut()
}

/// Reinterprets a symbol address as a function pointer of type `F`.
///
/// # Safety
/// `F` is an `extern "C"` function pointer type matching the symbol's C signature.
unsafe fn fn_from_ptr<F: Copy>(p: *mut c_void) -> F {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: same size (checked) and, per the contract, a function of type `F` at `p`.
    unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) }
}

macro_rules! resolve {
    ($api:ident, $($field:ident = $name:literal),* $(,)?) => {
        $(
            let p = lookup($name);
            if !p.is_null() {
                // SAFETY: the symbol is TensorFlow's C function of that name, whose C
                // signature (grappler.h, tf_status.h, tf_buffer.h) the field's type declares.
                $api.$field = Some(unsafe { fn_from_ptr(p) });
            }
        )*
    };
}

impl Api {
    /// Looks every function up.
    fn resolve() -> Api {
        let mut api = Api::default();
        resolve!(
            api,
            set_status = c"TF_SetStatus",
            new_status = c"TF_NewStatus",
            delete_status = c"TF_DeleteStatus",
            get_code = c"TF_GetCode",
            message = c"TF_Message",
            new_buffer = c"TF_NewBuffer",
            delete_buffer = c"TF_DeleteBuffer",
            preserve_size = c"TF_GetNodesToPreserveListSize",
            preserve_list = c"TF_GetNodesToPreserveList",
            fetch_size = c"TF_GetFetchNodesListSize",
            fetch_list = c"TF_GetFetchNodesList",
            new_properties = c"TF_NewGraphProperties",
            delete_properties = c"TF_DeleteGraphProperties",
            infer_statically = c"TF_InferStatically",
            input_properties_size = c"TF_GetInputPropertiesListSize",
            input_properties_list = c"TF_GetInputPropertiesList",
            output_properties_size = c"TF_GetOutputPropertiesListSize",
            output_properties_list = c"TF_GetOutputPropertiesList",
            new_flib = c"TF_NewFunctionLibraryDefinition",
            delete_flib = c"TF_DeleteFunctionLibraryDefinition",
            look_up_op_def = c"TF_LookUpOpDef",
        );
        api
    }
}

/// The functions, resolved on first use.
pub fn get() -> &'static Api {
    static API: OnceLock<Api> = OnceLock::new();
    API.get_or_init(Api::resolve)
}

/// Writes `code` and `message` into `status` (no-op without `TF_SetStatus` or a status).
/// Interior NULs cut the message.
///
/// # Safety
/// `status` is null or a live `TF_Status*` of the host.
pub unsafe fn set_status(status: *mut TfStatus, code: i32, message: &str) {
    let Some(set) = get().set_status else { return };
    if status.is_null() {
        return;
    }
    let end = message
        .bytes()
        .position(|b| b == 0)
        .unwrap_or(message.len());
    let mut bytes = Vec::with_capacity(end + 1);
    bytes.extend_from_slice(&message.as_bytes()[..end]);
    bytes.push(0);
    // SAFETY: `status` is live (caller), `bytes` is NUL-terminated and outlives the call
    // (TF_SetStatus copies the message).
    unsafe { set(status, code, bytes.as_ptr().cast()) };
}

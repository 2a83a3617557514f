//! `TF_Status`: an error code and message, created and read by plugins through the functions
//! TensorFlow exports (`TF_NewStatus`, `TF_SetStatus`, `TF_GetCode`, `TF_Message`, ...).
//!
//! The struct is opaque to plugins, so its layout is ours. Every function accepts the pointers
//! TensorFlow's accept; a null status is ignored rather than dereferenced.

use std::ffi::{c_char, c_int, CStr, CString};

pub use crate::abi::code;
pub use crate::error::StatusError;

/// The status object behind a plugin's `TF_Status*`.
#[derive(Debug, Default)]
pub struct TfStatus {
    code: i32,
    message: CString,
}

impl TfStatus {
    /// A new OK status.
    pub fn new() -> Self {
        Self::default()
    }

    /// The code.
    pub fn code(&self) -> i32 {
        self.code
    }

    /// The message (empty when OK).
    pub fn message(&self) -> String {
        self.message.to_string_lossy().into_owned()
    }

    /// Sets code and message; an interior NUL cuts the message there.
    pub fn set(&mut self, code: i32, message: &str) {
        self.code = code;
        let bytes = message.as_bytes();
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        self.message = if code == code::OK {
            CString::default()
        } else {
            CString::new(&bytes[..end]).unwrap_or_default()
        };
    }

    /// The status as an error ("CODE: message") unless OK.
    pub fn to_result(&self) -> Result<(), StatusError> {
        if self.code == code::OK {
            Ok(())
        } else {
            Err(StatusError {
                code: self.code,
                message: self.message(),
            })
        }
    }

    /// The status as the opaque pointer plugins receive.
    pub fn as_ptr(&mut self) -> *mut std::ffi::c_void {
        (self as *mut TfStatus).cast()
    }
}

/// Where a C API call reports its result: the caller's status, or nowhere when the caller
/// passed null (TensorFlow's functions accept a null status in the same places).
pub(crate) struct StatusOut<'a>(Option<&'a mut TfStatus>);

impl StatusOut<'_> {
    /// The status behind `status`, reset to OK, as every util function starts.
    ///
    /// # Safety
    /// `status` is null or points to a live [`TfStatus`] (made by [`TF_NewStatus`] or by the
    /// host) that nothing else accesses while the returned value lives.
    pub(crate) unsafe fn reset<'a>(status: *mut TfStatus) -> StatusOut<'a> {
        // SAFETY: null or a live, unaliased TfStatus, per this function's contract.
        let mut out = StatusOut(unsafe { status.as_mut() });
        out.set(code::OK, "");
        out
    }

    /// Sets code and message (a no-op for a null status).
    pub(crate) fn set(&mut self, code: i32, message: &str) {
        if let Some(s) = self.0.as_deref_mut() {
            s.set(code, message);
        }
    }
}

/// The string behind a C string argument, lossily decoded; "" for null.
///
/// # Safety
/// `text` is null or points to a NUL-terminated string that stays live for `'a`.
pub(crate) unsafe fn c_str_arg<'a>(text: *const c_char) -> std::borrow::Cow<'a, str> {
    if text.is_null() {
        return std::borrow::Cow::Borrowed("");
    }
    // SAFETY: non-null (checked) and NUL-terminated, per this function's contract.
    unsafe { CStr::from_ptr(text) }.to_string_lossy()
}

/// `TF_NewStatus`: a new OK status, owned by the caller (free with `TF_DeleteStatus`).
#[no_mangle]
pub extern "C" fn TF_NewStatus() -> *mut TfStatus {
    Box::into_raw(Box::new(TfStatus::new()))
}

/// `TF_DeleteStatus`. Null is a no-op.
///
/// # Safety
/// `status` is null or came from `TF_NewStatus` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn TF_DeleteStatus(status: *mut TfStatus) {
    if !status.is_null() {
        // SAFETY: non-null, so it is the Box TF_NewStatus leaked, freed once (contract).
        drop(unsafe { Box::from_raw(status) });
    }
}

/// `TF_SetStatus`: sets code and message; `TF_OK` clears the message.
///
/// # Safety
/// `status` is null or a live status; `msg` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn TF_SetStatus(status: *mut TfStatus, code: c_int, msg: *const c_char) {
    // SAFETY: `msg` is null or NUL-terminated and live for this call (contract).
    let message = unsafe { c_str_arg(msg) };
    // SAFETY: `status` is null or a live status only this call touches (contract).
    if let Some(s) = unsafe { status.as_mut() } {
        s.set(code, &message);
    }
}

/// `TF_SetPayload`: payloads are not kept (no host reads them); the status is unchanged.
///
/// # Safety
/// Pointers are unused.
#[no_mangle]
pub unsafe extern "C" fn TF_SetPayload(
    _status: *mut TfStatus,
    _key: *const c_char,
    _value: *const c_char,
) {
}

/// `TF_SetStatusFromIOError`: a status from an `errno` value and a context string, with the
/// codes TensorFlow's `IOError` maps errno values to.
///
/// # Safety
/// `status` is null or a live status; `context` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn TF_SetStatusFromIOError(
    status: *mut TfStatus,
    error_code: c_int,
    context: *const c_char,
) {
    // SAFETY: `context` is null or NUL-terminated and live for this call (contract).
    let context = unsafe { c_str_arg(context) };
    let code = match error_code {
        0 => code::OK,
        libc::ENOENT | libc::ENODEV | libc::ENXIO | libc::ESRCH => code::NOT_FOUND,
        libc::EEXIST => code::ALREADY_EXISTS,
        libc::EACCES | libc::EPERM | libc::EROFS => code::PERMISSION_DENIED,
        libc::ENOSPC | libc::ENOMEM | libc::EMFILE | libc::ENFILE => code::RESOURCE_EXHAUSTED,
        libc::EINVAL | libc::ENAMETOOLONG | libc::EISDIR | libc::ENOTDIR => code::INVALID_ARGUMENT,
        libc::ETIMEDOUT => code::DEADLINE_EXCEEDED,
        libc::EAGAIN | libc::EBUSY => code::UNAVAILABLE,
        libc::ENOSYS | libc::ENOTSUP => code::UNIMPLEMENTED,
        libc::ERANGE | libc::EOVERFLOW => code::OUT_OF_RANGE,
        libc::ECANCELED => code::CANCELLED,
        _ => code::UNKNOWN,
    };
    let text = std::io::Error::from_raw_os_error(error_code).to_string();
    // SAFETY: `status` is null or a live status only this call touches (contract).
    if let Some(s) = unsafe { status.as_mut() } {
        s.set(code, &format!("{context}; {text}"));
    }
}

/// `TF_GetCode`. A null status reads as OK.
///
/// # Safety
/// `status` is null or a live status.
#[no_mangle]
pub unsafe extern "C" fn TF_GetCode(status: *const TfStatus) -> c_int {
    // SAFETY: `status` is null or a live status (contract); only read.
    unsafe { status.as_ref() }.map_or(code::OK, |s| s.code)
}

/// `TF_Message`: the message, "" when OK; valid until the status next changes.
///
/// # Safety
/// `status` is null or a live status.
#[no_mangle]
pub unsafe extern "C" fn TF_Message(status: *const TfStatus) -> *const c_char {
    // SAFETY: `status` is null or a live status (contract); only read. The pointer returned
    // points into its CString, which lives until the status is next set or deleted.
    match unsafe { status.as_ref() } {
        Some(s) => s.message.as_ptr(),
        None => c"".as_ptr(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_and_clear() {
        // SAFETY: `s` is a live status from TF_NewStatus until TF_DeleteStatus; the strings are
        // NUL-terminated literals.
        unsafe {
            let s = TF_NewStatus();
            assert_eq!(TF_GetCode(s), code::OK);
            TF_SetStatus(s, code::NOT_FOUND, c"missing".as_ptr());
            assert_eq!(TF_GetCode(s), code::NOT_FOUND);
            assert_eq!(CStr::from_ptr(TF_Message(s)).to_str().unwrap(), "missing");
            assert_eq!(
                (*s).to_result().unwrap_err().to_string(),
                "NOT_FOUND: missing"
            );
            TF_SetStatus(s, code::OK, c"ignored".as_ptr());
            assert_eq!(CStr::from_ptr(TF_Message(s)).to_str().unwrap(), "");
            TF_SetStatusFromIOError(s, libc::ENOENT, c"open x".as_ptr());
            assert_eq!(TF_GetCode(s), code::NOT_FOUND);
            assert!((*s).message().starts_with("open x; "));
            TF_DeleteStatus(s);
            TF_DeleteStatus(std::ptr::null_mut());
        }
    }
}

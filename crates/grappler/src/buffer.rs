//! `TF_Buffer`: the serialized protos that cross the plugin boundary, and the functions
//! TensorFlow exports for them.
//!
//! Buffers the host fills (properties, OpDefs) hold `malloc`ed bytes with a `free` deallocator,
//! as TensorFlow's do, so whichever side deletes them frees them correctly.

use std::ffi::c_void;

use crate::abi::TfBuffer;

/// Frees bytes allocated with `malloc`.
///
/// # Safety
/// `data` is null or came from `libc::malloc` (as [`fill_buffer`] allocates) and is freed once.
unsafe extern "C" fn free_data(data: *mut c_void, _length: usize) {
    // SAFETY: null or a malloc'ed block freed once, per this function's contract (it is only
    // set as the deallocator of buffers whose data fill_buffer malloc'ed).
    unsafe { libc::free(data) }
}

/// Why [`fill_buffer`] could not fill a buffer; the texts are TensorFlow's where it has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FillError {
    /// The `TF_Buffer*` was null.
    #[error("the TF_Buffer pointer is null")]
    Null,
    /// The buffer already held data.
    #[error("Passing non-empty TF_Buffer is invalid.")]
    NotEmpty,
    /// `malloc` failed.
    #[error("Failed to allocate memory to serialize message of size {0}")]
    OutOfMemory(usize),
}

/// Fills an empty buffer with a `malloc`ed copy of `bytes`. Fails (like TensorFlow's
/// `MessageToBuffer`) when the buffer already holds data.
///
/// # Safety
/// `buffer` is null or points to a live `TfBuffer` nothing else accesses during the call.
pub(crate) unsafe fn fill_buffer(buffer: *mut TfBuffer, bytes: &[u8]) -> Result<(), FillError> {
    // SAFETY: null or a live, unaliased TfBuffer, per this function's contract.
    let buffer = unsafe { buffer.as_mut() }.ok_or(FillError::Null)?;
    if !buffer.data.is_null() {
        return Err(FillError::NotEmpty);
    }
    // malloc(0) may return null; allocate at least one byte so data is non-null.
    // SAFETY: malloc has no preconditions; the result is checked for null below.
    let data = unsafe { libc::malloc(bytes.len().max(1)) };
    if data.is_null() {
        return Err(FillError::OutOfMemory(bytes.len()));
    }
    // SAFETY: `data` is a fresh allocation of at least `bytes.len()` bytes, so it is writable
    // and cannot overlap `bytes`.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), data.cast::<u8>(), bytes.len()) };
    buffer.data = data;
    buffer.length = bytes.len();
    buffer.data_deallocator = Some(free_data);
    Ok(())
}

pub(crate) use crate::abi::buffer_bytes;

/// `TF_NewBuffer`: an empty buffer `{NULL, 0, NULL}`.
#[no_mangle]
pub extern "C" fn TF_NewBuffer() -> *mut TfBuffer {
    Box::into_raw(Box::new(TfBuffer {
        data: std::ptr::null(),
        length: 0,
        data_deallocator: None,
    }))
}

/// `TF_NewBufferFromString`: a buffer holding a `malloc`ed copy of `proto[..proto_len]`.
///
/// # Safety
/// `proto` points to `proto_len` readable bytes (or is null, or `proto_len` is 0).
#[no_mangle]
pub unsafe extern "C" fn TF_NewBufferFromString(
    proto: *const c_void,
    proto_len: usize,
) -> *mut TfBuffer {
    let buffer = TF_NewBuffer();
    let bytes = if proto.is_null() || proto_len == 0 {
        &[][..]
    } else {
        // SAFETY: non-null (checked) with `proto_len` readable bytes (contract), read only
        // while this call copies them.
        unsafe { std::slice::from_raw_parts(proto.cast::<u8>(), proto_len) }
    };
    // SAFETY: `buffer` is the live, empty buffer TF_NewBuffer just made; only this call has it.
    if unsafe { fill_buffer(buffer, bytes) }.is_err() {
        // SAFETY: `buffer` came from TF_NewBuffer and is not used afterwards.
        unsafe { TF_DeleteBuffer(buffer) };
        return std::ptr::null_mut();
    }
    buffer
}

/// `TF_DeleteBuffer`: calls the buffer's deallocator (if any), then frees the struct. Null is a
/// no-op.
///
/// # Safety
/// `buffer` is null or came from `TF_NewBuffer`/`TF_NewBufferFromString` and is not used
/// afterwards; its deallocator, if set, accepts its `data` and `length`.
#[no_mangle]
pub unsafe extern "C" fn TF_DeleteBuffer(buffer: *mut TfBuffer) {
    if buffer.is_null() {
        return;
    }
    // SAFETY: non-null, so it is the Box TF_NewBuffer leaked; freed once (contract).
    let b = unsafe { Box::from_raw(buffer) };
    if let Some(dealloc) = b.data_deallocator {
        // SAFETY: whoever filled the buffer set this deallocator for its own `data` and
        // `length` (ours: free_data for malloc'ed bytes); called once, as the buffer dies.
        unsafe { dealloc(b.data.cast_mut(), b.length) };
    }
}

/// `TF_GetBuffer`: the struct by value.
///
/// # Safety
/// `buffer` points to a live buffer.
#[no_mangle]
pub unsafe extern "C" fn TF_GetBuffer(buffer: *mut TfBuffer) -> TfBuffer {
    // SAFETY: a live buffer (contract); its fields are only read.
    let b = unsafe { &*buffer };
    TfBuffer {
        data: b.data,
        length: b.length,
        data_deallocator: b.data_deallocator,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_string_copies_and_refuses_refill() {
        // SAFETY: `b` and `e` are live buffers from TF_NewBuffer* until TF_DeleteBuffer.
        unsafe {
            let b = TF_NewBufferFromString(b"abc".as_ptr().cast(), 3);
            assert_eq!(buffer_bytes(b), b"abc");
            assert_eq!(fill_buffer(b, b"x"), Err(FillError::NotEmpty));
            assert!(FillError::NotEmpty.to_string().contains("non-empty"));
            TF_DeleteBuffer(b);
            let e = TF_NewBuffer();
            assert!(buffer_bytes(e).is_empty());
            fill_buffer(e, b"").unwrap();
            assert_eq!((*e).length, 0);
            TF_DeleteBuffer(e);
            TF_DeleteBuffer(std::ptr::null_mut());
        }
    }
}

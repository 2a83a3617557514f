//! `TF_Buffer`: the serialized protos that cross the plugin boundary, and the functions
//! TensorFlow exports for them.
//!
//! Buffers the host fills (properties, OpDefs) hold `malloc`ed bytes with a `free` deallocator,
//! as TensorFlow's do, so whichever side deletes them frees them correctly.

use std::ffi::c_void;

use crate::abi::TfBuffer;

/// Frees bytes allocated with `malloc`.
unsafe extern "C" fn free_data(data: *mut c_void, _length: usize) {
    libc::free(data);
}

/// Fills an empty buffer with a `malloc`ed copy of `bytes`. Fails (like TensorFlow's
/// `MessageToBuffer`) when the buffer already holds data.
///
/// # Safety
/// `buffer` points to a live `TfBuffer`.
pub(crate) unsafe fn fill_buffer(buffer: *mut TfBuffer, bytes: &[u8]) -> Result<(), String> {
    let buffer = buffer
        .as_mut()
        .ok_or_else(|| "the TF_Buffer pointer is null".to_string())?;
    if !buffer.data.is_null() {
        return Err("Passing non-empty TF_Buffer is invalid.".to_string());
    }
    // malloc(0) may return null; allocate at least one byte so data is non-null.
    let data = libc::malloc(bytes.len().max(1));
    if data.is_null() {
        return Err(format!(
            "Failed to allocate memory to serialize message of size {}",
            bytes.len()
        ));
    }
    std::ptr::copy_nonoverlapping(bytes.as_ptr(), data.cast::<u8>(), bytes.len());
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
/// `proto` points to `proto_len` readable bytes (or `proto_len` is 0).
#[no_mangle]
pub unsafe extern "C" fn TF_NewBufferFromString(
    proto: *const c_void,
    proto_len: usize,
) -> *mut TfBuffer {
    let buffer = TF_NewBuffer();
    let bytes = if proto.is_null() || proto_len == 0 {
        &[][..]
    } else {
        std::slice::from_raw_parts(proto.cast::<u8>(), proto_len)
    };
    if fill_buffer(buffer, bytes).is_err() {
        TF_DeleteBuffer(buffer);
        return std::ptr::null_mut();
    }
    buffer
}

/// `TF_DeleteBuffer`: calls the buffer's deallocator (if any), then frees the struct. Null is a
/// no-op.
///
/// # Safety
/// `buffer` is null or came from `TF_NewBuffer`/`TF_NewBufferFromString`.
#[no_mangle]
pub unsafe extern "C" fn TF_DeleteBuffer(buffer: *mut TfBuffer) {
    if buffer.is_null() {
        return;
    }
    let b = Box::from_raw(buffer);
    if let Some(dealloc) = b.data_deallocator {
        dealloc(b.data.cast_mut(), b.length);
    }
}

/// `TF_GetBuffer`: the struct by value.
///
/// # Safety
/// `buffer` points to a live buffer.
#[no_mangle]
pub unsafe extern "C" fn TF_GetBuffer(buffer: *mut TfBuffer) -> TfBuffer {
    let b = &*buffer;
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
        unsafe {
            let b = TF_NewBufferFromString(b"abc".as_ptr().cast(), 3);
            assert_eq!(buffer_bytes(b), b"abc");
            assert!(fill_buffer(b, b"x").unwrap_err().contains("non-empty"));
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

//! An owned host `TF_Status` for calls into the util API.

use std::ffi::CStr;

use crate::abi::TfStatus;
use crate::api::Api;
use crate::error::{Code, Error, Result};

/// A status made with the host's `TF_NewStatus`, freed on drop.
pub(crate) struct Status {
    raw: *mut TfStatus,
    api: &'static Api,
}

impl Status {
    /// A new OK status; fails when the host lacks the status functions.
    pub(crate) fn new(api: &'static Api) -> Result<Status> {
        let (Some(new), Some(_), Some(_), Some(_)) =
            (api.new_status, api.delete_status, api.get_code, api.message)
        else {
            return Err(Error::unavailable_function("TF_NewStatus"));
        };
        // SAFETY: TF_NewStatus takes nothing and returns an owned status.
        let raw = unsafe { new() };
        if raw.is_null() {
            return Err(Error::internal("TF_NewStatus returned null"));
        }
        Ok(Status { raw, api })
    }

    /// The pointer to pass to a util function.
    pub(crate) fn as_ptr(&self) -> *mut TfStatus {
        self.raw
    }

    /// The raw code.
    pub(crate) fn code(&self) -> Code {
        let get_code = self.api.get_code.expect("checked in Status::new");
        // SAFETY: `raw` is a live status.
        Code::from_raw(unsafe { get_code(self.raw) })
    }

    /// `Ok` or the status as an error, its message prefixed with `what`.
    pub(crate) fn check(&self, what: &str) -> Result<()> {
        let code = self.code();
        if code == Code::Ok {
            return Ok(());
        }
        let message_fn = self.api.message.expect("checked in Status::new");
        // SAFETY: `raw` is live; TF_Message returns a NUL-terminated string valid until the
        // status changes, copied here at once.
        let message = unsafe {
            let p = message_fn(self.raw);
            if p.is_null() {
                String::new()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        Err(Error::new(code, format!("{what}: {message}")))
    }
}

impl Drop for Status {
    fn drop(&mut self) {
        if let Some(delete) = self.api.delete_status {
            // SAFETY: `raw` came from TF_NewStatus and is not used afterwards.
            unsafe { delete(self.raw) };
        }
    }
}

//! Errors a plugin reports to TensorFlow: a `TF_Code` and a message.

use std::fmt;

use crate::abi::code;

/// TensorFlow's status codes (`TF_Code`; the numbers are [`crate::abi::code`]'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Code {
    /// `TF_OK`.
    Ok = code::OK,
    /// `TF_CANCELLED`.
    Cancelled = code::CANCELLED,
    /// `TF_UNKNOWN`.
    Unknown = code::UNKNOWN,
    /// `TF_INVALID_ARGUMENT`.
    InvalidArgument = code::INVALID_ARGUMENT,
    /// `TF_DEADLINE_EXCEEDED`.
    DeadlineExceeded = code::DEADLINE_EXCEEDED,
    /// `TF_NOT_FOUND`.
    NotFound = code::NOT_FOUND,
    /// `TF_ALREADY_EXISTS`.
    AlreadyExists = code::ALREADY_EXISTS,
    /// `TF_PERMISSION_DENIED`.
    PermissionDenied = code::PERMISSION_DENIED,
    /// `TF_RESOURCE_EXHAUSTED`.
    ResourceExhausted = code::RESOURCE_EXHAUSTED,
    /// `TF_FAILED_PRECONDITION`.
    FailedPrecondition = code::FAILED_PRECONDITION,
    /// `TF_ABORTED`: from an optimizer, "did nothing" (TensorFlow keeps the graph, logs nothing).
    Aborted = code::ABORTED,
    /// `TF_OUT_OF_RANGE`.
    OutOfRange = code::OUT_OF_RANGE,
    /// `TF_UNIMPLEMENTED`.
    Unimplemented = code::UNIMPLEMENTED,
    /// `TF_INTERNAL`.
    Internal = code::INTERNAL,
    /// `TF_UNAVAILABLE`.
    Unavailable = code::UNAVAILABLE,
    /// `TF_DATA_LOSS`.
    DataLoss = code::DATA_LOSS,
    /// `TF_UNAUTHENTICATED`.
    Unauthenticated = code::UNAUTHENTICATED,
}

impl Code {
    /// The code for a raw `TF_Code` value; unknown values map to [`Code::Unknown`].
    pub fn from_raw(raw: i32) -> Code {
        const ALL: [Code; 17] = [
            Code::Ok,
            Code::Cancelled,
            Code::Unknown,
            Code::InvalidArgument,
            Code::DeadlineExceeded,
            Code::NotFound,
            Code::AlreadyExists,
            Code::PermissionDenied,
            Code::ResourceExhausted,
            Code::FailedPrecondition,
            Code::Aborted,
            Code::OutOfRange,
            Code::Unimplemented,
            Code::Internal,
            Code::Unavailable,
            Code::DataLoss,
            Code::Unauthenticated,
        ];
        usize::try_from(raw)
            .ok()
            .and_then(|i| ALL.get(i).copied())
            .unwrap_or(Code::Unknown)
    }
}

/// An error with a TensorFlow status code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The code reported to TensorFlow.
    pub code: Code,
    /// The message reported with it.
    pub message: String,
}

impl Error {
    /// An error with `code` and `message`.
    pub fn new(code: Code, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into(),
        }
    }

    /// `INVALID_ARGUMENT`.
    pub fn invalid_argument(message: impl Into<String>) -> Error {
        Error::new(Code::InvalidArgument, message)
    }

    /// `INTERNAL`.
    pub fn internal(message: impl Into<String>) -> Error {
        Error::new(Code::Internal, message)
    }

    /// `UNIMPLEMENTED`: used when the process does not export a util function.
    pub fn unavailable_function(name: &str) -> Error {
        Error::new(
            Code::Unimplemented,
            format!("{name} is not exported by this process (no TensorFlow host found)"),
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_codes_map_to_the_variant_with_that_number() {
        for raw in 0..=16 {
            assert_eq!(Code::from_raw(raw) as i32, raw);
        }
        assert_eq!(Code::from_raw(17), Code::Unknown);
        assert_eq!(Code::from_raw(-1), Code::Unknown);
    }
}

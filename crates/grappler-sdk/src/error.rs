//! Errors a plugin reports to TensorFlow: a `TF_Code` and a message.

use std::fmt;

/// TensorFlow's status codes (`TF_Code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Code {
    /// `TF_OK`.
    Ok = 0,
    /// `TF_CANCELLED`.
    Cancelled = 1,
    /// `TF_UNKNOWN`.
    Unknown = 2,
    /// `TF_INVALID_ARGUMENT`.
    InvalidArgument = 3,
    /// `TF_DEADLINE_EXCEEDED`.
    DeadlineExceeded = 4,
    /// `TF_NOT_FOUND`.
    NotFound = 5,
    /// `TF_ALREADY_EXISTS`.
    AlreadyExists = 6,
    /// `TF_PERMISSION_DENIED`.
    PermissionDenied = 7,
    /// `TF_RESOURCE_EXHAUSTED`.
    ResourceExhausted = 8,
    /// `TF_FAILED_PRECONDITION`.
    FailedPrecondition = 9,
    /// `TF_ABORTED`: from an optimizer, "did nothing" (TensorFlow keeps the graph, logs nothing).
    Aborted = 10,
    /// `TF_OUT_OF_RANGE`.
    OutOfRange = 11,
    /// `TF_UNIMPLEMENTED`.
    Unimplemented = 12,
    /// `TF_INTERNAL`.
    Internal = 13,
    /// `TF_UNAVAILABLE`.
    Unavailable = 14,
    /// `TF_DATA_LOSS`.
    DataLoss = 15,
    /// `TF_UNAUTHENTICATED`.
    Unauthenticated = 16,
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

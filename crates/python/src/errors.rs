//! Rust errors as the package's exceptions (`unbound/_errors.py`).
//!
//! The exception classes are defined in Python, so that they can also derive from the
//! built-in exception meaning the same thing (`FileNotFoundError`, `KeyError`, ...). Each crate's
//! error maps to a [`Kind`] by its variant; filesystem faults map by the operating system's
//! error kind, found anywhere in the error's source chain. The message is the error's
//! `Display`, as the CLI prints it.

use std::error::Error as StdError;
use std::fmt::Display;

use pyo3::prelude::*;
use pyo3::types::PyType;

/// The kind of a fault: which exception class of `unbound._errors` it raises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `unbound.Error`, for faults of no more specific kind.
    Other,
    /// `unbound.FormatError`: malformed or damaged input.
    Format,
    /// `unbound.NotFoundError`: a missing file or directory.
    NotFound,
    /// `unbound.OutputExistsError`: an existing output.
    Exists,
    /// `unbound.FileError`: the operating system refused.
    File,
    /// `unbound.TooLargeError`: past a hard limit.
    TooLarge,
    /// `unbound.UnsupportedError`: valid input unbound does not handle.
    Unsupported,
    /// `unbound.InvalidArgumentError`: a meaningless argument.
    InvalidArgument,
    /// `unbound.KeyNotFoundError`: no such checkpoint key.
    KeyNotFound,
    /// `unbound.LayoutError`: a bad DTensor mesh, layout or sharding.
    Layout,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Other => "Error",
            Kind::Format => "FormatError",
            Kind::NotFound => "NotFoundError",
            Kind::Exists => "OutputExistsError",
            Kind::File => "FileError",
            Kind::TooLarge => "TooLargeError",
            Kind::Unsupported => "UnsupportedError",
            Kind::InvalidArgument => "InvalidArgumentError",
            Kind::KeyNotFound => "KeyNotFoundError",
            Kind::Layout => "LayoutError",
        }
    }
}

/// The exception of `kind` with `message`.
pub fn raise(kind: Kind, message: impl Display) -> PyErr {
    let message = message.to_string();
    Python::attach(|py| {
        let class = py
            .import("unbound._errors")
            .and_then(|m| m.getattr(kind.class_name()))
            .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from));
        match class {
            Ok(class) => PyErr::from_type(class, (message,)),
            Err(_) => pyo3::exceptions::PyRuntimeError::new_err(message),
        }
    })
}

/// The kind of the first operating-system error in `error`'s source chain, if any.
fn os_kind(error: &(dyn StdError + 'static)) -> Option<Kind> {
    let mut current: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return Some(match io.kind() {
                std::io::ErrorKind::NotFound => Kind::NotFound,
                std::io::ErrorKind::AlreadyExists => Kind::Exists,
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof => Kind::Format,
                _ => Kind::File,
            });
        }
        current = e.source();
    }
    None
}

/// Converts a library error into the package's exception.
pub trait ToPyErr {
    /// The exception for this error.
    fn to_py_err(&self) -> PyErr;
}

/// Converts any library error into the package's exception (for `map_err`).
pub fn py_err<E: ToPyErr>(error: E) -> PyErr {
    error.to_py_err()
}

impl ToPyErr for unbound_io::IoError {
    fn to_py_err(&self) -> PyErr {
        raise(os_kind(self).unwrap_or(Kind::File), self)
    }
}

impl ToPyErr for unbound_wire::WireError {
    fn to_py_err(&self) -> PyErr {
        match self {
            unbound_wire::WireError::Io(e) => e.to_py_err(),
            _ => raise(Kind::Format, self),
        }
    }
}

impl ToPyErr for unbound_records::RecordsError {
    fn to_py_err(&self) -> PyErr {
        raise(os_kind(self).unwrap_or(Kind::Format), self)
    }
}

impl ToPyErr for unbound_chunked::ChunkedError {
    fn to_py_err(&self) -> PyErr {
        use unbound_chunked::ChunkedError as E;
        match self {
            E::Io(e) => e.to_py_err(),
            E::Records(e) => e.to_py_err(),
            E::Message(e) => e.to_py_err(),
            E::TooLarge { .. } => raise(Kind::TooLarge, self),
            E::NotFound(_) => raise(Kind::NotFound, self),
            E::UnknownType(_) => raise(Kind::InvalidArgument, self),
            _ => raise(Kind::Format, self),
        }
    }
}

impl ToPyErr for unbound_bundle::BundleError {
    fn to_py_err(&self) -> PyErr {
        use unbound_bundle::BundleError as E;
        match self {
            E::File(e) => e.to_py_err(),
            E::NotFound { .. } | E::NoVariable { .. } => raise(Kind::KeyNotFound, self),
            E::Unsupported { .. } => raise(Kind::Unsupported, self),
            E::Invalid(_) => raise(Kind::InvalidArgument, self),
            _ => raise(os_kind(self).unwrap_or(Kind::Format), self),
        }
    }
}

impl ToPyErr for unbound_savedmodel::SavedModelError {
    fn to_py_err(&self) -> PyErr {
        use unbound_savedmodel::SavedModelError as E;
        match self {
            E::Chunked(e) => e.to_py_err(),
            E::Wire(e) => e.to_py_err(),
            E::Records(e) => e.to_py_err(),
            E::Bundle(e) => e.to_py_err(),
            E::Io(e) => e.to_py_err(),
            E::NotADirectory { .. }
            | E::NoModelFile { .. }
            | E::NotFingerprintable { .. }
            | E::NoVariables { .. }
            | E::NotAModelOrCheckpoint { .. } => raise(Kind::NotFound, self),
            E::TooLargeToMerge { .. } => raise(Kind::TooLarge, self),
            E::OutputExists { .. } => raise(Kind::Exists, self),
            E::NotRegularFile { .. } | E::SymlinkLoop { .. } => raise(Kind::File, self),
            E::OutputInsideInput { .. } | E::UnknownType(_) => raise(Kind::InvalidArgument, self),
            _ => raise(Kind::Format, self),
        }
    }
}

impl ToPyErr for unbound_externalize::ExternalizeError {
    fn to_py_err(&self) -> PyErr {
        use unbound_externalize::ExternalizeError as E;
        match self {
            E::SavedModel(e) => e.to_py_err(),
            E::Bundle(e) => e.to_py_err(),
            E::TooLarge { .. } => raise(Kind::TooLarge, self),
            _ => raise(Kind::Format, self),
        }
    }
}

impl ToPyErr for unbound_dtensor::DTensorError {
    fn to_py_err(&self) -> PyErr {
        raise(Kind::Layout, self)
    }
}

impl ToPyErr for unbound_reshard::ReshardError {
    fn to_py_err(&self) -> PyErr {
        use unbound_reshard::ReshardError as E;
        match self {
            E::Bundle(e) => e.to_py_err(),
            E::Layout(e) => e.to_py_err(),
            E::Io(e) => e.to_py_err(),
            E::Exists { .. } => raise(Kind::Exists, self),
            E::Usage(_) => raise(Kind::InvalidArgument, self),
            // A layout that does not fit a variable (a shape that does not divide, say).
            E::Variable { .. } => raise(Kind::Layout, self),
            _ => raise(os_kind(self).unwrap_or(Kind::Other), self),
        }
    }
}

impl ToPyErr for unbound_convert::ConvertError {
    fn to_py_err(&self) -> PyErr {
        use unbound_convert::ConvertError as E;
        match self {
            E::Bundle(e) => e.to_py_err(),
            E::Io(e) => e.to_py_err(),
            E::Reshard(e) => e.to_py_err(),
            E::Exists { .. } => raise(Kind::Exists, self),
            E::Usage(_) => raise(Kind::InvalidArgument, self),
            E::Unconvertible { .. } => raise(Kind::Unsupported, self),
            _ => raise(os_kind(self).unwrap_or(Kind::Format), self),
        }
    }
}

impl ToPyErr for unbound_dtensor::ToolError {
    fn to_py_err(&self) -> PyErr {
        use unbound_dtensor::ToolError as E;
        match self {
            E::OutputExists { .. } => raise(Kind::Exists, self),
            E::File { .. } => raise(Kind::File, self),
            E::Argument { .. } => raise(Kind::InvalidArgument, self),
            _ => raise(Kind::Layout, self),
        }
    }
}

impl ToPyErr for unbound_plan::PlanError {
    fn to_py_err(&self) -> PyErr {
        use unbound_plan::PlanError as E;
        match self {
            E::SavedModel(e) => e.to_py_err(),
            E::Layout(e) => e.to_py_err(),
            E::Argument { .. } => raise(Kind::InvalidArgument, self),
            E::Refused { .. } => raise(Kind::Unsupported, self),
            _ => raise(Kind::Format, self),
        }
    }
}

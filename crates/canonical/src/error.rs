//! What can go wrong while encoding: bytes that are not a message of the type given, nesting
//! past protobuf C++'s recursion limit, or (validating) a string that is not UTF-8.

use unbound_wire::DecodeError;

/// A fault found in the bytes being encoded.
#[derive(Debug, thiserror::Error)]
pub enum CanonicalError {
    /// The bytes are not a well-formed message of the type (a truncated field, a bad varint,
    /// a packed run cut in the middle of a value).
    #[error("malformed {type_name}: {error}")]
    Malformed {
        /// The message type whose bytes are at fault.
        type_name: String,
        /// The fault, at an offset within that message's bytes.
        error: DecodeError,
    },
    /// Messages nested deeper than [`crate::MAX_DEPTH`] (protobuf C++ refuses to parse them).
    #[error("{type_name} nested more than {limit} messages deep")]
    TooDeep {
        /// The message type met past the limit.
        type_name: String,
        /// The limit.
        limit: usize,
    },
    /// A `string` field whose value is not UTF-8, which protobuf C++ refuses to parse (found
    /// by the validating encoder, [`crate::encode_to_vec_validated`], in any occurrence).
    #[error("{type_name} field {number}: string is not valid UTF-8")]
    NotUtf8 {
        /// The message type whose field it is (for a map's key or value, the map entry's).
        type_name: String,
        /// The field number (1 or 2 in a map entry).
        number: u32,
    },
    /// [`crate::encode_elements_to_vec`] asked for the elements of a field that is not a
    /// repeated message field of the type.
    #[error("{type_name} has no repeated message field numbered {number}")]
    NotRepeatedMessage {
        /// The message type.
        type_name: String,
        /// The field number asked for.
        number: u32,
    },
}

/// The crate's result type.
pub type Result<T, E = CanonicalError> = std::result::Result<T, E>;

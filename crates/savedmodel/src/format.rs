//! What a SavedModel directory holds by name, and the size limit every model file keeps: the
//! formats of the model file ([`ModelFormat`]) in the order TensorFlow looks for them, the
//! fingerprint's file name, and protobuf's 2 GiB limit. Plain facts, imported by every other
//! module (the errors quote them) and importing none.

use std::fmt;

use serde::Serialize;

/// The format of a SavedModel's model file. Serializes as `"cpb"`, `"pb"` or `"pbtxt"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelFormat {
    /// `saved_model.cpb`: TensorFlow's chunked image format (Riegeli records).
    Cpb,
    /// `saved_model.pb`: one binary protobuf.
    Pb,
    /// `saved_model.pbtxt`: protobuf text format.
    Pbtxt,
}

impl ModelFormat {
    /// Every format, in the order a directory's model file is looked for (TensorFlow's:
    /// `.cpb` wins over `.pb`, which wins over `.pbtxt`).
    pub const SEARCH_ORDER: [ModelFormat; 3] = [Self::Cpb, Self::Pb, Self::Pbtxt];

    /// The model file's name in a SavedModel directory (`saved_model.cpb`, ...).
    pub const fn file_name(self) -> &'static str {
        match self {
            Self::Cpb => "saved_model.cpb",
            Self::Pb => "saved_model.pb",
            Self::Pbtxt => "saved_model.pbtxt",
        }
    }

    /// The short name: `"cpb"`, `"pb"` or `"pbtxt"` (the file extension).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Cpb => "cpb",
            Self::Pb => "pb",
            Self::Pbtxt => "pbtxt",
        }
    }
}

impl PartialEq<str> for ModelFormat {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ModelFormat {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Display for ModelFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The file a SavedModel's fingerprint is stored in.
pub const FINGERPRINT_FILE: &str = "fingerprint.pb";

/// Largest message protobuf can serialize and parse: 2 GiB - 1.
pub const MAX_PROTO_SIZE: u64 = (1 << 31) - 1;

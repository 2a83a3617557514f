//! The one error type of this crate.

use thiserror::Error;

/// Why a mesh, layout, sharding or array could not be used. Every variant names the input
/// it is about and what is wrong with it.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DTensorError {
    /// A mesh string or `MeshProto` is not a valid mesh. `fault` is TensorFlow's message
    /// where TensorFlow rejects the input too.
    #[error("invalid mesh {input:?}: {fault}")]
    Mesh {
        /// The mesh as given (string, or `proto` for a decoded message).
        input: String,
        /// What is wrong.
        fault: String,
    },
    /// A layout string or `LayoutProto` is not a valid layout.
    #[error("invalid layout {input:?}: {fault}")]
    Layout {
        /// The layout as given.
        input: String,
        /// What is wrong.
        fault: String,
    },
    /// Bytes that should hold a protobuf message do not decode.
    #[error("cannot decode {message} from {input}: {fault}")]
    Proto {
        /// The message type expected (`tensorflow.dtensor.LayoutProto`, `xla.OpSharding`).
        message: &'static str,
        /// Where the bytes came from.
        input: String,
        /// The decoder's complaint.
        fault: String,
    },
    /// A global or local shape does not fit a layout.
    #[error("shape {shape:?} does not fit layout {layout}: {fault}")]
    Shape {
        /// The shape given.
        shape: Vec<i64>,
        /// The layout (as a string).
        layout: String,
        /// What is wrong.
        fault: String,
    },
    /// An XLA `OpSharding` cannot be converted (either direction).
    #[error("OpSharding {input}: {fault}")]
    OpSharding {
        /// The sharding (HLO text, or a description of the layout it came from).
        input: String,
        /// What is wrong.
        fault: String,
    },
    /// A JAX PartitionSpec, HLO sharding text or PyTorch placement text does not parse.
    #[error("cannot parse {what} {input:?}: {fault}")]
    Syntax {
        /// What kind of text (`PartitionSpec`, `HLO sharding`).
        what: &'static str,
        /// The text given.
        input: String,
        /// What is wrong.
        fault: String,
    },
    /// Arrays or components do not fit the layout they are used with.
    #[error("{what}: {fault}")]
    Data {
        /// Which array or component (`component 3`, `global array`).
        what: String,
        /// What is wrong.
        fault: String,
    },
    /// No relayout exists between two layouts.
    #[error("cannot relayout {from} to {to}: {fault}")]
    Relayout {
        /// The source layout.
        from: String,
        /// The target layout.
        to: String,
        /// Why not.
        fault: String,
    },
}

/// What `unbound layout` (and `plan`, `reshard`, Python) read from files and arguments is
/// not usable. Kept apart from [`DTensorError`] so the format errors stay about formats.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolError {
    /// A layout, mesh or sharding is invalid.
    #[error(transparent)]
    DTensor(#[from] DTensorError),
    /// A file could not be read or written, or holds something unusable. `fault` names the
    /// file first.
    #[error("{fault}")]
    File {
        /// The file (or directory).
        path: std::path::PathBuf,
        /// What is wrong, beginning with the path.
        fault: String,
    },
    /// An output exists already; outputs are never overwritten.
    #[error("{}: output already exists; choose a new path", path.display())]
    OutputExists {
        /// The output path.
        path: std::path::PathBuf,
    },
    /// An argument does not fit (a layout needing a mesh, a shape of the wrong rank). `fault`
    /// names the argument.
    #[error("{fault}")]
    Argument {
        /// What is wrong, naming the argument.
        fault: String,
    },
}

impl ToolError {
    pub(crate) fn file(path: &std::path::Path, fault: impl std::fmt::Display) -> ToolError {
        ToolError::File {
            path: path.to_path_buf(),
            fault: format!("{}: {fault}", path.display()),
        }
    }

    pub(crate) fn argument(fault: impl Into<String>) -> ToolError {
        ToolError::Argument {
            fault: fault.into(),
        }
    }
}

/// Why the device list of an `OTHER` `xla.OpSharding` cannot be made
/// ([`crate::expanded_devices`]). Reported as [`DTensorError::OpSharding`] of the sharding.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeviceListFault {
    /// `tile_assignment_dimensions` holds a negative size, or multiplies past 2^24 tiles.
    #[error("tile_assignment_dimensions are negative or too large")]
    TileDimensions,
    /// `iota_reshape_dims` holds a negative size, or its product overflows.
    #[error("iota_reshape_dims are negative or too large")]
    IotaDimensions,
    /// The iota form names another number of devices than there are tiles.
    #[error("iota_reshape_dims multiply to {devices}, tile dimensions to {tiles}")]
    IotaCount {
        /// The product of `iota_reshape_dims`.
        devices: i64,
        /// The number of tiles.
        tiles: i64,
    },
    /// `iota_transpose_perm` is not a permutation of the iota dimensions.
    #[error("iota_transpose_perm {perm:?} is not a permutation")]
    NotPermutation {
        /// The permutation given.
        perm: Vec<usize>,
    },
    /// `tile_assignment_devices` does not hold one device per tile.
    #[error(
        "{devices} tile_assignment_devices for tile dimensions {dimensions:?} ({tiles} tiles)"
    )]
    DeviceCount {
        /// How many devices it lists.
        devices: usize,
        /// `tile_assignment_dimensions`.
        dimensions: Vec<i64>,
        /// The number of tiles.
        tiles: i64,
    },
}

/// Results of this crate.
pub type Result<T, E = DTensorError> = std::result::Result<T, E>;

pub(crate) fn mesh_err(input: &str, fault: impl Into<String>) -> DTensorError {
    DTensorError::Mesh {
        input: input.to_string(),
        fault: fault.into(),
    }
}

pub(crate) fn layout_err(input: &str, fault: impl Into<String>) -> DTensorError {
    DTensorError::Layout {
        input: input.to_string(),
        fault: fault.into(),
    }
}

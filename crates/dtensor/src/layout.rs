//! DTensor layouts: TensorFlow's `Layout` with its string and proto formats, its rules,
//! shard indices and local shapes.

use prost::Message;
use serde::Serialize;
use unbound_proto::tensorflow::dtensor::layout_proto::LayoutType as ProtoLayoutType;
use unbound_proto::tensorflow::dtensor::{LayoutProto, ShardingSpec};

use crate::error::{layout_err, DTensorError, Result};
use crate::mesh::Mesh;
use crate::spec::{
    is_mesh_dim_spec, ANY, EMPTY_LAYOUT, MATCH, PARTED_PREFIX, SCALAR, SINGLE_DEVICE_PREFIX,
    STATIC_PREFIX, UNSHARDED,
};

/// The kind of a layout (TensorFlow's `LayoutType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LayoutType {
    /// The empty layout, on the empty mesh (`UNKNOWN` in the proto).
    #[serde(rename = "UNKNOWN")]
    Empty,
    /// One spec per tensor axis (`sharding_specs:`).
    Static,
    /// Like static, with axes treated as independent by most SPMD expanders (`parted:`).
    Parted,
    /// The whole tensor on one device (`maximal:true,`).
    SingleDevice,
}

impl LayoutType {
    /// The name of the proto enum value.
    pub fn proto_name(self) -> &'static str {
        match self {
            LayoutType::Empty => "UNKNOWN",
            LayoutType::Static => "STATIC",
            LayoutType::Parted => "PARTED",
            LayoutType::SingleDevice => "SINGLE_DEVICE",
        }
    }
}

/// A DTensor layout: a sharding spec per tensor axis on a mesh. Two layouts are equal when
/// their `LayoutProto`s are, as in TensorFlow.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Layout {
    ty: LayoutType,
    specs: Vec<String>,
    mesh: Mesh,
}

impl Default for Layout {
    fn default() -> Self {
        Layout::empty()
    }
}

/// The most dimensions a tensor has in TensorFlow (`TensorShape::MaxDimensions()`): a rank
/// given on its own (not read from the data) is refused past it.
pub const MAX_RANK: usize = 254;

impl Layout {
    /// The empty layout.
    pub fn empty() -> Layout {
        Layout {
            ty: LayoutType::Empty,
            specs: Vec::new(),
            mesh: Mesh::empty(),
        }
    }

    /// Builds and validates a layout as TensorFlow's `Layout::GetLayout` does: the type must
    /// agree with the mesh, each spec must be a mesh dimension or a reserved word, a mesh
    /// dimension may shard one axis only, and `scalar` may only stand alone (giving rank 0).
    pub fn new(ty: LayoutType, specs: Vec<String>, mesh: Mesh) -> Result<Layout> {
        let input = Layout {
            ty,
            specs: specs.clone(),
            mesh: mesh.clone(),
        }
        .to_string();
        Self::validated(ty, specs, mesh, &input)
    }

    fn validated(ty: LayoutType, specs: Vec<String>, mesh: Mesh, input: &str) -> Result<Layout> {
        if (ty == LayoutType::SingleDevice) != mesh.is_single_device() {
            return Err(layout_err(
                input,
                "type is single device, but mesh is not single device",
            ));
        }
        if (ty == LayoutType::Empty) != mesh.is_empty() {
            return Err(layout_err(input, "type is empty, but mesh is not empty"));
        }
        for spec in &specs {
            let known = matches!(spec.as_str(), UNSHARDED | ANY | MATCH | SCALAR)
                || mesh.dim_index(spec).is_some();
            if !known {
                return Err(layout_err(
                    input,
                    format!(
                        "sharding spec ({spec}) refers to mesh dimension not contained in mesh {mesh}"
                    ),
                ));
            }
        }
        for (i, spec) in specs.iter().enumerate() {
            if spec == UNSHARDED || spec == ANY {
                continue;
            }
            if spec == SCALAR {
                if specs.len() > 1 {
                    return Err(layout_err(
                        input,
                        format!(
                            "A scalar sharding_spec can only be used as a single sharding_spec \
                             instruction, not as part of list of sharding_specs as attempted here \
                             with {} sharding_specs",
                            specs.len()
                        ),
                    ));
                }
                return Ok(Layout {
                    ty,
                    specs: Vec::new(),
                    mesh,
                });
            }
            if specs[..i].contains(spec) {
                return Err(layout_err(
                    input,
                    format!(
                        "Attempted to shard two or more tensor dimensions over mesh dimension {spec}"
                    ),
                ));
            }
        }
        Ok(Layout { ty, specs, mesh })
    }

    /// A static layout of `specs` on `mesh`.
    pub fn static_on(specs: &[&str], mesh: &Mesh) -> Result<Layout> {
        Layout::new(
            LayoutType::Static,
            specs.iter().map(|s| s.to_string()).collect(),
            mesh.clone(),
        )
    }

    /// The replicated layout of rank `rank` on `mesh`; a rank past [`MAX_RANK`] is refused
    /// before anything is allocated for it.
    pub fn replicated(mesh: &Mesh, rank: usize) -> Result<Layout> {
        if rank > MAX_RANK {
            return Err(layout_err(
                &format!("replicated, rank {rank}, mesh:{mesh}"),
                format!("rank {rank} is more than TensorFlow's {MAX_RANK} dimensions"),
            ));
        }
        Layout::new(
            LayoutType::Static,
            vec![UNSHARDED.to_string(); rank],
            mesh.clone(),
        )
    }

    /// The single-device layout on a single-device mesh.
    pub fn single_device(mesh: &Mesh) -> Result<Layout> {
        Layout::new(LayoutType::SingleDevice, Vec::new(), mesh.clone())
    }

    /// Parses TensorFlow's layout string (`Layout::FromString`), with its quirks: the spec
    /// list must end with a comma (the last element is dropped), and `maximal:` ignores
    /// what follows it.
    pub fn parse(s: &str) -> Result<Layout> {
        Self::parse_with_warnings(s).map(|(l, _)| l)
    }

    /// [`Layout::parse`], plus warnings wherever TensorFlow silently reads something other
    /// than what the string says: a missing trailing comma (the last spec is dropped),
    /// `maximal:` followed by anything but `true,`, and the mesh's own warnings.
    pub fn parse_with_warnings(s: &str) -> Result<(Layout, Vec<String>)> {
        if s == EMPTY_LAYOUT {
            return Ok((Layout::empty(), Vec::new()));
        }
        let parts: Vec<&str> = s.split(' ').collect();
        if parts.len() != 2 {
            return Err(layout_err(
                s,
                format!("Expected 2 items but found {}{}", parts.len(), parts[0]),
            ));
        }
        let mesh_str = parts[1].strip_prefix("mesh:").unwrap_or(parts[1]);
        let (mesh, mut warnings) = Mesh::parse_with_warnings(mesh_str).map_err(|e| match e {
            DTensorError::Mesh { fault, .. } => layout_err(s, fault),
            other => other,
        })?;
        let head = parts[0];
        let (ty, rest) = if let Some(r) = head.strip_prefix(SINGLE_DEVICE_PREFIX) {
            (LayoutType::SingleDevice, r)
        } else if let Some(r) = head.strip_prefix(PARTED_PREFIX) {
            (LayoutType::Parted, r)
        } else if let Some(r) = head.strip_prefix(STATIC_PREFIX) {
            (LayoutType::Static, r)
        } else {
            return Err(layout_err(
                s,
                format!("Unknown layout type prefix{head} in {s}"),
            ));
        };
        let mut specs: Vec<String> = Vec::new();
        if ty == LayoutType::SingleDevice {
            if rest != "true," {
                warnings.push(format!(
                    "{SINGLE_DEVICE_PREFIX}{rest} is read as {SINGLE_DEVICE_PREFIX}true, \
                     (TensorFlow ignores what follows the prefix)"
                ));
            }
        } else {
            specs = rest.split(',').map(str::to_string).collect();
            let dropped = specs.pop().unwrap_or_default();
            if !dropped.is_empty() {
                warnings.push(format!(
                    "sharding spec {dropped:?} has no trailing comma: TensorFlow drops it, giving \
                     rank {} (write \"{rest},\")",
                    specs.len()
                ));
            }
        }
        let layout = Self::validated(ty, specs, mesh, s)?;
        Ok((layout, warnings))
    }

    /// Reads a `LayoutProto` as TensorFlow's `Layout::FromProto` does.
    pub fn from_proto(proto: &LayoutProto) -> Result<Layout> {
        let specs: Vec<String> = proto
            .sharding_specs
            .iter()
            .map(|s| s.sharding_spec.clone())
            .collect();
        let mesh = Mesh::from_proto(&proto.mesh_config.clone().unwrap_or_default()).map_err(
            |e| match e {
                DTensorError::Mesh { fault, .. } => layout_err("proto", fault),
                other => other,
            },
        )?;
        let ty = match ProtoLayoutType::try_from(proto.r#type) {
            Ok(ProtoLayoutType::Unknown) => LayoutType::Empty,
            Ok(ProtoLayoutType::Static) => LayoutType::Static,
            Ok(ProtoLayoutType::Parted) => LayoutType::Parted,
            Ok(ProtoLayoutType::SingleDevice) => LayoutType::SingleDevice,
            Err(_) => {
                return Err(layout_err(
                    "proto",
                    format!(
                        "value for type field of layout protobuf is not supported. (type {})",
                        proto.r#type
                    ),
                ))
            }
        };
        let input = Layout {
            ty,
            specs: specs.clone(),
            mesh: mesh.clone(),
        }
        .to_string();
        Self::validated(ty, specs, mesh, &input)
    }

    /// Decodes serialized `LayoutProto` bytes (`input` names them in errors).
    pub fn decode(bytes: &[u8], input: &str) -> Result<Layout> {
        let proto = LayoutProto::decode(bytes).map_err(|e| DTensorError::Proto {
            message: "tensorflow.dtensor.LayoutProto",
            input: input.to_string(),
            fault: e.to_string(),
        })?;
        Layout::from_proto(&proto)
    }

    /// The `LayoutProto` TensorFlow's `Layout::ToProto` builds.
    pub fn to_proto(&self) -> LayoutProto {
        let ty = match self.ty {
            LayoutType::Empty => ProtoLayoutType::Unknown,
            LayoutType::Static => ProtoLayoutType::Static,
            LayoutType::Parted => ProtoLayoutType::Parted,
            LayoutType::SingleDevice => ProtoLayoutType::SingleDevice,
        };
        LayoutProto {
            sharding_specs: self
                .specs
                .iter()
                .map(|s| ShardingSpec {
                    sharding_spec: s.clone(),
                })
                .collect(),
            mesh_config: Some(self.mesh.to_proto()),
            r#type: ty as i32,
        }
    }

    /// The serialized `LayoutProto`.
    pub fn encode(&self) -> Vec<u8> {
        self.to_proto().encode_to_vec()
    }

    /// The layout's kind.
    pub fn layout_type(&self) -> LayoutType {
        self.ty
    }
    /// The sharding specs, one per tensor axis.
    pub fn specs(&self) -> &[String] {
        &self.specs
    }
    /// The mesh.
    pub fn mesh(&self) -> &Mesh {
        &self.mesh
    }
    /// The tensor rank.
    pub fn rank(&self) -> usize {
        self.specs.len()
    }
    /// The empty layout.
    pub fn is_empty(&self) -> bool {
        self.ty == LayoutType::Empty
    }
    /// A single-device layout.
    pub fn is_single_device(&self) -> bool {
        self.ty == LayoutType::SingleDevice
    }

    /// The number of shards of axis `axis`: 1 if unsharded, -1 for `match` (as TensorFlow),
    /// the mesh dimension's size otherwise; `None` for `any` or an axis out of range.
    pub fn num_shards(&self, axis: usize) -> Option<i64> {
        match self.specs.get(axis)?.as_str() {
            UNSHARDED => Some(1),
            MATCH => Some(-1),
            spec => self.mesh.dim_size(spec),
        }
    }

    /// [`Layout::num_shards`] of every axis.
    pub fn num_shards_all(&self) -> Vec<Option<i64>> {
        (0..self.rank()).map(|i| self.num_shards(i)).collect()
    }

    /// Every spec is `unsharded` on a tile mesh.
    pub fn is_fully_replicated(&self) -> bool {
        self.mesh.kind() == crate::mesh::MeshKind::Tile && self.specs.iter().all(|s| s == UNSHARDED)
    }

    /// Sharded on the first axis only (TensorFlow's `IsBatchParallel()`).
    pub fn is_batch_parallel(&self) -> bool {
        if self.mesh.kind() != crate::mesh::MeshKind::Tile || self.specs.is_empty() {
            return false;
        }
        self.specs[1..].iter().all(|s| s == UNSHARDED) && self.specs[0] != UNSHARDED
    }

    /// The same layout with type `PARTED`.
    pub fn to_parted(&self) -> Layout {
        Layout {
            ty: LayoutType::Parted,
            ..self.clone()
        }
    }

    /// Equal ignoring the type, except on axes where both have one shard
    /// (`IsEquivalentIgnoringType`).
    pub fn is_equivalent_ignoring_type(&self, other: &Layout) -> bool {
        self.rank() == other.rank()
            && self.mesh == other.mesh
            && (0..self.rank()).all(|i| {
                self.specs[i] == other.specs[i]
                    || (self.num_shards(i) == Some(1) && other.num_shards(i) == Some(1))
            })
    }

    /// [`Layout::is_equivalent_ignoring_type`] with equal types (`IsEquivalent`).
    pub fn is_equivalent(&self, other: &Layout) -> bool {
        self.ty == other.ty && self.is_equivalent_ignoring_type(other)
    }

    /// The mesh dimension index each axis is sharded on (`None` if unsharded).
    /// Fails for `any` and `match`, which name no concrete sharding.
    pub fn axis_mesh_dims(&self) -> Result<Vec<Option<usize>>> {
        self.specs
            .iter()
            .map(|s| match s.as_str() {
                UNSHARDED => Ok(None),
                spec if is_mesh_dim_spec(spec) => Ok(self.mesh.dim_index(spec)),
                spec => Err(layout_err(
                    &self.to_string(),
                    format!("spec {spec:?} is not a concrete sharding"),
                )),
            })
            .collect()
    }

    /// For each mesh position, the shard index of every axis (0-based; Python's
    /// `offset_to_shard`).
    pub fn offset_to_shard(&self) -> Result<Vec<Vec<i64>>> {
        let dims = self.axis_mesh_dims()?;
        let n = self.mesh.size().unwrap_or(0).max(0);
        (0..n)
            .map(|pos| {
                let loc = self.mesh.device_location(pos)?;
                Ok(dims.iter().map(|d| d.map_or(0, |m| loc[m])).collect())
            })
            .collect()
    }

    /// The local (per-device) shape of `global`, dividing each sharded axis exactly.
    /// Unlike TensorFlow (which divides with truncation), a size that does not divide is an
    /// error. Dynamic sizes (-1) stay -1.
    pub fn local_shape(&self, global: &[i64]) -> Result<Vec<i64>> {
        self.check_rank(global)?;
        global
            .iter()
            .enumerate()
            .map(|(i, &g)| {
                let n = self.shards_for_shape(i, global)?;
                if g == -1 {
                    return Ok(-1);
                }
                if g < 0 {
                    return Err(self.shape_err(global, format!("axis {i} has negative size {g}")));
                }
                if g % n != 0 {
                    return Err(self.shape_err(
                        global,
                        format!(
                            "axis {i} of size {g} does not divide into {n} shards ({} of mesh \
                             dimension {}); TensorFlow would silently truncate it to {}",
                            n,
                            self.specs[i],
                            g / n
                        ),
                    ));
                }
                Ok(g / n)
            })
            .collect()
    }

    /// TensorFlow's own `LocalShapeFromGlobalShape`: integer division, no check.
    pub fn local_shape_truncating(&self, global: &[i64]) -> Result<Vec<i64>> {
        self.check_rank(global)?;
        if self.is_fully_replicated() {
            return Ok(global.to_vec());
        }
        (0..global.len())
            .map(|i| {
                let n = self.shards_for_shape(i, global)?;
                Ok(if global[i] == -1 { -1 } else { global[i] / n })
            })
            .collect()
    }

    /// The global shape of local shape `local` (TensorFlow's `GlobalShapeFromLocalShape`
    /// for static shapes).
    pub fn global_shape(&self, local: &[i64]) -> Result<Vec<i64>> {
        self.check_rank(local)?;
        if self.is_single_device() || self.is_fully_replicated() {
            return Ok(local.to_vec());
        }
        (0..local.len())
            .map(|i| {
                let n = self.shards_for_shape(i, local)?;
                local[i]
                    .checked_mul(n)
                    .ok_or_else(|| self.shape_err(local, format!("axis {i} overflows")))
            })
            .collect()
    }

    fn shards_for_shape(&self, axis: usize, shape: &[i64]) -> Result<i64> {
        match self.num_shards(axis) {
            Some(n) if n > 0 => Ok(n),
            _ => Err(self.shape_err(
                shape,
                format!(
                    "axis {axis} has spec {:?}, which has no shard count",
                    self.specs[axis]
                ),
            )),
        }
    }

    fn check_rank(&self, shape: &[i64]) -> Result<()> {
        if shape.len() != self.rank() {
            return Err(self.shape_err(
                shape,
                format!(
                    "rank {} given, the layout has rank {}",
                    shape.len(),
                    self.rank()
                ),
            ));
        }
        Ok(())
    }

    pub(crate) fn shape_err(&self, shape: &[i64], fault: String) -> DTensorError {
        DTensorError::Shape {
            shape: shape.to_vec(),
            layout: self.to_string(),
            fault,
        }
    }
}

impl std::fmt::Display for Layout {
    /// TensorFlow's `Layout::ToString`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.ty {
            LayoutType::Empty => return f.write_str(EMPTY_LAYOUT),
            LayoutType::SingleDevice => write!(f, "{SINGLE_DEVICE_PREFIX}true,")?,
            LayoutType::Static => f.write_str(STATIC_PREFIX)?,
            LayoutType::Parted => f.write_str(PARTED_PREFIX)?,
        }
        for spec in &self.specs {
            write!(f, "{spec},")?;
        }
        write!(f, " mesh:{}", self.mesh)
    }
}

impl std::str::FromStr for Layout {
    type Err = DTensorError;
    fn from_str(s: &str) -> Result<Layout> {
        Layout::parse(s)
    }
}

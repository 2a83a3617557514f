//! DTensor meshes: TensorFlow's `Mesh` with its string and proto formats and its rules.

use prost::Message;
use serde::Serialize;
use unbound_proto::tensorflow::dtensor::{MeshDimensionProto, MeshProto};

use crate::device::DeviceName;
use crate::error::{mesh_err, DTensorError, Result};
use crate::spec::{ANY, MATCH, UNSHARDED};

/// The string TensorFlow prints for the empty mesh.
pub const EMPTY_MESH: &str = "empty_mesh";
/// The last `|`-separated part of a mesh string that sets `use_xla_spmd`.
pub const USE_XLA_SPMD: &str = "use_xla_spmd";

/// One named dimension of a mesh.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct MeshDim {
    /// The dimension's name (`x`, `batch`).
    pub name: String,
    /// How many devices lie along it.
    pub size: i64,
}

/// Whether a mesh is a grid of devices or one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MeshKind {
    /// A grid of devices (TensorFlow's `kTile`); the empty mesh is a tile mesh with no ids.
    Tile,
    /// A single device (`kSingleDevice`): only `single_device` is set.
    SingleDevice,
}

/// A DTensor mesh. Two meshes are equal when their `MeshProto`s are, as in TensorFlow: the
/// name, local devices and `use_xla_spmd` all count.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mesh {
    kind: MeshKind,
    name: String,
    dims: Vec<MeshDim>,
    global_device_ids: Vec<i64>,
    local_device_ids: Vec<i64>,
    local_devices: Vec<String>,
    global_devices: Vec<String>,
    use_xla_spmd: bool,
    single_device: String,
}

impl Default for Mesh {
    fn default() -> Self {
        Mesh::empty()
    }
}

/// `std::stoi`: leading white space, a sign, digits; anything after the digits is ignored.
/// Returns the value and whether text was ignored.
pub(crate) fn stoi(s: &str) -> Option<(i64, bool)> {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let end = digits.bytes().take_while(u8::is_ascii_digit).count();
    if end == 0 {
        return None;
    }
    let magnitude: i64 = digits[..end].parse().ok()?;
    let value = if neg { -magnitude } else { magnitude };
    if value < i64::from(i32::MIN) || value > i64::from(i32::MAX) {
        return None;
    }
    Some((value, end != digits.len() || t.len() != s.len()))
}

fn split_nonempty(s: &str) -> Vec<&str> {
    if s.is_empty() {
        Vec::new()
    } else {
        s.split(',').collect()
    }
}

impl Mesh {
    /// The empty mesh (`empty_mesh`).
    pub fn empty() -> Mesh {
        Mesh {
            kind: MeshKind::Tile,
            name: String::new(),
            dims: Vec::new(),
            global_device_ids: Vec::new(),
            local_device_ids: Vec::new(),
            local_devices: Vec::new(),
            global_devices: Vec::new(),
            use_xla_spmd: false,
            single_device: String::new(),
        }
    }

    /// A single-device mesh on `device` (TensorFlow's `GetSingleDeviceMesh`).
    pub fn single_device(device: &str) -> Result<Mesh> {
        if device.is_empty() {
            return Err(mesh_err(device, "Single device is empty."));
        }
        Ok(Mesh {
            kind: MeshKind::SingleDevice,
            single_device: device.to_string(),
            ..Mesh::empty()
        })
    }

    /// Builds and validates a tile mesh as TensorFlow's `Mesh::GetMesh` does. With no global
    /// device ids the result is the empty mesh, as in TensorFlow.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: &str,
        dims: Vec<MeshDim>,
        global_device_ids: Vec<i64>,
        local_device_ids: Vec<i64>,
        local_devices: Vec<String>,
        global_devices: Vec<String>,
        use_xla_spmd: bool,
    ) -> Result<Mesh> {
        let mesh = Mesh {
            kind: MeshKind::Tile,
            name: name.to_string(),
            dims,
            global_device_ids,
            local_device_ids,
            local_devices,
            global_devices,
            use_xla_spmd,
            single_device: String::new(),
        };
        let input = mesh.to_string();
        mesh.check_dim_names().map_err(|f| mesh_err(&input, f))?;
        let (global_n, local_n, dev_n) = (
            mesh.global_device_ids.len(),
            mesh.local_device_ids.len(),
            mesh.local_devices.len(),
        );
        if !(global_n >= local_n && dev_n == local_n) {
            return Err(mesh_err(
                &input,
                format!(
                    "number of global_device_ids {global_n} local_devices ids {local_n} and local \
                     devices {dev_n}not meeting requirements"
                ),
            ));
        }
        if global_n == 0 {
            return Ok(Mesh::empty());
        }
        if local_n != 0 && global_n % local_n != 0 {
            return Err(mesh_err(
                &input,
                format!(
                    "Uneven local clusters with global_ids {global_n} and local_devices ids {local_n}"
                ),
            ));
        }
        if mesh.size() != Some(global_n as i64) {
            return Err(mesh_err(
                &input,
                "mesh size doesn't match number of devices",
            ));
        }
        let mut device_type: Option<String> = None;
        for device in &mesh.local_devices {
            let parsed = DeviceName::parse(device)
                .ok_or_else(|| mesh_err(&input, "Failed to parse local_devices"))?;
            let (Some(_), Some(_), Some(ty)) = (&parsed.job, &parsed.task, &parsed.device_type)
            else {
                return Err(mesh_err(
                    &input,
                    "Failed to either identify host or device type",
                ));
            };
            match &device_type {
                Some(t) if t != ty => {
                    return Err(mesh_err(
                        &input,
                        "More than one device type per mesh not supported. Found 2",
                    ))
                }
                _ => device_type = Some(ty.clone()),
            }
        }
        Ok(mesh)
    }

    /// Unique dimension names, none of them reserved (`GetAbstractMesh`).
    fn check_dim_names(&self) -> std::result::Result<(), String> {
        for (i, dim) in self.dims.iter().enumerate() {
            if self.dims[..i].iter().any(|d| d.name == dim.name) {
                return Err("repeated mesh dimension".into());
            }
            if dim.name == ANY || dim.name == MATCH || dim.name == UNSHARDED {
                return Err(format!("mesh dimension name {} is reserved", dim.name));
            }
        }
        Ok(())
    }

    /// Parses TensorFlow's mesh string (`Mesh::FromString`): `empty_mesh`, a device name
    /// (single-device mesh), `name|dims|global ids|local ids|local devices[|global
    /// devices][|use_xla_spmd]`, or the test form `name|dims|*TYPE`.
    pub fn parse(s: &str) -> Result<Mesh> {
        Self::parse_with_warnings(s).map(|(m, _)| m)
    }

    /// [`Mesh::parse`], plus warnings where TensorFlow accepts the string but quietly reads
    /// something other than what it says (numbers with trailing text, global devices that a
    /// 7-part string drops) or breaks a rule only its Python layer checks.
    pub fn parse_with_warnings(s: &str) -> Result<(Mesh, Vec<String>)> {
        let mut warnings = Vec::new();
        if s == EMPTY_MESH {
            return Ok((Mesh::empty(), warnings));
        }
        let parts: Vec<&str> = s.split('|').collect();
        if parts.len() == 1 {
            let n = parts[0].split(':').count();
            if n != 5 && n != 6 {
                return Err(mesh_err(
                    s,
                    format!("Input string is invalid: {}", parts[0]),
                ));
            }
            let mesh = Mesh::single_device(s)?;
            return Ok((mesh, warnings));
        }
        if ![3, 5, 6, 7].contains(&parts.len()) {
            return Err(mesh_err(
                s,
                format!(
                    "Expected either 5, 6, 7 or 3 mesh parts but found{}",
                    parts.len()
                ),
            ));
        }
        let name = parts[0];
        let mut dims = Vec::new();
        for dim in split_nonempty(parts[1]) {
            if dim.is_empty() {
                // TensorFlow reads an empty entry as a dimension "" of size 0.
                warnings.push(format!("empty mesh dimension entry in {:?}", parts[1]));
                dims.push(MeshDim {
                    name: String::new(),
                    size: 0,
                });
                continue;
            }
            let pieces: Vec<&str> = dim.split('=').collect();
            if pieces.len() < 2 {
                return Err(mesh_err(
                    s,
                    format!("mesh dimension {dim:?} has no size (expected name=size)"),
                ));
            }
            let (size, junk) = stoi(pieces[1]).ok_or_else(|| {
                mesh_err(
                    s,
                    format!("stoi: mesh dimension size {:?} is not a number", pieces[1]),
                )
            })?;
            if junk || pieces.len() > 2 {
                warnings.push(format!(
                    "mesh dimension {dim:?} read as {}={size}",
                    pieces[0]
                ));
            }
            dims.push(MeshDim {
                name: pieces[0].to_string(),
                size,
            });
        }
        if parts.len() == 3 {
            return Self::generate_for_tests(s, name, dims, parts[2]).map(|m| (m, warnings));
        }
        let ids = |text: &str, what: &str, warnings: &mut Vec<String>| -> Result<Vec<i64>> {
            split_nonempty(text)
                .into_iter()
                .map(|id| {
                    let (v, junk) = stoi(id).ok_or_else(|| {
                        mesh_err(s, format!("stoi: {what} {id:?} is not a number"))
                    })?;
                    if junk {
                        warnings.push(format!("{what} {id:?} read as {v}"));
                    }
                    Ok(v)
                })
                .collect()
        };
        let global_ids = ids(parts[2], "global device id", &mut warnings)?;
        let local_ids = ids(parts[3], "local device id", &mut warnings)?;
        let local_devices: Vec<String> = split_nonempty(parts[4])
            .into_iter()
            .map(str::to_string)
            .collect();
        let mut use_xla_spmd = false;
        let mut global_devices = Vec::new();
        if parts.len() == 6 && !parts[5].is_empty() {
            if parts[5] == USE_XLA_SPMD {
                use_xla_spmd = true;
            } else {
                global_devices = parts[5].split(',').map(str::to_string).collect();
            }
        }
        if parts.len() == 7 {
            if !parts[5].is_empty() {
                warnings.push(
                    "TensorFlow ignores the global devices of a 7-part mesh string (only a 6-part \
                     string sets them); they are dropped"
                        .to_string(),
                );
            }
            if !parts[6].is_empty() {
                if parts[6] == USE_XLA_SPMD {
                    use_xla_spmd = true;
                } else {
                    return Err(mesh_err(
                        s,
                        format!(
                            "Expected string {USE_XLA_SPMD}as the 7th argument but got: {}",
                            parts[6]
                        ),
                    ));
                }
            }
        }
        let mesh = Mesh::new(
            name,
            dims,
            global_ids,
            local_ids,
            local_devices,
            global_devices,
            use_xla_spmd,
        )
        .map_err(|e| match e {
            DTensorError::Mesh { fault, .. } => mesh_err(s, fault),
            other => other,
        })?;
        warnings.extend(mesh.python_rule_warnings());
        Ok((mesh, warnings))
    }

    /// `name|dims|*TYPE`: devices `/job:localhost/task:0/device:TYPE:i` for every position.
    fn generate_for_tests(s: &str, name: &str, dims: Vec<MeshDim>, gen: &str) -> Result<Mesh> {
        let pieces: Vec<&str> = gen.split('*').collect();
        if pieces.len() != 2 {
            return Err(mesh_err(
                s,
                format!("Expected a * in mesh_gen_instructions but found {gen}"),
            ));
        }
        let size = if dims.is_empty() {
            0
        } else {
            dims.iter().map(|d| d.size).product::<i64>()
        };
        let n = size.clamp(0, 1 << 20);
        if size > n {
            return Err(mesh_err(
                s,
                format!("mesh of {size} devices is too large to generate"),
            ));
        }
        let ids: Vec<i64> = (0..n).collect();
        let devices = ids
            .iter()
            .map(|i| format!("/job:localhost/task:0/device:{}:{i}", pieces[1]))
            .collect();
        Mesh::new(name, dims, ids.clone(), ids, devices, Vec::new(), false).map_err(|e| match e {
            DTensorError::Mesh { fault, .. } => mesh_err(s, fault),
            other => other,
        })
    }

    /// Rules TensorFlow's Python `Mesh` enforces but its C++ parser does not.
    pub fn python_rule_warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.kind != MeshKind::Tile || self.is_empty() {
            return out;
        }
        let first = self.global_device_ids[0];
        if self
            .global_device_ids
            .iter()
            .enumerate()
            .any(|(i, &id)| id != first + i as i64)
        {
            out.push("global device ids do not increase by one (tf.experimental.dtensor.Mesh rejects this)".into());
        }
        let mut seen = std::collections::HashSet::new();
        let all_cpu = self.device_type() == "CPU";
        if !all_cpu && self.local_devices.iter().any(|d| !seen.insert(d)) {
            out.push("duplicate local devices".into());
        }
        if self.use_xla_spmd && self.device_type() != "TPU" {
            out.push(format!(
                "use_xla_spmd on a {} mesh (tf.experimental.dtensor.Mesh allows it only on TPU)",
                self.device_type()
            ));
        }
        out
    }

    /// Reads a `MeshProto` as TensorFlow's `Mesh::ParseFromProto` does (which checks only
    /// that the dimension sizes multiply to the number of global ids).
    pub fn from_proto(proto: &MeshProto) -> Result<Mesh> {
        if !proto.single_device.is_empty() {
            return Ok(Mesh {
                kind: MeshKind::SingleDevice,
                name: proto.name.clone(),
                use_xla_spmd: proto.use_xla_spmd,
                single_device: proto.single_device.clone(),
                ..Mesh::empty()
            });
        }
        let mesh = Mesh {
            kind: MeshKind::Tile,
            name: proto.name.clone(),
            dims: proto
                .mesh_dimensions
                .iter()
                .map(|d| MeshDim {
                    name: d.name.clone(),
                    size: d.size,
                })
                .collect(),
            global_device_ids: proto.global_device_ids.clone(),
            local_device_ids: proto.local_device_ids.clone(),
            local_devices: proto.local_devices.clone(),
            global_devices: proto.global_devices.clone(),
            use_xla_spmd: proto.use_xla_spmd,
            single_device: String::new(),
        };
        let n = proto.global_device_ids.len() as i64;
        if let Some(size) = mesh.size() {
            if size > 0 && size != n {
                return Err(mesh_err(
                    "proto",
                    format!("Number of devices {n} not matching mesh size {size}"),
                ));
            }
        }
        Ok(mesh)
    }

    /// Decodes serialized `MeshProto` bytes (`input` names them in errors).
    pub fn decode(bytes: &[u8], input: &str) -> Result<Mesh> {
        let proto = MeshProto::decode(bytes).map_err(|e| DTensorError::Proto {
            message: "tensorflow.dtensor.MeshProto",
            input: input.to_string(),
            fault: e.to_string(),
        })?;
        Mesh::from_proto(&proto)
    }

    /// The `MeshProto` TensorFlow's `Mesh::ToProto` builds.
    pub fn to_proto(&self) -> MeshProto {
        let mut p = MeshProto {
            name: self.name.clone(),
            use_xla_spmd: self.use_xla_spmd,
            ..Default::default()
        };
        match self.kind {
            MeshKind::Tile => {
                p.local_devices = self.local_devices.clone();
                p.local_device_ids = self.local_device_ids.clone();
                p.global_device_ids = self.global_device_ids.clone();
                p.mesh_dimensions = self
                    .dims
                    .iter()
                    .map(|d| MeshDimensionProto {
                        name: d.name.clone(),
                        size: d.size,
                    })
                    .collect();
                p.global_devices = self.global_devices.clone();
            }
            MeshKind::SingleDevice => p.single_device = self.single_device.clone(),
        }
        p
    }

    /// The serialized `MeshProto` (deterministic: fields in number order).
    pub fn encode(&self) -> Vec<u8> {
        self.to_proto().encode_to_vec()
    }

    /// Grid or single device.
    pub fn kind(&self) -> MeshKind {
        self.kind
    }
    /// The mesh name (may be empty).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The dimensions, in order (the last changes fastest).
    pub fn dims(&self) -> &[MeshDim] {
        &self.dims
    }
    /// The dimension names.
    pub fn dim_names(&self) -> Vec<&str> {
        self.dims.iter().map(|d| d.name.as_str()).collect()
    }
    /// The dimension sizes.
    pub fn shape(&self) -> Vec<i64> {
        self.dims.iter().map(|d| d.size).collect()
    }
    /// The global device id at each mesh position, row-major.
    pub fn global_device_ids(&self) -> &[i64] {
        &self.global_device_ids
    }
    /// The ids of this client's devices, in local-device order.
    pub fn local_device_ids(&self) -> &[i64] {
        &self.local_device_ids
    }
    /// This client's device names, one per local id.
    pub fn local_devices(&self) -> &[String] {
        &self.local_devices
    }
    /// Every device's name, when the mesh lists them.
    pub fn global_devices(&self) -> &[String] {
        &self.global_devices
    }
    /// Whether XLA SPMD partitions programs on this mesh.
    pub fn use_xla_spmd(&self) -> bool {
        self.use_xla_spmd
    }
    /// The device of a single-device mesh (empty otherwise).
    pub fn single_device_name(&self) -> &str {
        &self.single_device
    }
    /// A tile mesh with no global ids.
    pub fn is_empty(&self) -> bool {
        self.kind == MeshKind::Tile && self.global_device_ids.is_empty()
    }
    /// A single-device mesh.
    pub fn is_single_device(&self) -> bool {
        self.kind == MeshKind::SingleDevice
    }
    /// Global ids but no local ones: every device belongs to other clients.
    pub fn is_remote(&self) -> bool {
        self.local_device_ids.is_empty() && !self.global_device_ids.is_empty()
    }
    /// The product of the dimension sizes (0 for no dimensions); `None` on overflow.
    pub fn size(&self) -> Option<i64> {
        if self.dims.is_empty() {
            return Some(0);
        }
        self.dims
            .iter()
            .try_fold(1i64, |acc, d| acc.checked_mul(d.size))
    }
    /// The number of global device ids.
    pub fn num_devices(&self) -> usize {
        self.global_device_ids.len()
    }
    /// The device type: of the single device, else of the first global device, else of the
    /// first local one; empty when there is none (TensorFlow reads past its list there).
    pub fn device_type(&self) -> String {
        if self.is_empty() {
            return String::new();
        }
        let device = if self.is_single_device() {
            Some(&self.single_device)
        } else {
            self.global_devices.first().or(self.local_devices.first())
        };
        let Some(device) = device else {
            return String::new();
        };
        // TensorFlow ignores whether the parse succeeded and reads the type it got to.
        DeviceName::parse_partial(device)
            .1
            .device_type
            .unwrap_or_default()
    }

    /// The index of dimension `name`.
    pub fn dim_index(&self, name: &str) -> Option<usize> {
        self.dims.iter().position(|d| d.name == name)
    }
    /// The size of dimension `name`.
    pub fn dim_size(&self, name: &str) -> Option<i64> {
        self.dims.iter().find(|d| d.name == name).map(|d| d.size)
    }

    /// The coordinates of mesh position `offset`, row-major with the last dimension fastest
    /// (TensorFlow's `device_location`).
    pub fn device_location(&self, offset: i64) -> Result<Vec<i64>> {
        let size = self.size().unwrap_or(0);
        if offset < 0 || offset > size - 1 {
            return Err(mesh_err(
                &self.to_string(),
                format!(
                    "Mesh offset cannot be negative or exceed Mesh's size. Offset size:{offset} \
                     and Mesh size:{size}"
                ),
            ));
        }
        let mut loc = vec![0; self.dims.len()];
        let mut rest = offset;
        for (i, d) in self.dims.iter().enumerate().rev() {
            loc[i] = rest % d.size;
            rest /= d.size;
        }
        Ok(loc)
    }

    /// The mesh position of coordinates `loc` (`GetFlattenedCoordinate`).
    pub fn flattened_position(&self, loc: &[i64]) -> i64 {
        let mut acc = 1;
        let mut pos = 0;
        for (i, d) in self.dims.iter().enumerate().rev() {
            pos += loc.get(i).copied().unwrap_or(0) * acc;
            acc *= d.size;
        }
        pos
    }

    /// The mesh position of each local device, in local-device order.
    pub fn local_positions(&self) -> Result<Vec<usize>> {
        self.local_device_ids
            .iter()
            .map(|id| {
                self.global_device_ids
                    .iter()
                    .position(|g| g == id)
                    .ok_or_else(|| {
                        mesh_err(
                            &self.to_string(),
                            format!("local device id {id} is not a global device id"),
                        )
                    })
            })
            .collect()
    }

    /// The mesh of the host CPUs of this mesh's devices (TensorFlow's `host_mesh`: the same
    /// dimensions and ids, local devices rewritten to `device:CPU`, no name, no global
    /// devices, no XLA SPMD).
    pub fn host_mesh(&self) -> Result<Mesh> {
        if self.is_single_device() || self.is_empty() {
            // TensorFlow rewrites the (absent) local devices: no ids left, the empty mesh.
            return Ok(Mesh::empty());
        }
        let mut devices = Vec::with_capacity(self.local_devices.len());
        for d in &self.local_devices {
            let p = DeviceName::parse(d)
                .ok_or_else(|| mesh_err(&self.to_string(), "Failed to parse local devices"))?;
            devices.push(DeviceName::full_name(
                p.job.as_deref().unwrap_or(""),
                p.replica.unwrap_or(0),
                p.task.unwrap_or(0),
                "CPU",
                p.id.unwrap_or(0),
            ));
        }
        Mesh::new(
            "",
            self.dims.clone(),
            self.global_device_ids.clone(),
            self.local_device_ids.clone(),
            devices,
            Vec::new(),
            false,
        )
    }
}

impl std::fmt::Display for Mesh {
    /// TensorFlow's `Mesh::ToString`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_empty() {
            return f.write_str(EMPTY_MESH);
        }
        if self.is_single_device() {
            return f.write_str(&self.single_device);
        }
        let join = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        let dims: Vec<String> = self
            .dims
            .iter()
            .map(|d| format!("{}={}", d.name, d.size))
            .collect();
        write!(
            f,
            "{}|{}|{}|{}|{}",
            self.name,
            dims.join(","),
            join(&self.global_device_ids),
            join(&self.local_device_ids),
            self.local_devices.join(",")
        )?;
        if !self.global_devices.is_empty() {
            write!(f, "|{}", self.global_devices.join(","))?;
        }
        if self.use_xla_spmd {
            write!(f, "|{USE_XLA_SPMD}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Mesh {
    type Err = DTensorError;
    fn from_str(s: &str) -> Result<Mesh> {
        Mesh::parse(s)
    }
}

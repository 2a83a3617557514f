//! TensorFlow device names: which device type a `NodeDef.device` names.
//!
//! The grammar is that of TensorFlow's `DeviceNameUtils` (`xla/tsl/util/device_name_utils.cc`,
//! formerly `tensorflow/core/util/device_name_utils.cc`):
//!
//! - a *full name* is a sequence of `/job:<name>`, `/replica:<n>`, `/task:<n>`,
//!   `/device:<TYPE>[:<id>]` and the legacy `/cpu:<id>` / `/gpu:<id>` (also `/CPU:`, `/GPU:`)
//!   parts; each value may be `*` (unspecified). `""` and `"/"` are valid and name nothing.
//!   A job name and a device type start with a letter and continue with letters, digits and
//!   `_`; numbers are decimal digits.
//! - a *local name* is `<TYPE>:<id>`, for instance `CPU:0`.
//!
//! The legacy lowercase forms map to the upper-case types: `/cpu:0` is type `CPU`, `/gpu:1`
//! is type `GPU`. Device types are otherwise kept as written (`/device:cpu:0` is type `cpu`).

use std::collections::BTreeSet;

use unbound_proto::tensorflow::GraphDef;

/// A device name that TensorFlow's parser would reject.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// `device` is not a device name (`DeviceNameUtils::ParseFullName` and `ParseLocalName`
    /// both fail).
    #[error("Unable to parse {device} as a device name")]
    Unparsable {
        /// The device string as written.
        device: String,
    },
    /// A node's `device` field cannot be parsed; the message is TensorFlow's meta optimizer's
    /// (`GetGraphDevice`), followed by the node's name.
    #[error("Unable to parse {device} as a device name (node '{node}')")]
    Node {
        /// The node's name.
        node: String,
        /// The node's `device` field.
        device: String,
    },
}

/// The parts of a device name, as TensorFlow's `DeviceNameUtils::ParsedName`. `None` means the
/// part is absent or `*`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedName {
    /// `/job:<job>`.
    pub job: Option<String>,
    /// `/replica:<n>`.
    pub replica: Option<u64>,
    /// `/task:<n>`.
    pub task: Option<u64>,
    /// The device type: `/device:<TYPE>`, or `CPU`/`GPU` for the legacy forms.
    pub device_type: Option<String>,
    /// The device id, the number after the type.
    pub id: Option<u64>,
}

/// Parses a full device name (`DeviceNameUtils::ParseFullName`); `None` when TensorFlow would
/// reject it.
pub fn parse_full_name(name: &str) -> Option<ParsedName> {
    let mut parsed = ParsedName::default();
    if name == "/" {
        return Some(parsed);
    }
    let mut rest = name;
    while !rest.is_empty() {
        let mut progress = false;
        if let Some(r) = rest.strip_prefix("/job:") {
            rest = r;
            parsed.job = match star(&mut rest) {
                true => None,
                false => Some(consume_identifier(&mut rest, &['/'])?),
            };
            progress = true;
        }
        if let Some(r) = rest.strip_prefix("/replica:") {
            rest = r;
            parsed.replica = optional_number(&mut rest)?;
            progress = true;
        }
        if let Some(r) = rest.strip_prefix("/task:") {
            rest = r;
            parsed.task = optional_number(&mut rest)?;
            progress = true;
        }
        if let Some(r) = rest.strip_prefix("/device:") {
            rest = r;
            parsed.device_type = match star(&mut rest) {
                true => None,
                false => Some(consume_identifier(&mut rest, &['/', ':'])?),
            };
            parsed.id = match rest.strip_prefix(':') {
                None => None,
                Some(r) => {
                    rest = r;
                    optional_number(&mut rest)?
                }
            };
            progress = true;
        }
        // The legacy forms `/cpu:<id>` and `/gpu:<id>` (either case) mean `/device:CPU:<id>`
        // and `/device:GPU:<id>`.
        for (prefixes, device_type) in [(["/cpu:", "/CPU:"], "CPU"), (["/gpu:", "/GPU:"], "GPU")] {
            if let Some(r) = prefixes.iter().find_map(|p| rest.strip_prefix(p)) {
                rest = r;
                parsed.device_type = Some(device_type.to_string());
                parsed.id = optional_number(&mut rest)?;
                progress = true;
            }
        }
        if !progress {
            return None;
        }
    }
    Some(parsed)
}

/// Parses a local device name `<TYPE>:<id>` (`DeviceNameUtils::ParseLocalName`).
pub fn parse_local_name(name: &str) -> Option<ParsedName> {
    let mut rest = name;
    let device_type = consume_identifier(&mut rest, &['/', ':'])?;
    rest = rest.strip_prefix(':')?;
    let id = consume_number(&mut rest)?;
    rest.is_empty().then(|| ParsedName {
        device_type: Some(device_type),
        id: Some(id),
        ..ParsedName::default()
    })
}

/// Parses a full or else a local device name (`DeviceNameUtils::ParseFullOrLocalName`).
pub fn parse_full_or_local_name(name: &str) -> Option<ParsedName> {
    parse_full_name(name).or_else(|| parse_local_name(name))
}

/// The device type a device name carries (`"CPU"` for `/job:localhost/replica:0/task:0/device:CPU:0`,
/// `/cpu:0` or `CPU:0`); `None` when the name has no type (`""`, `/job:w/task:1`,
/// `/device:*:0`). Full and local names are accepted.
pub fn device_type(device: &str) -> Result<Option<String>, DeviceError> {
    parse_full_or_local_name(device)
        .map(|parsed| parsed.device_type)
        .ok_or_else(|| DeviceError::Unparsable {
            device: device.to_string(),
        })
}

/// The device types named by the `device` fields of `graph`'s nodes, as TensorFlow's meta
/// optimizer collects them (`GetGraphDevice`) to choose which plugin optimizers run.
///
/// Like TensorFlow, each field is parsed as a *full* name: a local name such as `CPU:0` is an
/// error, as is anything unparsable. Nodes without a device, or whose device names no type,
/// add nothing (TensorFlow adds the empty type `""`, which no plugin can usefully register).
pub fn graph_device_types(graph: &GraphDef) -> Result<BTreeSet<String>, DeviceError> {
    let mut types = BTreeSet::new();
    for node in &graph.node {
        let parsed = parse_full_name(&node.device).ok_or_else(|| DeviceError::Node {
            node: node.name.clone(),
            device: node.device.clone(),
        })?;
        if let Some(device_type) = parsed.device_type.filter(|t| !t.is_empty()) {
            types.insert(device_type);
        }
    }
    Ok(types)
}

/// Consumes a leading `*`.
fn star(rest: &mut &str) -> bool {
    match rest.strip_prefix('*') {
        Some(r) => {
            *rest = r;
            true
        }
        None => false,
    }
}

/// Consumes a job name or device type: a letter, then letters, digits and `_` up to the first
/// terminator (or the end). Fails if anything else comes before the terminator.
fn consume_identifier(rest: &mut &str, terminators: &[char]) -> Option<String> {
    if !rest.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    let end = rest.find(terminators).unwrap_or(rest.len());
    let (identifier, tail) = rest.split_at(end);
    if !identifier
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return None;
    }
    *rest = tail;
    Some(identifier.to_string())
}

/// `*` (no value) or a decimal number; `None` (outer) when it is neither.
fn optional_number(rest: &mut &str) -> Option<Option<u64>> {
    if star(rest) {
        return Some(None);
    }
    consume_number(rest).map(Some)
}

/// Consumes leading decimal digits (at least one) that fit in a `u64`, as
/// `str_util::ConsumeLeadingDigits`.
fn consume_number(rest: &mut &str) -> Option<u64> {
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    if end == 0 {
        return None;
    }
    let value = rest[..end].parse::<u64>().ok()?;
    *rest = &rest[end..];
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbound_proto::tensorflow::NodeDef;

    fn ty(device: &str) -> Option<String> {
        device_type(device).unwrap()
    }

    #[test]
    fn full_names() {
        let full = parse_full_name("/job:localhost/replica:0/task:0/device:CPU:0").unwrap();
        assert_eq!(
            full,
            ParsedName {
                job: Some("localhost".into()),
                replica: Some(0),
                task: Some(0),
                device_type: Some("CPU".into()),
                id: Some(0),
            }
        );
        assert_eq!(ty("/device:GPU:1").as_deref(), Some("GPU"));
        assert_eq!(ty("/device:XPU:*").as_deref(), Some("XPU"));
        assert_eq!(ty("/device:MY_DEVICE").as_deref(), Some("MY_DEVICE"));
        assert_eq!(ty("/device:*:0"), None);
        assert_eq!(ty("/job:w/task:1"), None);
        assert_eq!(ty("/job:*/replica:*"), None);
        assert_eq!(ty(""), None);
        assert_eq!(ty("/"), None);
        // Parts may come in any order and repeat; the last one wins.
        assert_eq!(ty("/device:GPU:0/job:w").as_deref(), Some("GPU"));
        assert_eq!(ty("/device:GPU:0/device:TPU:1").as_deref(), Some("TPU"));
        // Types are kept as written.
        assert_eq!(ty("/device:cpu:0").as_deref(), Some("cpu"));
    }

    #[test]
    fn legacy_names() {
        assert_eq!(ty("/cpu:0").as_deref(), Some("CPU"));
        assert_eq!(ty("/CPU:3").as_deref(), Some("CPU"));
        assert_eq!(ty("/gpu:0").as_deref(), Some("GPU"));
        assert_eq!(ty("/job:a/replica:1/task:2/gpu:*").as_deref(), Some("GPU"));
        assert_eq!(parse_full_name("/gpu:*").unwrap().id, None);
        assert!(parse_full_name("/cpu:x").is_none());
        assert!(parse_full_name("/tpu:0").is_none());
    }

    #[test]
    fn local_names() {
        assert_eq!(ty("CPU:0").as_deref(), Some("CPU"));
        assert_eq!(ty("XLA_GPU:12").as_deref(), Some("XLA_GPU"));
        assert!(parse_full_name("CPU:0").is_none());
        assert!(parse_local_name("CPU").is_none());
        assert!(parse_local_name("CPU:").is_none());
        assert!(parse_local_name("CPU:0x").is_none());
        assert!(parse_local_name("0PU:0").is_none());
    }

    #[test]
    fn bad_names() {
        for bad in [
            "/device:",
            "/device:1CPU:0",
            "/device:CP-U:0",
            "/device:CPU:a",
            "/job:",
            "/job:1x",
            "/job:a-b",
            "/replica:x",
            "/task:",
            "/foo:0",
            "device:CPU:0",
            "/device:CPU:0 ",
            "/replica:99999999999999999999999",
            "/device:CPÜ:0",
        ] {
            assert!(
                matches!(device_type(bad), Err(DeviceError::Unparsable { .. })),
                "{bad:?} parsed"
            );
        }
    }

    #[test]
    fn graph_types() {
        let node = |name: &str, device: &str| NodeDef {
            name: name.into(),
            device: device.into(),
            ..Default::default()
        };
        let mut graph = GraphDef {
            node: vec![
                node("a", ""),
                node("b", "/job:localhost/replica:0/task:0/device:CPU:0"),
                node("c", "/gpu:0"),
                node("d", "/device:GPU:1"),
                node("e", "/job:w"),
            ],
            ..Default::default()
        };
        let types = graph_device_types(&graph).unwrap();
        assert_eq!(types.into_iter().collect::<Vec<_>>(), ["CPU", "GPU"]);

        graph.node.push(node("local", "CPU:0"));
        let err = graph_device_types(&graph).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Unable to parse CPU:0 as a device name (node 'local')"
        );
    }
}

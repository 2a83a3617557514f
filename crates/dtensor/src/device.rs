//! TensorFlow device names (`/job:localhost/replica:0/task:0/device:CPU:0`), parsed as
//! `DeviceNameUtils::ParseFullOrLocalName` does for the parts a mesh needs.

/// The parts of a device name; `None` where the name leaves a part out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceName {
    /// `/job:NAME`.
    pub job: Option<String>,
    /// `/replica:N`.
    pub replica: Option<i64>,
    /// `/task:N`.
    pub task: Option<i64>,
    /// The device type (`CPU`, `GPU`, `TPU`, ...).
    pub device_type: Option<String>,
    /// The device id; `None` for `*` or when absent.
    pub id: Option<i64>,
}

impl DeviceName {
    /// Parses a full name (`/job:a/replica:0/task:0/device:CPU:0`, legacy `/cpu:0` pieces
    /// included) or a local one (`CPU:0`). `None` if it is neither.
    pub fn parse(name: &str) -> Option<DeviceName> {
        parse_full(name).or_else(|| parse_local(name))
    }

    /// The canonical full name TensorFlow's `DeviceNameUtils::FullName` prints.
    pub fn full_name(job: &str, replica: i64, task: i64, device_type: &str, id: i64) -> String {
        format!("/job:{job}/replica:{replica}/task:{task}/device:{device_type}:{id}")
    }
}

fn is_job_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_type_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn number(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn id_or_star(s: &str) -> Option<Option<i64>> {
    if s == "*" {
        Some(None)
    } else {
        number(s).map(Some)
    }
}

fn parse_full(name: &str) -> Option<DeviceName> {
    let mut out = DeviceName::default();
    if name.is_empty() {
        return Some(out);
    }
    let rest = name.strip_prefix('/')?;
    for piece in rest.split('/') {
        let (key, value) = piece.split_once(':')?;
        match key {
            "job" if is_job_name(value) => out.job = Some(value.to_string()),
            "replica" => out.replica = Some(number(value)?),
            "task" => out.task = Some(number(value)?),
            "device" => {
                let (ty, id) = match value.split_once(':') {
                    Some((ty, id)) => (ty, id_or_star(id)?),
                    None => (value, None),
                };
                if ty != "*" && !is_type_name(ty) {
                    return None;
                }
                out.device_type = (ty != "*").then(|| ty.to_string());
                out.id = id;
            }
            "cpu" | "gpu" => {
                out.device_type = Some(key.to_ascii_uppercase());
                out.id = id_or_star(value)?;
            }
            _ => return None,
        }
    }
    Some(out)
}

fn parse_local(name: &str) -> Option<DeviceName> {
    let (ty, id) = name.split_once(':')?;
    if !is_type_name(ty) {
        return None;
    }
    let ty = match ty {
        "cpu" | "gpu" => ty.to_ascii_uppercase(),
        _ => ty.to_string(),
    };
    Some(DeviceName {
        device_type: Some(ty),
        id: id_or_star(id)?,
        ..DeviceName::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_local_and_bad_names() {
        let d = DeviceName::parse("/job:localhost/replica:0/task:1/device:CPU:3").unwrap();
        assert_eq!(d.job.as_deref(), Some("localhost"));
        assert_eq!((d.replica, d.task, d.id), (Some(0), Some(1), Some(3)));
        assert_eq!(d.device_type.as_deref(), Some("CPU"));
        let d = DeviceName::parse("/job:w/task:0/cpu:1").unwrap();
        assert_eq!(d.device_type.as_deref(), Some("CPU"));
        let d = DeviceName::parse("TPU:2").unwrap();
        assert_eq!(
            (d.device_type.as_deref(), d.id, d.job),
            (Some("TPU"), Some(2), None)
        );
        for bad in [
            "foo",
            "/job:/task:0",
            "/job:a/task:x/device:CPU:0",
            "/unknown:1",
        ] {
            assert_eq!(DeviceName::parse(bad), None, "{bad}");
        }
    }
}

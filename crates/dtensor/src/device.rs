//! TensorFlow device names (`/job:localhost/replica:0/task:0/device:CPU:0`), parsed the way
//! `DeviceNameUtils::ParseFullOrLocalName` does, including what it leaves behind when it
//! fails (TensorFlow reads the device type of a mesh from such partial results).

/// The parts of a device name; `None` where the name leaves a part out (or gives `*`).
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
    /// The device id.
    pub id: Option<i64>,
}

/// A name (job or device type): a letter, then letters, digits and `_`, up to one of
/// `terminators`. Returns it and the rest.
fn consume_name<'a>(s: &'a str, terminators: &[char]) -> Option<(&'a str, &'a str)> {
    if !s.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    let end = s.find(terminators).unwrap_or(s.len());
    let name = &s[..end];
    name.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
        .then_some((name, &s[end..]))
}

/// Leading decimal digits.
fn consume_number(s: &str) -> Option<(i64, &str)> {
    let end = s.bytes().take_while(u8::is_ascii_digit).count();
    let value = s[..end].parse::<u64>().ok()?;
    Some((value as i32 as i64, &s[end..]))
}

impl DeviceName {
    /// Parses a full name (`/job:a/replica:0/task:0/device:CPU:0`, in any order, with `*`
    /// parts and the legacy `/cpu:0`, `/GPU:1` pieces) or a local one (`CPU:0`). `None` if it
    /// is neither.
    pub fn parse(name: &str) -> Option<DeviceName> {
        let (ok, parsed) = Self::parse_partial(name);
        ok.then_some(parsed)
    }

    /// TensorFlow's `ParseFullOrLocalName`: whether it succeeded, and the parts it filled in
    /// on the way (kept on failure, as TensorFlow keeps them).
    pub fn parse_partial(name: &str) -> (bool, DeviceName) {
        let mut p = DeviceName::default();
        if parse_full(name, &mut p) {
            return (true, p);
        }
        let ok = parse_local(name, &mut p);
        (ok, p)
    }

    /// The canonical full name TensorFlow's `DeviceNameUtils::FullName` prints.
    pub fn full_name(job: &str, replica: i64, task: i64, device_type: &str, id: i64) -> String {
        format!("/job:{job}/replica:{replica}/task:{task}/device:{device_type}:{id}")
    }
}

/// `*` (the part is unset) or a number.
fn star_or_number<'a>(s: &'a str, slot: &mut Option<i64>) -> Option<&'a str> {
    if let Some(rest) = s.strip_prefix('*') {
        *slot = None;
        return Some(rest);
    }
    let (v, rest) = consume_number(s)?;
    *slot = Some(v);
    Some(rest)
}

fn parse_full(name: &str, p: &mut DeviceName) -> bool {
    let mut s = name;
    if s == "/" {
        return true;
    }
    while !s.is_empty() {
        let mut progress = false;
        if let Some(rest) = s.strip_prefix("/job:") {
            s = if let Some(r) = rest.strip_prefix('*') {
                p.job = None;
                r
            } else {
                let Some((job, r)) = consume_name(rest, &['/']) else {
                    return false;
                };
                p.job = Some(job.to_string());
                r
            };
            progress = true;
        }
        if let Some(rest) = s.strip_prefix("/replica:") {
            let Some(r) = star_or_number(rest, &mut p.replica) else {
                return false;
            };
            s = r;
            progress = true;
        }
        if let Some(rest) = s.strip_prefix("/task:") {
            let Some(r) = star_or_number(rest, &mut p.task) else {
                return false;
            };
            s = r;
            progress = true;
        }
        if let Some(rest) = s.strip_prefix("/device:") {
            s = if let Some(r) = rest.strip_prefix('*') {
                p.device_type = None;
                r
            } else {
                let Some((ty, r)) = consume_name(rest, &['/', ':']) else {
                    return false;
                };
                p.device_type = Some(ty.to_string());
                r
            };
            match s.strip_prefix(':') {
                None => p.id = None,
                Some(rest) => {
                    let Some(r) = star_or_number(rest, &mut p.id) else {
                        return false;
                    };
                    s = r;
                }
            }
            progress = true;
        }
        for (legacy, ty) in [
            ("/cpu:", "CPU"),
            ("/CPU:", "CPU"),
            ("/gpu:", "GPU"),
            ("/GPU:", "GPU"),
        ] {
            if let Some(rest) = s.strip_prefix(legacy) {
                p.device_type = Some(ty.to_string());
                let Some(r) = star_or_number(rest, &mut p.id) else {
                    return false;
                };
                s = r;
                progress = true;
            }
        }
        if !progress {
            return false;
        }
    }
    true
}

fn parse_local(name: &str, p: &mut DeviceName) -> bool {
    let Some((ty, rest)) = consume_name(name, &['/', ':']) else {
        return false;
    };
    p.device_type = Some(ty.to_string());
    let Some(rest) = rest.strip_prefix(':') else {
        return false;
    };
    let Some((id, rest)) = consume_number(rest) else {
        return false;
    };
    p.id = Some(id);
    rest.is_empty()
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
        let d = DeviceName::parse("/task:2/job:w/GPU:1").unwrap();
        assert_eq!(
            (d.job.as_deref(), d.task, d.device_type.as_deref()),
            (Some("w"), Some(2), Some("GPU"))
        );
        let d = DeviceName::parse("/job:*/task:0/device:TPU").unwrap();
        assert_eq!((d.job, d.id), (None, None));
        let d = DeviceName::parse("TPU:2").unwrap();
        assert_eq!(
            (d.device_type.as_deref(), d.id, d.job),
            (Some("TPU"), Some(2), None)
        );
        // Local names keep their case.
        assert_eq!(
            DeviceName::parse("cpu:0").unwrap().device_type.as_deref(),
            Some("cpu")
        );
        for bad in [
            "foo",
            "/job:/task:0",
            "/job:a/task:x/device:CPU:0",
            "/unknown:1",
            "CPU:*",
            "CPU:0x",
            "/job:a//task:0",
        ] {
            assert_eq!(DeviceName::parse(bad), None, "{bad}");
        }
        // What a failed parse leaves behind: TensorFlow reads the type from it.
        assert_eq!(
            DeviceName::parse_partial("a").1.device_type.as_deref(),
            Some("a")
        );
        assert_eq!(
            DeviceName::parse_partial("/job:a/device:GPU:0/junk")
                .1
                .device_type
                .as_deref(),
            Some("GPU")
        );
        assert!(DeviceName::parse("").is_some() && DeviceName::parse("/").is_some());
    }
}

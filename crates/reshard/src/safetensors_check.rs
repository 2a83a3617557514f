//! What the `safetensors` crate does not check in a header before reshard reads it: a tensor
//! named twice (JSON keeps one of the two, whose bytes another tensor may then share) and
//! data ranges that overlap. Each is refused naming the file and the tensors.

use std::collections::HashSet;
use std::fmt;
use std::path::Path;

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

use crate::error::{ReshardError, Result};

/// The key of the metadata entry, which is no tensor.
const METADATA_KEY: &str = "__metadata__";

/// The part of a tensor's header entry checked here.
#[derive(Deserialize)]
struct Entry {
    data_offsets: (u64, u64),
}

/// Every entry of the header, in file order, duplicates kept.
struct Entries(Vec<(String, Option<Entry>)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a safetensors header (a JSON object)")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<Entries, A::Error> {
                let mut out = Vec::new();
                while let Some(key) = m.next_key::<String>()? {
                    if key == METADATA_KEY {
                        m.next_value::<IgnoredAny>()?;
                        out.push((key, None));
                    } else {
                        out.push((key, Some(m.next_value::<Entry>()?)));
                    }
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Checks the header of the safetensors file `bytes` (read from `path`): no name given twice
/// (the metadata entry included), no two tensors' data ranges overlapping. The rest (ranges
/// inside the file, sizes matching shapes) is the `safetensors` crate's check, made after.
pub fn check_header(path: &Path, bytes: &[u8]) -> Result<()> {
    let bad = |fault: String| ReshardError::Usage(format!("{}: {fault}", path.display()));
    let len = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
        .ok_or_else(|| bad("shorter than a safetensors header".into()))?;
    let header = usize::try_from(len)
        .ok()
        .and_then(|n| bytes.get(8..8usize.checked_add(n)?))
        .ok_or_else(|| {
            bad(format!(
                "header of {len} bytes runs past the end of the file"
            ))
        })?;
    let Entries(entries) = serde_json::from_slice(header)
        .map_err(|e| bad(format!("header is not a safetensors JSON header: {e}")))?;
    let mut names = HashSet::new();
    for (name, _) in &entries {
        if !names.insert(name.as_str()) {
            return Err(bad(format!("the header names {name:?} twice")));
        }
    }
    let mut ranges: Vec<(u64, u64, &str)> = entries
        .iter()
        .filter_map(|(name, e)| e.as_ref().map(|e| (e.data_offsets, name.as_str())))
        .filter(|((s, e), _)| e > s)
        .map(|((s, e), name)| (s, e, name))
        .collect();
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        let ((_, end, a), (start, _, b)) = ((pair[0]), (pair[1]));
        if start < end {
            return Err(bad(format!(
                "the data of tensors {a:?} and {b:?} overlap (bytes {start} to {end})"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(header: &str) -> Vec<u8> {
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(&[0; 16]);
        out
    }

    #[test]
    fn names_given_twice_and_overlapping_ranges_are_refused() {
        let p = Path::new("d/device_0000.safetensors");
        let ok = r#"{"__metadata__":{"a":"b"},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}"#;
        check_header(p, &file(ok)).unwrap();
        let twice = r#"{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
        let err = check_header(p, &file(twice)).unwrap_err().to_string();
        assert!(
            err.contains("device_0000.safetensors") && err.contains("twice"),
            "{err}"
        );
        let overlap = r#"{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#;
        let err = check_header(p, &file(overlap)).unwrap_err().to_string();
        assert!(err.contains("overlap"), "{err}");
        assert!(check_header(p, b"\xff\xff\xff\xff\xff\xff\xff\xff{}").is_err());
        assert!(check_header(p, b"\x02").is_err());
    }
}

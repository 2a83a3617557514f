//! Reading the vectors TensorFlow recorded (interop/dtensor/make_vectors.py).

#![allow(dead_code)]

use std::path::PathBuf;

use serde_json::Value;

/// The `cases` of `testdata/dtensor/<name>`.
pub fn cases(name: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/dtensor")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text).unwrap();
    v["cases"].as_array().unwrap().clone()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

pub fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

pub fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

/// TensorFlow's message without the source-location context lines it appends (and
/// without the proto dump some messages end with).
pub fn tf_message(case: &Value) -> String {
    let e = case["error"].as_str().unwrap();
    let first = e.lines().next().unwrap_or("").trim_end();
    first
        .split("goo.gle/debug")
        .next()
        .unwrap()
        .trim_end()
        .to_string()
}

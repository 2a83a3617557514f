//! `unbound layout` on hostile input (issue 30): shapes and ranks that would allocate
//! gigabytes are refused before anything is allocated, naming the argument; HLO sharding text
//! nested far past the limit is refused while it is parsed (never a stack overflow); a `.npy`
//! header that repeats `shape` or `descr` is read as NumPy reads it (the last value wins),
//! and one NumPy would read another way than unbound can is refused naming the file.
//! Each command runs under `prlimit --as` where the tool exists, so an allocation of the
//! sizes asked for would abort instead of succeeding on an overcommitting machine.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{assert_clean_failure, bin, describe};
use unbound_bundle::npy::{read_npy, write_npy_bytes};

/// Address space the commands get: far below what the inputs ask for.
const AS_LIMIT: &str = "--as=2000000000";

/// Runs `unbound` with `args` under a 2 GB address-space limit (when `prlimit` exists).
fn limited(args: &[&str]) -> Output {
    let has_prlimit = Command::new("prlimit")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let mut cmd = if has_prlimit {
        let mut c = Command::new("prlimit");
        c.args([AS_LIMIT, "--", bin()]);
        c
    } else {
        Command::new(bin())
    };
    cmd.args(args).output().expect("the unbound binary runs")
}

fn write_f32(path: &Path, shape: &[i64]) {
    let n: i64 = shape.iter().product();
    let data: Vec<u8> = (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect();
    write_npy_bytes(path, "<f4", shape, &data).unwrap();
}

#[test]
fn shapes_and_ranks_are_checked_before_allocating() {
    let tmp = tempfile::tempdir().unwrap();
    let comps = tmp.path().join("c");
    std::fs::create_dir(&comps).unwrap();
    write_f32(&comps.join("0.npy"), &[2, 2]);
    let out_npy = tmp.path().join("g.npy");
    let layout = "sharding_specs:unsharded,unsharded, mesh:|x=1|*CPU";
    let (c, o) = (comps.to_str().unwrap(), out_npy.to_str().unwrap());
    for (shape, needles) in [
        ("2147483648,2", vec!["component 0", "[2147483648, 2]"]),
        ("2147483648", vec!["--global-shape 2147483648", "rank 1"]),
        ("4,4,4", vec!["--global-shape 4,4,4", "rank 3"]),
    ] {
        let args = [
            "layout",
            "pack",
            "--layout",
            layout,
            "--global-shape",
            shape,
            c,
            o,
        ];
        let out = limited(&args);
        assert_clean_failure(&out, &needles, &args.join(" "));
    }
    let many = vec!["1"; 300].join(",");
    let out = limited(&[
        "layout",
        "pack",
        "--layout",
        layout,
        "--global-shape",
        &many,
        c,
        o,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("more than TensorFlow's 254"));
    assert!(!out_npy.exists());
    for rank in ["1000000000", "255"] {
        let args = ["layout", "from-op-sharding", "{replicated}", "--rank", rank];
        let out = limited(&args);
        assert_clean_failure(&out, &[&format!("--rank {rank}"), "254"], &args.join(" "));
    }
    let out = limited(&[
        "layout",
        "from-op-sharding",
        "{replicated}",
        "--rank",
        "254",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
}

#[test]
fn hlo_text_nested_past_the_limit_is_refused_while_parsing() {
    // 30,000 deep is 60 KB of text, within what one argument may be.
    for depth in [65, 10_000, 30_000] {
        let text = format!("{}{{replicated}}{}", "{".repeat(depth), "}".repeat(depth));
        let out = limited(&["layout", "from-op-sharding", &text]);
        assert_clean_failure(&out, &["HLO sharding", "nested more than 64 deep"], "deep");
    }
    let text = format!("{}{{replicated}}{}", "{".repeat(64), "}".repeat(64));
    let out = limited(&["layout", "from-op-sharding", &text, "--rank", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
}

/// A `.npy` v1.0 file with header dictionary `dict` and data `data`.
fn npy_with_header(path: &Path, dict: &str, data: &[u8]) {
    let mut text = dict.to_string();
    while (10 + text.len() + 1) % 64 != 0 {
        text.push(' ');
    }
    text.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(text.len() as u16).to_le_bytes());
    bytes.extend_from_slice(text.as_bytes());
    bytes.extend_from_slice(data);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn npy_headers_are_read_as_numpy_reads_them_or_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let npy = tmp.path().join("g.npy");
    // NumPy (ast.literal_eval) reads shape (4, 2) and <i4: the last values.
    let data: Vec<u8> = (0..8i32).flat_map(|i| i.to_le_bytes()).collect();
    npy_with_header(
        &npy,
        "{'descr': '<f4', 'shape': (8,), 'fortran_order': False, 'shape': (4, 2), 'descr': '<i4', }",
        &data,
    );
    let out_dir = tmp.path().join("out");
    let args = [
        "layout",
        "unpack",
        "--layout",
        "sharding_specs:x,unsharded, mesh:|x=2|*CPU",
        npy.to_str().unwrap(),
        out_dir.to_str().unwrap(),
    ];
    let out = limited(&args);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let first = read_npy(&out_dir.join("0.npy")).unwrap();
    assert_eq!((first.descr.as_str(), first.shape), ("<i4", vec![2, 2]));
    assert_eq!(first.data, data[..16]);
    // What NumPy reads another way than unbound can, or refuses: refused, naming the file.
    for (dict, fault) in [
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (8), }",
            "parenthesised integer",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (8,), 'x': 'y'}",
            "header keys",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (+8,), }",
            "integer",
        ),
        (
            "{'descr': '<' 'f4', 'fortran_order': False, 'shape': (8,), }",
            "side by side",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': ((8),), }",
            "integer",
        ),
    ] {
        npy_with_header(&npy, dict, &data[..32]);
        let out_dir = tmp.path().join("refused");
        let args = [
            "layout",
            "unpack",
            "--layout",
            "sharding_specs:x, mesh:|x=2|*CPU",
            npy.to_str().unwrap(),
            out_dir.to_str().unwrap(),
        ];
        let out = limited(&args);
        assert_clean_failure(&out, &["g.npy", fault], dict);
        assert!(!out_dir.exists());
    }
    let deep = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': {}",
        "(".repeat(9_000)
    );
    npy_with_header(&npy, &deep, &data);
    let out = limited(&[
        "layout",
        "unpack",
        "--layout",
        "sharding_specs:x, mesh:|x=2|*CPU",
        npy.to_str().unwrap(),
        tmp.path().join("deep").to_str().unwrap(),
    ]);
    assert_clean_failure(&out, &["g.npy"], "deep npy header");
}

//! End-to-end tests of `unbound vars`: listing (text and JSON) with object paths, `.npy`
//! output for every dtype of the TensorFlow-made models, bfloat16 and string choices,
//! partitioned variables, checkpoint prefixes, usage errors (exit 2) and failures (exit 1,
//! nothing written).

use std::path::Path;
use std::process::{Command, Output};

use unbound_bundle::{
    data_path, saved_model_prefix, BundleReader, BundleWriter, SliceSpec, Tensor,
};
use unbound_proto::tensorflow::DataType;
use unbound_test_support::testdata::model;

fn unbound(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_unbound"))
        .args(args.iter().map(|a| a.as_ref()))
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn fails(out: &Output, code: i32, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks {n:?}: {err}");
    }
}

/// Parses a `.npy` v1.0 file: descriptor, shape, data.
fn parse_npy(path: &Path) -> (String, Vec<i64>, Vec<u8>) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..8], b"\x93NUMPY\x01\x00");
    let len = u16::from_le_bytes([b[8], b[9]]) as usize;
    assert_eq!((10 + len) % 64, 0);
    let dict = std::str::from_utf8(&b[10..10 + len]).unwrap();
    let descr = dict
        .split("'descr': '")
        .nth(1)
        .unwrap()
        .split('\'')
        .next()
        .unwrap();
    let shape = dict
        .split("'shape': (")
        .nth(1)
        .unwrap()
        .split(')')
        .next()
        .unwrap();
    let shape = shape
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    assert!(dict.contains("'fortran_order': False"));
    (descr.to_string(), shape, b[10 + len..].to_vec())
}

#[test]
fn lists_variables_with_object_paths() {
    let text = ok(&unbound(&[&"vars", &model("tf2_multi_sig")]));
    assert!(text.contains("10 variables, 1 data shard"), "{text}");
    for line in [
        "w_f32/.ATTRIBUTES/VARIABLE_VALUE      float32   [4, 3]     48  w_f32",
        "w_bf16/.ATTRIBUTES/VARIABLE_VALUE     bfloat16  [3]         6  w_bf16",
        "vocab_str/.ATTRIBUTES/VARIABLE_VALUE  string    [3]        24  vocab_str",
        "step/.ATTRIBUTES/VARIABLE_VALUE       int64     []          8  step",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    let json: serde_json::Value = serde_json::from_str(&ok(&unbound(&[
        &"vars",
        &model("tf2_multi_sig"),
        &"--json",
    ])))
    .unwrap();
    let vars = json["variables"].as_array().unwrap();
    assert_eq!(vars.len(), 10);
    let h = vars
        .iter()
        .find(|v| v["key"] == "h_f16/.ATTRIBUTES/VARIABLE_VALUE")
        .unwrap();
    assert_eq!(h["dtype"], "float16");
    assert_eq!(h["shape"], serde_json::json!([4]));
    assert_eq!(h["object_path"], "h_f16");
    assert_eq!(h["bytes"], 8);
    assert_eq!(json["num_shards"], 1);
    // One variable, by checkpoint key or by object path.
    let one = ok(&unbound(&[&"vars", &model("tf2_multi_sig"), &"count_i32"]));
    assert!(
        one.contains("count_i32/.ATTRIBUTES/VARIABLE_VALUE  int32"),
        "{one}"
    );
    // A checkpoint prefix works too; a TF1 model has no object graph.
    let prefix = saved_model_prefix(&model("tf1_large_consts"));
    let text = ok(&unbound(&[&"vars", &prefix]));
    assert!(
        text.contains("dense/kernel  float32  [16, 16]   1024"),
        "{text}"
    );
}

#[test]
fn npy_of_every_variable_equals_the_stored_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let reader = BundleReader::open(&saved_model_prefix(&model("tf2_multi_sig"))).unwrap();
    let expect = [
        ("w_f32", "<f4", vec![4, 3]),
        ("b_f64", "<f8", vec![3]),
        ("count_i32", "<i4", vec![5]),
        ("big_i64", "<i8", vec![2, 2]),
        ("h_f16", "<f2", vec![4]),
        ("mask_bool", "|b1", vec![3]),
        ("step", "<i8", vec![]),
    ];
    for (name, descr, shape) in expect {
        let out = dir.path().join(format!("{name}.npy"));
        ok(&unbound(&[
            &"vars",
            &model("tf2_multi_sig"),
            &name,
            &"--npy",
            &out,
        ]));
        let (d, s, data) = parse_npy(&out);
        assert_eq!((d.as_str(), s), (descr, shape), "{name}");
        let key = format!("{name}/.ATTRIBUTES/VARIABLE_VALUE");
        assert_eq!(
            data,
            reader.read(&key).unwrap().as_raw().unwrap().to_vec(),
            "{name}"
        );
    }
    // bfloat16: widened to float32 exactly; or its bits with --raw-bits.
    let out = dir.path().join("bf16.npy");
    let text = ok(&unbound(&[
        &"vars",
        &model("tf2_multi_sig"),
        &"w_bf16",
        &"--npy",
        &out,
    ]));
    assert!(
        text.contains("note: bfloat16 widened exactly to float32"),
        "{text}"
    );
    let (d, _, data) = parse_npy(&out);
    let values: Vec<f32> = data
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!((d.as_str(), values), ("<f4", vec![1.0, -2.0, 3.5]));
    // Outputs are never overwritten: the bits go to a new file.
    let out = dir.path().join("bf16_bits.npy");
    ok(&unbound(&[
        &"vars",
        &model("tf2_multi_sig"),
        &"w_bf16",
        &"--npy",
        &out,
        &"--raw-bits",
    ]));
    let (d, _, data) = parse_npy(&out);
    assert_eq!(
        (d.as_str(), data),
        ("<u2", vec![0x80, 0x3f, 0x00, 0xc0, 0x60, 0x40])
    );
    // Strings: a fixed-width |S array, zero-padded.
    let out = dir.path().join("s.npy");
    let json = ok(&unbound(&[
        &"vars",
        &model("tf2_multi_sig"),
        &"vocab_str",
        &"--npy",
        &out,
        &"--json",
    ]));
    assert!(json.contains("\"descr\": \"|S8\""), "{json}");
    let (d, s, data) = parse_npy(&out);
    assert_eq!((d.as_str(), s), ("|S8", vec![3]));
    assert_eq!(data, b"alpha\0\0\0beta\0\0\0\0\xff\x00binary".to_vec());
}

#[test]
fn partitioned_variables_and_their_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("ckpt");
    let mut w = BundleWriter::with_shards(&prefix, 2).unwrap();
    let rows = |r: std::ops::Range<i32>| -> Vec<u8> {
        r.flat_map(|i| (0..3).flat_map(move |j| ((i * 3 + j) as f32).to_le_bytes()))
            .collect()
    };
    let top = SliceSpec::new(vec![(0, Some(1)), (0, None)]);
    let bottom = SliceSpec::new(vec![(1, Some(2)), (0, None)]);
    w.add_slice(
        0,
        "part",
        &[3, 3],
        &top,
        &Tensor::raw(DataType::DtFloat, vec![1, 3], rows(0..1)),
    )
    .unwrap();
    w.add_slice(
        1,
        "part",
        &[3, 3],
        &bottom,
        &Tensor::raw(DataType::DtFloat, vec![2, 3], rows(1..3)),
    )
    .unwrap();
    w.add("nul", &Tensor::strings(vec![1], [&b"ends in zero\0"[..]]))
        .unwrap();
    w.add(
        "f8",
        &Tensor::raw(DataType::DtFloat8E4m3fn, vec![2], vec![0x38, 0xb8]),
    )
    .unwrap();
    w.add("var", &Tensor::variants(vec![1], [&b""[..]]))
        .unwrap();
    w.finish().unwrap();

    let text = ok(&unbound(&[&"vars", &prefix]));
    assert!(text.contains("2 data shards"), "{text}");
    assert!(
        text.contains("part  float32        [3, 3]     36  (partitioned: 0,1:-@0 1,2:-@1)"),
        "{text}"
    );
    let out = dir.path().join("part.npy");
    ok(&unbound(&[&"vars", &prefix, &"part", &"--npy", &out]));
    let (d, s, data) = parse_npy(&out);
    assert_eq!((d.as_str(), s, data), ("<f4", vec![3, 3], rows(0..3)));

    let out = dir.path().join("refused.npy");
    for (key, needle) in [
        ("nul", "zero byte"),
        ("f8", "--raw-bits"),
        ("var", "variant tensors have no .npy form"),
    ] {
        fails(
            &unbound(&[&"vars", &prefix, &key, &"--npy", &out]),
            1,
            &[needle, key],
        );
        assert!(!out.exists());
    }
    ok(&unbound(&[
        &"vars",
        &prefix,
        &"f8",
        &"--npy",
        &out,
        &"--raw-bits",
    ]));
    assert_eq!(parse_npy(&out).2, vec![0x38, 0xb8]);
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        5,
        "no temporaries left"
    );
}

#[test]
fn usage_errors_and_failures() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.npy");
    let m = model("tf2_multi_sig");
    fails(&unbound(&[&"vars", &m, &"--npy", &out]), 2, &["KEY"]);
    fails(
        &unbound(&[&"vars", &m, &"w_f32", &"--raw-bits"]),
        2,
        &["--npy"],
    );
    fails(&unbound(&[&"vars"]), 2, &["DIR"]);
    fails(
        &unbound(&[&"vars", &m, &"nope", &"--npy", &out]),
        1,
        &["nope", "variables.index"],
    );
    fails(&unbound(&[&"vars", &m, &"nope"]), 1, &["nope"]);
    fails(
        &unbound(&[&"vars", &dir.path().join("missing")]),
        1,
        &["neither a SavedModel"],
    );
    fails(
        &unbound(&[
            &"vars",
            &m,
            &"w_f32",
            &"--npy",
            &dir.path().join("no/such/dir/x.npy"),
        ]),
        1,
        &["no/such/dir"],
    );
    assert!(!out.exists());

    // A flipped byte in the data file: exit 1 naming the file and the key; nothing written.
    let copy = dir.path().join("model");
    std::fs::create_dir_all(copy.join("variables")).unwrap();
    std::fs::copy(m.join("saved_model.pb"), copy.join("saved_model.pb")).unwrap();
    for f in ["variables.index", "variables.data-00000-of-00001"] {
        std::fs::copy(m.join("variables").join(f), copy.join("variables").join(f)).unwrap();
    }
    let prefix = saved_model_prefix(&copy);
    let offset = BundleReader::open(&prefix)
        .unwrap()
        .entry("w_f32/.ATTRIBUTES/VARIABLE_VALUE")
        .unwrap()
        .offset as usize;
    let data = data_path(&prefix, 0, 1);
    let mut bytes = std::fs::read(&data).unwrap();
    bytes[offset + 7] ^= 0x10;
    std::fs::write(&data, bytes).unwrap();
    fails(
        &unbound(&[&"vars", &copy, &"w_f32", &"--npy", &out]),
        1,
        &[
            "variables.data-00000-of-00001",
            "w_f32/.ATTRIBUTES/VARIABLE_VALUE",
            "checksum",
        ],
    );
    assert!(!out.exists());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporaries left"
    );
    // Listing still works (it reads no tensor data but the object graph).
    ok(&unbound(&[&"vars", &copy]));
    // A SavedModel without variables lists nothing.
    std::fs::remove_dir_all(copy.join("variables")).unwrap();
    assert!(ok(&unbound(&[&"vars", &copy])).contains("no variables"));
}

//! Hand-built SavedModels full of wire-format corner cases, against TensorFlow 2.21 (the
//! interop harness, when `UNBOUND_MERGER_HARNESS` names it; see `fingerprint_deterministic.rs`):
//! our deterministic serialization equals protobuf C++'s byte for byte, and our fingerprint
//! equals `CreateFingerprintDef`'s, for the `.pb` and for `.cpb` splits of it.
//!
//! Corner cases: repeated singular fields (last wins, messages merge), oneof switches, packed
//! and unpacked runs, non-minimal and negative varints, `bool` 2, `-0.0`, explicit defaults,
//! duplicate / keyless / valueless map entries, map keys 0 and empty values, unknown fields
//! before known ones, known numbers with the wrong wire type; and for regularization:
//! `(Stateful)PartitionedCall` with and without UIDs and `config_proto`, string and float
//! `Const`s, concrete functions out of UID order.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use unbound_savedmodel::dir::{read_saved_model, saved_model_descriptor};
use unbound_savedmodel::fingerprint::canonical::{Encoder, Source};
use unbound_savedmodel::fingerprint::{fingerprint_dir, read_fingerprint};
use unbound_savedmodel::write::{split_dir, WriteOptions};
use unbound_test_support::fingerprint_fields as ours;

/// A message under construction, field by field.
#[derive(Default, Clone)]
struct W(Vec<u8>);

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

impl W {
    fn key(mut self, n: u32, wt: u8) -> Self {
        varint(u64::from(n) << 3 | u64::from(wt), &mut self.0);
        self
    }
    fn int(self, n: u32, v: u64) -> Self {
        let mut s = self.key(n, 0);
        varint(v, &mut s.0);
        s
    }
    fn raw(mut self, bytes: &[u8]) -> Self {
        self.0.extend_from_slice(bytes);
        self
    }
    fn bytes(self, n: u32, b: &[u8]) -> Self {
        let mut s = self.key(n, 2);
        varint(b.len() as u64, &mut s.0);
        s.0.extend_from_slice(b);
        s
    }
    fn msg(self, n: u32, m: W) -> Self {
        self.bytes(n, &m.0)
    }
    fn fixed32(self, n: u32, v: u32) -> Self {
        self.key(n, 5).raw(&v.to_le_bytes())
    }
    fn fixed64(self, n: u32, v: u64) -> Self {
        self.key(n, 1).raw(&v.to_le_bytes())
    }
}

fn w() -> W {
    W::default()
}

/// A map entry `{key: k, value: v}`.
fn entry(k: &str, v: W) -> W {
    w().bytes(1, k.as_bytes()).msg(2, v)
}

/// `AttrValue` builders (`list` 1, `s` 2, `i` 3, `f` 4, `b` 5, `type` 6, `tensor` 8, `func` 10).
fn attr_type(t: u64) -> W {
    w().int(6, t)
}

/// NodeDef (`name` 1, `op` 2, `input` 3, `device` 4, `attr` 5).
fn node(name: &str, op: &str, attrs: Vec<(&str, W)>) -> W {
    let mut n = w().bytes(1, name.as_bytes()).bytes(2, op.as_bytes());
    for (k, v) in attrs {
        n = n.msg(5, entry(k, v));
    }
    n
}

fn corner_cases() -> W {
    // TensorProto: dtype 1, float_val 5 (packed, two runs), int_val 7 (unpacked; -1 as a
    // 5-byte varint), bool_val 11 (value 2), tensor_content 4 empty but present.
    let tensor = w()
        .int(1, 1)
        .bytes(5, &1.0f32.to_le_bytes())
        .bytes(5, &2.0f32.to_le_bytes())
        .int(7, 7)
        .key(7, 0)
        .raw(&[0xff, 0xff, 0xff, 0xff, 0x0f])
        .int(11, 2)
        .bytes(4, b"");
    let n1 = w()
        .bytes(1, b"old name")
        .int(1, 5) // a known number with the wrong wire type: unknown
        .int(999, 1) // unknown, before known fields
        .bytes(1, b"n1")
        .bytes(2, b"Const")
        .msg(5, entry("value", w().msg(8, tensor)))
        .msg(5, entry("dtype", attr_type(1)))
        .msg(5, entry("b", w().int(5, 2)))
        .msg(5, entry("o", w().int(3, 5).bytes(2, b"x"))) // oneof switch: s wins
        .msg(5, entry("p", w().bytes(2, b"x").int(3, 0))) // switch to i = 0: written
        .msg(5, entry("q", w().msg(10, w().bytes(1, b"a")))) // func ...
        .msg(5, entry("dtype", attr_type(1))) // duplicate key: last wins
        .msg(5, entry("z", w().fixed32(4, 0x8000_0000))) // f = -0.0
        .msg(5, w().msg(2, w().int(3, 9))) // no key: ""
        .msg(5, w().bytes(1, b"novalue")); // no value: empty AttrValue
    let n2 = w()
        .fixed64(50, 7)
        .bytes(1, b"n2")
        .bytes(2, b"NoOp")
        .bytes(3, b"n1")
        .bytes(3, b"^n1")
        .bytes(4, b"") // explicit default: dropped
        .msg(6, w()); // empty but present
    let function = w()
        .msg(1, w().bytes(1, b"fn"))
        .msg(7, w().int(1, 1).msg(2, w()))
        .msg(7, w().int(1, 0).msg(2, w())) // key 0: `08 00`
        .msg(8, w().int(1, 3).int(2, 0)) // value 0: `10 00`
        .msg(4, w().bytes(1, b"z").bytes(2, b""))
        .msg(4, w().bytes(1, b"y").bytes(2, b"v"));
    let graph_1 = w()
        .msg(1, n1)
        .key(4, 2)
        .raw(&[
            10, 0x08, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x10, 0x80, 0x80, 0x00,
        ]) // producer -1, min_consumer 0 (non-minimal)
        .int(77, 3);
    let graph_2 = w().msg(1, n2).msg(2, w().msg(1, function)).int(3, 0);
    let sig = |m: &str| {
        w().msg(1, entry("x", w().bytes(1, b"x:0").int(2, 1)))
            .bytes(3, m.as_bytes())
    };
    let object_graph = w()
        .msg(1, w())
        .msg(2, entry("__inference_b_3", w().int(2, 1).int(2, 2)))
        .msg(2, entry("__inference_a_7", w()))
        .msg(2, entry("__inference_c_11", w().msg(3, w())));
    let meta_graph = w()
        .msg(2, graph_1)
        .msg(5, entry("b", sig("first")))
        .msg(5, entry("a", sig("a")))
        .msg(5, entry("b", sig("second")))
        .msg(5, w().msg(2, sig("keyless")))
        .msg(2, graph_2)
        .msg(7, object_graph);
    w().int(1, 1)
        .bytes(999, b"zz")
        .msg(2, meta_graph)
        .int(1, 1)
        .msg(2, w().msg(1, w().bytes(1, b"second meta graph")))
}

fn regularization() -> W {
    let func = |name: &str| w().msg(10, w().bytes(1, name.as_bytes()));
    let nodes = [
        node(
            "call",
            "StatefulPartitionedCall",
            vec![
                ("f", func("__inference_call_42")),
                ("config_proto", w().bytes(2, b"device config")),
                ("Tin", w().msg(1, w())),
            ],
        ),
        node("pcall", "PartitionedCall", vec![("f", func("no_uid"))]),
        node(
            "pcall2",
            "PartitionedCall",
            vec![("f", func("f_0")), ("config_proto", w().int(3, 4))],
        ),
        node(
            "scall",
            "StatefulPartitionedCall",
            vec![("f", w().bytes(2, b"not_a_func_9"))],
        ),
        node(
            "str",
            "Const",
            vec![
                ("dtype", attr_type(7)),
                ("value", w().msg(8, w().int(1, 7).bytes(8, b"platform"))),
            ],
        ),
        node(
            "str_unknown",
            "Const",
            vec![
                ("dtype", attr_type(7)),
                // clear_value() keeps unknown fields: 20, and `i` (3) with the wrong wire type.
                (
                    "value",
                    w().msg(8, w().int(1, 7)).int(20, 5).bytes(3, b"zz"),
                ),
            ],
        ),
        node(
            "float",
            "Const",
            vec![
                ("dtype", attr_type(1)),
                (
                    "value",
                    w().msg(8, w().int(1, 1).bytes(5, &[0, 0, 128, 63])),
                ),
            ],
        ),
    ];
    let mut graph = w();
    for n in nodes {
        graph = graph.msg(1, n);
    }
    graph = graph
        .msg(2, w().msg(1, w().msg(1, w().bytes(1, b"lib_fn_1"))))
        .msg(4, w().int(1, 1700));
    w().msg(2, w().msg(2, graph))
}

fn harness() -> Option<PathBuf> {
    std::env::var_os("UNBOUND_MERGER_HARNESS").map(PathBuf::from)
}

fn run_harness(harness: &Path, args: &[&std::ffi::OsStr]) -> Vec<u8> {
    let out = Command::new(harness)
        .args(args)
        .env("TF_CPP_MIN_LOG_LEVEL", "2")
        .stderr(Stdio::piped())
        .output()
        .expect("run the harness");
    assert!(
        out.status.success(),
        "harness {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The hash fields and producer from the harness's `fingerprint` JSON.
fn tf_fingerprint(harness: &Path, dir: &Path) -> [u64; 6] {
    let json = run_harness(harness, &["fingerprint".as_ref(), dir.as_os_str()]);
    let json = String::from_utf8(json).unwrap();
    let field = |name: &str| -> u64 {
        let at = json.find(&format!("\"{name}\":")).expect(name) + name.len() + 3;
        let digits: String = json[at..]
            .chars()
            .skip_while(|c| *c == '"')
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().unwrap()
    };
    [
        field("saved_model_checksum"),
        field("graph_def_program_hash"),
        field("signature_def_hash"),
        field("saved_object_graph_hash"),
        field("checkpoint_hash"),
        field("version_producer"),
    ]
}

fn check_serialization(harness: &Path, dir: &Path) {
    let out = dir.with_extension("tf.pb");
    run_harness(
        harness,
        &[
            "read".as_ref(),
            "--type".as_ref(),
            "tensorflow.SavedModel".as_ref(),
            dir.join("saved_model").as_os_str(),
            out.as_os_str(),
        ],
    );
    let theirs = std::fs::read(&out).unwrap();
    let model = read_saved_model(dir).unwrap().message;
    let ours = Encoder::new()
        .encode(&[Source::Ref(&model)], &saved_model_descriptor().unwrap())
        .unwrap()
        .to_vec()
        .unwrap();
    let at = ours.iter().zip(&theirs).position(|(a, b)| a != b);
    assert!(
        at.is_none() && ours.len() == theirs.len(),
        "{}: differs from protobuf C++ at byte {at:?} (lengths {} and {})",
        dir.display(),
        ours.len(),
        theirs.len()
    );
}

#[test]
fn corner_cases_equal_tensorflow() {
    let Some(harness) = harness() else {
        eprintln!("UNBOUND_MERGER_HARNESS not set: skipped (run interop/fingerprint_check.sh)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut checked = 0;
    // The regularization model again in canonical form, as TensorFlow writes models: its
    // graph is then hashed where it lies, only the nodes SimpleDelete edits re-encoded
    // (`graph_in_place.rs`), and split with nothing to split copies the file as it is.
    let canonical = W(Encoder::new()
        .encode(
            &[Source::Raw(regularization().0.into())],
            &saved_model_descriptor().unwrap(),
        )
        .unwrap()
        .to_vec()
        .unwrap());
    for (name, model) in [
        ("corners", corner_cases()),
        ("regularize", regularization()),
        ("regularize_canonical", canonical),
    ] {
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(dir.join("variables")).unwrap();
        std::fs::write(dir.join("saved_model.pb"), &model.0).unwrap();
        // A real (empty) checkpoint: split verifies its input, and a fake index fails that.
        unbound_bundle::BundleWriter::create(&dir.join("variables/variables"))
            .unwrap()
            .finish()
            .unwrap();
        check_serialization(&harness, &dir);
        assert_eq!(
            ours(&fingerprint_dir(&dir).unwrap()),
            tf_fingerprint(&harness, &dir),
            "{name}.pb"
        );
        checked += 1;
        // Nothing to split: the `.pb` is carried over, with a fingerprint equal to TensorFlow's.
        let whole = tmp.path().join(format!("{name}.whole"));
        split_dir(
            &dir,
            &whole,
            &WriteOptions::default().with_max_size(1 << 30),
            &|_| {},
        )
        .unwrap();
        assert_eq!(
            std::fs::read(whole.join("saved_model.pb")).unwrap(),
            model.0,
            "{name} split with nothing to split"
        );
        assert_eq!(
            ours(&read_fingerprint(&whole).unwrap()),
            tf_fingerprint(&harness, &whole),
            "fingerprint.pb of {name} split with nothing to split"
        );
        for max in [1000, 200, 60] {
            let out = tmp.path().join(format!("{name}.{max}"));
            split_dir(
                &dir,
                &out,
                &WriteOptions::default().with_max_size(max),
                &|_| {},
            )
            .unwrap();
            check_serialization(&harness, &out);
            let theirs = tf_fingerprint(&harness, &out);
            assert_eq!(
                ours(&fingerprint_dir(&out).unwrap()),
                theirs,
                "{name} split at {max}"
            );
            // The fingerprint.pb split wrote, computed from the split in memory.
            assert_eq!(
                ours(&read_fingerprint(&out).unwrap()),
                theirs,
                "fingerprint.pb of {name} split at {max}"
            );
            checked += 1;
        }
    }
    eprintln!("synthetic models: {checked} fingerprints equal to TensorFlow's");
}

//! `unbound layout ...` end to end: the --json contract, npy round trips through unpack,
//! relayout and pack, and bad input (exit 1 naming the input and the fault, never a panic).

mod common;

use std::path::Path;

use common::{assert_clean_failure, describe, unbound};
use serde_json::Value;
use unbound_bundle::npy::{read_npy, write_npy_bytes};

const MESH: &str = "|x=2,y=4|*CPU";

fn layout(specs: &str) -> String {
    format!("sharding_specs:{specs} mesh:{MESH}")
}

fn json_of(args: &[&str]) -> Value {
    let out = unbound(args);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn show_json_has_the_contract_keys() {
    let v = json_of(&[
        "layout",
        "show",
        &layout("y,x,"),
        "--global-shape",
        "8,6",
        "--json",
    ]);
    for key in [
        "kind",
        "to_string",
        "proto_hex",
        "type",
        "rank",
        "sharding_specs",
        "num_shards",
        "is_fully_replicated",
        "is_single_device",
        "mesh",
        "op_sharding_hex",
        "hlo_sharding_text",
        "partition_spec",
        "local_shape",
        "devices",
    ] {
        assert!(v.get(key).is_some(), "missing {key}: {v}");
    }
    assert_eq!(v["kind"], "layout");
    assert_eq!(v["type"], "STATIC");
    assert_eq!(v["hlo_sharding_text"], "{devices=[4,2]0,4,1,5,2,6,3,7}");
    assert_eq!(v["op_sharding_hex"], "08031a02040222080004010502060307");
    assert_eq!(v["partition_spec"], "P('y', 'x')");
    assert_eq!(v["local_shape"], serde_json::json!([2, 3]));
    assert_eq!(v["devices"][5]["offset"], serde_json::json!([2, 3]));
    assert_eq!(v["devices"].as_array().unwrap().len(), 8);
    let m = json_of(&["layout", "show", MESH, "--json"]);
    for key in [
        "kind",
        "to_string",
        "proto_hex",
        "name",
        "dim_names",
        "shape",
        "size",
        "global_device_ids",
        "local_device_ids",
        "local_devices",
        "global_devices",
        "use_xla_spmd",
        "device_type",
        "is_remote",
        "is_single_device",
    ] {
        assert!(m.get(key).is_some(), "missing {key}: {m}");
    }
    assert_eq!(m["kind"], "mesh");
    assert_eq!(m["size"], 8);
    assert_eq!(v["mesh"]["to_string"], m["to_string"]);
}

#[test]
fn show_reads_protos_and_from_op_sharding_inverts() {
    let tmp = tempfile::tempdir().unwrap();
    let v = json_of(&["layout", "show", &layout("x,unsharded,"), "--json"]);
    let unhex = |s: &str| {
        (0..s.len() / 2)
            .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
            .collect::<Vec<u8>>()
    };
    let lp = tmp.path().join("layout.pb");
    std::fs::write(&lp, unhex(v["proto_hex"].as_str().unwrap())).unwrap();
    let again = json_of(&["layout", "show", &format!("@{}", lp.display()), "--json"]);
    assert_eq!(again["to_string"], v["to_string"]);
    let mp = tmp.path().join("mesh.pb");
    std::fs::write(&mp, unhex(v["mesh"]["proto_hex"].as_str().unwrap())).unwrap();
    let mesh = json_of(&["layout", "show", &format!("@{}", mp.display()), "--json"]);
    assert_eq!(mesh["kind"], "mesh");
    assert_eq!(mesh["to_string"], v["mesh"]["to_string"]);
    let hex = v["op_sharding_hex"].as_str().unwrap();
    let back = json_of(&["layout", "from-op-sharding", hex, "--mesh", MESH, "--json"]);
    assert_eq!(back["layouts"][0], v["to_string"]);
    let text = json_of(&[
        "layout",
        "from-op-sharding",
        "{devices=[2,1,4]<=[8] last_tile_dim_replicate}",
        "--json",
    ]);
    assert!(
        text["layouts"][0]
            .as_str()
            .unwrap()
            .starts_with("sharding_specs:x,unsharded, mesh:|x=2,y=4|"),
        "{text}"
    );
}

fn write_f32(path: &Path, shape: &[i64]) -> Vec<u8> {
    let n: i64 = shape.iter().product();
    let data: Vec<u8> = (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect();
    write_npy_bytes(path, "<f4", shape, &data).unwrap();
    data
}

#[test]
fn unpack_relayout_pack_round_trip_through_npy() {
    let tmp = tempfile::tempdir().unwrap();
    let global = tmp.path().join("g.npy");
    let data = write_f32(&global, &[8, 12]);
    let a = tmp.path().join("a");
    let out = unbound([
        "layout",
        "unpack",
        "--layout",
        &layout("x,y,"),
        global.to_str().unwrap(),
        a.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let c5 = read_npy(&a.join("5.npy")).unwrap();
    assert_eq!(c5.shape, vec![4, 3]);
    // Device 5 = location [1, 1]: rows 4..8, columns 3..6; first element 4*12+3.
    assert_eq!(&c5.data[..4], &51f32.to_le_bytes());
    let b = tmp.path().join("b");
    let out = unbound([
        "layout",
        "relayout",
        "--from",
        &layout("x,y,"),
        "--to",
        &layout("y,x,"),
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--plan",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("AllGather") && text.contains("AllScatter"),
        "{text}"
    );
    let back = tmp.path().join("back.npy");
    let out = unbound([
        "layout",
        "pack",
        "--layout",
        &layout("y,x,"),
        b.to_str().unwrap(),
        back.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let g = read_npy(&back).unwrap();
    assert_eq!(
        (g.descr.as_str(), g.shape.as_slice(), g.data),
        ("<f4", &[8, 12][..], data)
    );
    // Uneven and JAX forms, opt-in.
    let u = tmp.path().join("u");
    let odd = tmp.path().join("odd.npy");
    let odd_data = write_f32(&odd, &[7, 5]);
    let out = unbound([
        "layout",
        "unpack",
        "--mesh",
        MESH,
        "--layout",
        "P(('x', 'y'))",
        "--uneven",
        odd.to_str().unwrap(),
        u.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(read_npy(&u.join("7.npy")).unwrap().shape, vec![0, 5]);
    let back = tmp.path().join("odd_back.npy");
    let out = unbound([
        "layout",
        "pack",
        "--mesh",
        MESH,
        "--layout",
        "P(('x', 'y'))",
        "--uneven",
        "--global-shape",
        "7,5",
        u.to_str().unwrap(),
        back.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(read_npy(&back).unwrap().data, odd_data);
}

#[test]
fn bad_input_fails_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let global = tmp.path().join("g.npy");
    write_f32(&global, &[7, 8]);
    let g = global.to_str().unwrap();
    let out_dir = tmp.path().join("o");
    let o = out_dir.to_str().unwrap();
    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        (
            vec![
                "layout".into(),
                "show".into(),
                "sharding_specs:z, mesh:|x=2|*CPU".into(),
            ],
            vec!["sharding spec (z)"],
        ),
        (
            vec!["layout".into(), "show".into(), "|x=3|0,1|0,1|a,b".into()],
            vec!["mesh size doesn't match"],
        ),
        (
            vec![
                "layout".into(),
                "show".into(),
                "@/nonexistent/file.pb".into(),
            ],
            vec!["/nonexistent/file.pb"],
        ),
        (
            vec![
                "layout".into(),
                "show".into(),
                layout("x,y,"),
                "--global-shape".into(),
                "7,8".into(),
            ],
            vec!["does not divide"],
        ),
        (
            vec![
                "layout".into(),
                "show".into(),
                layout("x,unsharded"),
                "--strict".into(),
            ],
            vec!["--strict"],
        ),
        (
            vec!["layout".into(), "from-op-sharding".into(), "zz".into()],
            vec!["neither hex"],
        ),
        (
            vec![
                "layout".into(),
                "from-op-sharding".into(),
                "{devices=[2,2]0,3,1,2}".into(),
            ],
            vec!["no mesh realises"],
        ),
        (
            vec![
                "layout".into(),
                "from-op-sharding".into(),
                "{devices=[8]0,1,2,3,4,5,6,7}".into(),
                "--mesh".into(),
                MESH.into(),
            ],
            vec!["no mesh dimension has size 8"],
        ),
        (
            vec![
                "layout".into(),
                "unpack".into(),
                "--layout".into(),
                layout("x,y,"),
                g.into(),
                o.into(),
            ],
            vec!["does not divide"],
        ),
        (
            vec![
                "layout".into(),
                "unpack".into(),
                "--layout".into(),
                layout("x,"),
                g.into(),
                o.into(),
            ],
            vec!["rank 2 given"],
        ),
        (
            vec![
                "layout".into(),
                "pack".into(),
                "--layout".into(),
                layout("x,y,"),
                "/nonexistent".into(),
                "out.npy".into(),
            ],
            vec!["0.npy"],
        ),
        (
            vec![
                "layout".into(),
                "unpack".into(),
                "--layout".into(),
                "P('x')".into(),
                g.into(),
                o.into(),
            ],
            vec!["needs --mesh"],
        ),
    ];
    for (args, needles) in &cases {
        let out = unbound(args);
        assert_clean_failure(&out, needles, &args.join(" "));
    }
    // Garbage npy, wrong component shape, too few components.
    let junk = tmp.path().join("junk.npy");
    std::fs::write(&junk, b"not numpy").unwrap();
    let out = unbound([
        "layout",
        "unpack",
        "--layout",
        &layout("x,"),
        junk.to_str().unwrap(),
        o,
    ]);
    assert_clean_failure(&out, &["junk.npy", "not a .npy file"], "garbage npy");
    let comps = tmp.path().join("c");
    std::fs::create_dir(&comps).unwrap();
    for i in 0..8 {
        write_f32(
            &comps.join(format!("{i}.npy")),
            &[if i == 3 { 3 } else { 4 }, 3],
        );
    }
    let out = unbound([
        "layout",
        "pack",
        "--layout",
        &layout("x,y,"),
        comps.to_str().unwrap(),
        "/tmp/never.npy",
    ]);
    assert_clean_failure(&out, &["component 3", "shape"], "wrong component shape");
    std::fs::remove_file(comps.join("7.npy")).unwrap();
    let out = unbound([
        "layout",
        "pack",
        "--layout",
        &layout("x,y,"),
        comps.to_str().unwrap(),
        "/tmp/never.npy",
    ]);
    assert_clean_failure(&out, &["7.npy", "missing"], "missing component");
    assert!(!Path::new("/tmp/never.npy").exists());
    // Usage errors exit 2.
    for args in [
        vec!["layout", "show"],
        vec!["layout", "unpack", "--layout", "x"],
        vec!["layout", "relayout", "--from", "a"],
    ] {
        let out = unbound(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", describe(&out));
    }
}

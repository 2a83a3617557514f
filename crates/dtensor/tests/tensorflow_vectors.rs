//! Meshes, layouts and OpShardings against what TensorFlow 2.21 itself printed, encoded,
//! answered and rejected (testdata/dtensor/*.json, made by interop/dtensor/make_vectors.py).

mod common;

use common::{cases, hex, ints, strs, tf_message, unhex};
use serde_json::Value;
use unbound_dtensor::{
    decode_op_sharding, layout_to_op_sharding, layout_to_op_sharding_bytes, op_sharding_to_layouts,
    parse_hlo_text, to_hlo_text, DTensorError, DeviceListForm, Layout, Mesh,
};

fn check_error(case: &Value, got: DTensorError) {
    let tf = tf_message(case);
    if case["crash"].as_bool() == Some(true) {
        return; // TensorFlow aborted; an error is all we can match.
    }
    let ours = got.to_string();
    assert!(
        ours.contains(&tf),
        "input {}\n TensorFlow: {tf}\n unbound:    {ours}",
        case["input"]
    );
}

fn check_mesh(case: &Value, mesh: &Mesh) {
    let input = &case["input"];
    assert_eq!(
        mesh.to_string(),
        case["to_string"].as_str().unwrap(),
        "{input}"
    );
    assert_eq!(
        hex(&mesh.encode()),
        case["proto_hex"].as_str().unwrap(),
        "{input}"
    );
    assert_eq!(mesh.dim_names(), strs(&case["dim_names"]), "{input}");
    assert_eq!(mesh.shape(), ints(&case["shape"]), "{input}");
    assert_eq!(
        mesh.num_devices() as i64,
        case["size"].as_i64().unwrap(),
        "{input}"
    );
    if mesh.kind() == unbound_dtensor::MeshKind::Tile && !mesh.dims().is_empty() {
        assert_eq!(
            mesh.global_device_ids(),
            ints(&case["global_device_ids"]),
            "{input}"
        );
    }
    assert_eq!(
        mesh.local_device_ids(),
        ints(&case["local_device_ids"]),
        "{input}"
    );
    assert_eq!(
        mesh.local_devices(),
        strs(&case["local_devices"]),
        "{input}"
    );
    assert_eq!(
        mesh.global_devices(),
        strs(&case["global_devices"]),
        "{input}"
    );
    assert_eq!(
        mesh.use_xla_spmd(),
        case["use_xla_spmd"].as_bool().unwrap(),
        "{input}"
    );
    assert_eq!(
        mesh.is_remote(),
        case["is_remote"].as_bool().unwrap(),
        "{input}"
    );
    assert_eq!(
        mesh.is_single_device(),
        case["is_single_device"].as_bool().unwrap(),
        "{input}"
    );
    if let Some(t) = case["device_type"].as_str() {
        assert_eq!(mesh.device_type(), t, "{input}");
    }
    if let Some(h) = case["host_mesh"].as_str() {
        assert_eq!(mesh.host_mesh().unwrap().to_string(), h, "{input}");
    }
    let locs: Vec<Vec<i64>> = case["device_locations"]
        .as_array()
        .unwrap()
        .iter()
        .map(ints)
        .collect();
    for (i, loc) in locs.iter().enumerate() {
        assert_eq!(
            &mesh.device_location(i as i64).unwrap(),
            loc,
            "{input} offset {i}"
        );
        assert_eq!(mesh.flattened_position(loc), i as i64);
    }
    // Round trips: the printed string and the proto read back to an equal mesh (except
    // for 7-part strings, whose global devices TensorFlow itself drops).
    let s = mesh.to_string();
    let drops_global_devices = mesh.use_xla_spmd() && !mesh.global_devices().is_empty();
    if case["kind"] == "mesh" && !drops_global_devices {
        assert_eq!(&Mesh::parse(&s).unwrap(), mesh, "{s}");
    }
    assert_eq!(&Mesh::decode(&mesh.encode(), "test").unwrap(), mesh);
}

#[test]
fn meshes_match_tensorflow() {
    let all = cases("meshes.json");
    let (mut ok, mut errors) = (0, 0);
    for case in &all {
        let input = case["input"].as_str().unwrap();
        let got = match case["kind"].as_str().unwrap() {
            "mesh" => Mesh::parse(input),
            "mesh_proto" => Mesh::decode(&unhex(input), "test"),
            k => panic!("kind {k}"),
        };
        match (case["ok"].as_bool().unwrap(), got) {
            (true, Ok(mesh)) => {
                check_mesh(case, &mesh);
                ok += 1;
            }
            (false, Err(e)) => {
                check_error(case, e);
                errors += 1;
            }
            (true, Err(e)) => panic!("TensorFlow accepts {input:?}, unbound: {e}"),
            (false, Ok(m)) => panic!(
                "TensorFlow rejects {input:?} ({}), unbound accepts {m}",
                case["error"]
            ),
        }
    }
    assert!(ok >= 20 && errors >= 15, "{ok} accepted, {errors} rejected");
}

fn check_layout(case: &Value, layout: &Layout) {
    let input = &case["input"];
    assert_eq!(
        layout.to_string(),
        case["to_string"].as_str().unwrap(),
        "{input}"
    );
    assert_eq!(
        hex(&layout.encode()),
        case["proto_hex"].as_str().unwrap(),
        "{input}"
    );
    assert_eq!(layout.specs(), strs(&case["sharding_specs"]), "{input}");
    assert_eq!(layout.rank() as i64, case["rank"].as_i64().unwrap());
    assert_eq!(
        layout.layout_type().proto_name(),
        case["type"].as_str().unwrap(),
        "{input}"
    );
    assert_eq!(
        layout.is_fully_replicated(),
        case["is_fully_replicated"].as_bool().unwrap(),
        "{input}"
    );
    assert_eq!(
        layout.is_batch_parallel(),
        case["is_batch_parallel"].as_bool().unwrap(),
        "{input}"
    );
    assert_eq!(
        layout.is_single_device(),
        case["is_single_device"].as_bool().unwrap(),
        "{input}"
    );
    assert_eq!(layout.mesh().to_string(), case["mesh"].as_str().unwrap());
    for (i, n) in case["num_shards"].as_array().unwrap().iter().enumerate() {
        let want = n
            .as_u64()
            .map(|v| if v == u64::MAX { -1 } else { v as i64 });
        assert_eq!(layout.num_shards(i), want, "{input} axis {i}");
    }
    if let Some(p) = case["parted"].as_str() {
        assert_eq!(layout.to_parted().to_string(), p);
    }
    if let Some(o) = case["offset_to_shard"].as_array() {
        let want: Vec<Vec<i64>> = o.iter().map(ints).collect();
        assert_eq!(layout.offset_to_shard().unwrap(), want, "{input}");
        let global = ints(&case["global_shape"]);
        let local = ints(&case["local_shape"]);
        assert_eq!(
            layout.local_shape_truncating(&global).unwrap(),
            local,
            "{input}"
        );
        assert_eq!(
            layout.global_shape(&local).unwrap(),
            ints(&case["global_from_local"])
        );
    }
    assert_eq!(&Layout::parse(&layout.to_string()).unwrap(), layout);
    assert_eq!(&Layout::decode(&layout.encode(), "test").unwrap(), layout);
}

#[test]
fn layouts_match_tensorflow() {
    let all = cases("layouts.json");
    let (mut ok, mut errors, mut pairs) = (0, 0, 0);
    for case in &all {
        let kind = case["kind"].as_str().unwrap();
        if kind == "equal" {
            let pair = strs(&case["input"]);
            let a = Layout::parse(&pair[0]).unwrap();
            let b = Layout::parse(&pair[1]).unwrap();
            assert_eq!(a == b, case["equal"].as_bool().unwrap(), "{pair:?}");
            pairs += 1;
            continue;
        }
        let input = case["input"].as_str().unwrap();
        let got = match kind {
            "layout" => Layout::parse(input),
            "layout_proto" => Layout::decode(&unhex(input), "test"),
            k => panic!("kind {k}"),
        };
        match (case["ok"].as_bool().unwrap(), got) {
            (true, Ok(layout)) => {
                check_layout(case, &layout);
                ok += 1;
            }
            (false, Err(e)) => {
                check_error(case, e);
                errors += 1;
            }
            (true, Err(e)) => panic!("TensorFlow accepts {input:?}, unbound: {e}"),
            (false, Ok(l)) => panic!(
                "TensorFlow rejects {input:?} ({}), unbound accepts {l}",
                case["error"]
            ),
        }
    }
    assert!(
        ok >= 30 && errors >= 10 && pairs >= 5,
        "{ok} {errors} {pairs}"
    );
}

#[test]
fn quirks_are_reported_as_warnings() {
    let mesh = "|x=2,y=4|*CPU";
    let (l, w) =
        Layout::parse_with_warnings(&format!("sharding_specs:x,unsharded mesh:{mesh}")).unwrap();
    assert_eq!(l.rank(), 1);
    assert!(w.iter().any(|w| w.contains("trailing comma")), "{w:?}");
    let (_, w) =
        Layout::parse_with_warnings("maximal:false, mesh:/job:a/replica:0/task:0/device:CPU:0")
            .unwrap();
    assert!(w.iter().any(|w| w.contains("maximal:false")), "{w:?}");
    let (_, w) = Layout::parse_with_warnings(&format!("sharding_specs:x, mesh:{mesh}")).unwrap();
    assert!(w.is_empty(), "{w:?}");
    let l = Layout::parse(&format!("sharding_specs:x,y, mesh:{mesh}")).unwrap();
    let e = l.local_shape(&[6, 6]).unwrap_err().to_string();
    assert!(e.contains("does not divide"), "{e}");
    assert_eq!(l.local_shape_truncating(&[6, 6]).unwrap(), vec![3, 1]);
}

#[test]
fn op_sharding_matches_tensorflow_graphs() {
    let all = cases("op_sharding.json");
    let mut n = 0;
    for case in &all {
        let layout = Layout::parse(case["layout"].as_str().unwrap()).unwrap();
        let want = strs(&case["op_sharding_hex"]);
        assert_eq!(want.len(), 1, "one sharding per graph: {case}");
        let ours = layout_to_op_sharding_bytes(&layout, DeviceListForm::Explicit).unwrap();
        assert_eq!(hex(&ours), want[0], "{layout}");
        // And back: the sharding TensorFlow wrote gives a layout that gives it again.
        let tf = decode_op_sharding(&unhex(&want[0]), "test").unwrap();
        let found = op_sharding_to_layouts(&tf, Some(layout.mesh()), Some(layout.rank())).unwrap();
        let again = layout_to_op_sharding(&found.layouts[0], DeviceListForm::Explicit).unwrap();
        assert_eq!(again, tf, "{layout} -> {}", found.layouts[0]);
        let found = op_sharding_to_layouts(&tf, None, Some(layout.rank())).unwrap();
        let again = layout_to_op_sharding(&found.layouts[0], DeviceListForm::Explicit).unwrap();
        assert_eq!(
            again, tf,
            "{layout} -> {} (invented mesh)",
            found.layouts[0]
        );
        // The iota form names the same devices.
        let iota = layout_to_op_sharding(&layout, DeviceListForm::Iota).unwrap();
        if !iota.iota_reshape_dims.is_empty() {
            assert_eq!(
                unbound_dtensor::expanded_devices(&iota).unwrap(),
                tf.tile_assignment_devices
            );
        }
        assert_eq!(parse_hlo_text(&to_hlo_text(&tf)).unwrap(), tf);
        n += 1;
    }
    assert!(n >= 25);
}

/// TensorFlow's C++ test vectors (tensorflow/dtensor/tests/layout_to_xla_sharding_test.cc).
#[test]
fn op_sharding_matches_tensorflow_cc_tests() {
    for (specs, dims, text) in [
        ("x,", "x=3", "{devices=[3]0,1,2}"),
        ("y,x,", "x=2,y=2", "{devices=[2,2]0,2,1,3}"),
        ("y,x,", "x=2,y=4", "{devices=[4,2]0,4,1,5,2,6,3,7}"),
        ("z,x,y,", "x=2,y=2,z=2", "{devices=[2,2,2]0,2,4,6,1,3,5,7}"),
        (
            "x,unsharded,",
            "x=2,y=2",
            "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}",
        ),
        (
            "y,unsharded,z,",
            "x=2,y=2,z=2",
            "{devices=[2,1,2,2]0,4,1,5,2,6,3,7 last_tile_dim_replicate}",
        ),
    ] {
        let layout = Layout::parse(&format!("sharding_specs:{specs} mesh:|{dims}|*TPU")).unwrap();
        let s = layout_to_op_sharding(&layout, DeviceListForm::Explicit).unwrap();
        assert_eq!(to_hlo_text(&s), text);
    }
}

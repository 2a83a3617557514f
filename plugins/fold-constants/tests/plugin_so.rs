//! The built shared object, loaded as a host loads it, against the fake host of
//! `unbound_grappler_sdk::testing` (exported from this executable by the build script).

mod common;

use common::*;
use unbound_grappler_sdk::abi::{TfStatus, TpOptimizerRegistrationParams};
use unbound_grappler_sdk::testing::{self, FakeItem};
use unbound_proto::tensorflow::DataType;

type InitGraph = unsafe extern "C" fn(*mut TpOptimizerRegistrationParams, *mut TfStatus);

#[test]
fn registers_and_folds_through_the_c_abi() {
    let path = testing::find_cdylib("unbound_plugin_fold_constants")
        .expect("cargo builds the cdylib next to the test executable");
    // SAFETY: our own plugin; its initializers do nothing.
    let lib = unsafe { libloading::Library::new(&path) }.expect("load the plugin");
    // SAFETY: TF_InitGraph has this signature (export_plugin!).
    let init = unsafe { lib.get::<InitGraph>(b"TF_InitGraph") }.expect("TF_InitGraph exported");
    // SAFETY: called as TensorFlow calls it.
    let reg = unsafe { testing::register(*init) };
    assert_eq!(reg.status.code, 0, "{:?}", reg.status.message);
    assert_eq!(reg.device_type().as_deref(), Some("CPU"));
    assert_eq!(
        (
            reg.params.struct_size,
            reg.configs.struct_size,
            reg.optimizer.struct_size
        ),
        (56, 92, 40)
    );
    assert_eq!(reg.configs.toggles, [0; 19]);

    let g = graph(vec![
        f32s("a", &[2], &[1.0, 2.0]),
        f32s("b", &[2], &[3.0, 4.0]),
        op("sum", "AddV2", &["a", "b"], DataType::DtFloat),
        op("out", "AddV2", &["a", "b"], DataType::DtFloat),
    ]);
    let item = FakeItem {
        preserve: vec!["out".into()],
        fetch: vec!["out".into()],
    };
    // SAFETY: the plugin is loaded.
    let result = unsafe { testing::optimize(&reg.optimizer, &g, &item) };
    assert_eq!(result.code, 0, "{}", result.message);
    let out = result.graph.unwrap();
    assert_eq!(f32_values(&value(&out, "sum")), [4.0, 6.0]);
    assert_eq!(node(&out, "out").op, "AddV2");

    let all_preserved = FakeItem {
        preserve: vec!["sum".into(), "out".into()],
        fetch: vec![],
    };
    // SAFETY: the plugin is loaded.
    let result = unsafe { testing::optimize(&reg.optimizer, &g, &all_preserved) };
    assert_eq!((result.code, result.message.as_str()), (10, "did nothing"));
    drop(lib);
}

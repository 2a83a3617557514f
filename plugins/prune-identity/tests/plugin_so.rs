//! The built shared object, loaded as a host loads it: `TF_InitGraph` with zeroed structs, then
//! `optimize_func` against the fake host of `unbound_grappler_sdk::testing` (exported from this
//! executable by the build script).

mod common;

use common::{graph, inputs, n, names};
use unbound_grappler_sdk::abi::{TfStatus, TpOptimizerRegistrationParams};
use unbound_grappler_sdk::testing::{self, FakeItem, Registration};

type InitGraph = unsafe extern "C" fn(*mut TpOptimizerRegistrationParams, *mut TfStatus);

fn with_plugin(f: impl FnOnce(&Registration)) {
    let path = testing::find_cdylib("unbound_plugin_prune_identity")
        .expect("cargo builds the cdylib next to the test executable");
    // SAFETY: our own plugin; its initializers do nothing.
    let lib = unsafe { libloading::Library::new(&path) }.expect("load the plugin");
    // SAFETY: TF_InitGraph has this signature (export_plugin!).
    let init = unsafe { lib.get::<InitGraph>(b"TF_InitGraph") }.expect("TF_InitGraph exported");
    // SAFETY: called as TensorFlow calls it.
    let reg = unsafe { testing::register(*init) };
    f(&reg);
    drop(lib);
}

#[test]
fn registers_for_cpu_with_default_configs() {
    with_plugin(|reg| {
        assert_eq!(reg.status.code, 0, "{:?}", reg.status.message);
        assert_eq!(reg.device_type().as_deref(), Some("CPU"));
        assert_eq!(reg.params.struct_size, 56);
        assert_eq!(reg.configs.struct_size, 92);
        assert_eq!(reg.optimizer.struct_size, 40);
        assert_eq!(reg.configs.toggles, [0; 19]);
    });
}

#[test]
fn optimizes_through_the_c_abi() {
    with_plugin(|reg| {
        let g = graph(vec![
            n("x", "Placeholder", &[]),
            n("id1", "Identity", &["x"]),
            n("keep", "Identity", &["id1"]),
            n("out", "Neg", &["keep"]),
        ]);
        let item = FakeItem {
            preserve: vec!["out".into(), "keep".into()],
            fetch: vec!["out:0".into()],
        };
        // SAFETY: the plugin is loaded.
        let result = unsafe { testing::optimize(&reg.optimizer, &g, &item) };
        assert_eq!(result.code, 0, "{}", result.message);
        assert!(result.had_deallocator);
        let out = result.graph.unwrap();
        assert_eq!(names(&out), ["x", "keep", "out"]);
        assert_eq!(inputs(&out, "keep"), ["x"]);

        // Nothing to remove, or outputs unknown: "did nothing" (ABORTED).
        let plain = graph(vec![n("x", "Placeholder", &[]), n("out", "Neg", &["x"])]);
        // SAFETY: the plugin is loaded.
        let result = unsafe { testing::optimize(&reg.optimizer, &plain, &item) };
        assert_eq!((result.code, result.message.as_str()), (10, "did nothing"));
        let no_fetch = FakeItem::default();
        // SAFETY: the plugin is loaded.
        let result = unsafe { testing::optimize(&reg.optimizer, &g, &no_fetch) };
        assert_eq!(result.code, 10);
    });
}

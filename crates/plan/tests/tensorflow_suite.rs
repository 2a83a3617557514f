//! `plan` against what TensorFlow 2.21's DTensor did (testdata/plan, recorded by
//! interop/plan/record.py on 8 logical CPU devices): every output's layout equal, as many
//! collective calls as DTensor's expanded program holds, every refusal a refusal.

use std::path::{Path, PathBuf};

use serde_json::Value;
use unbound_plan::{plan, PlanError, PlanOptions};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/plan")
}

fn pairs(v: &Value) -> Vec<(String, String)> {
    v.as_object()
        .map(|o| {
            o.iter()
                .map(|(k, specs)| {
                    let s: Vec<&str> = specs
                        .as_array()
                        .map(|a| a.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    (k.clone(), s.join(","))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn layouts_equal_dtensor() {
    let text = std::fs::read_to_string(testdata().join("expected.json")).unwrap();
    let cases: Vec<Value> = serde_json::from_str(&text).unwrap();
    assert!(cases.len() >= 15);
    let mut failures = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let options = PlanOptions {
            mesh: case["mesh"].as_str().unwrap().into(),
            inputs: pairs(&case["inputs"]),
            variables: pairs(&case["variables"]),
            ..PlanOptions::default()
        };
        let got = plan(&testdata().join(name), &options);
        match (case.get("refused"), got) {
            (Some(_), Err(PlanError::Refused { .. })) => {}
            (Some(why), Ok(_)) => {
                failures.push(format!("{name}: DTensor refused ({why}), plan did not"))
            }
            (_, Err(e)) => failures.push(format!("{name}: {e}")),
            (None, Ok(report)) => {
                // DTensor's expanded program holds one Collective*V2 op per call.
                if let Some(ops) = case.get("collectives").and_then(Value::as_array) {
                    if ops.len() != report.totals.collectives {
                        failures.push(format!(
                            "{name}: DTensor ran {} collectives, plan counts {}",
                            ops.len(),
                            report.totals.collectives
                        ));
                    }
                }
                for (out, specs) in case["outputs"].as_object().unwrap() {
                    let want: Vec<&str> = specs
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter_map(Value::as_str)
                        .collect();
                    let have = report.outputs.get(out).map(|t| t.specs.clone());
                    if have
                        .as_deref()
                        .map(|h| h.iter().map(String::as_str).collect::<Vec<_>>())
                        != Some(want.clone())
                    {
                        failures.push(format!("{name} {out}: DTensor {want:?}, plan {have:?}"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A contracting axis sharded (a on [u,x], b on [u,y]): DTensor's matmul expander slices b's
/// contracting axis to x and all-reduces (Add) the local product over x.
#[test]
fn a_sharded_contraction_is_all_reduced() {
    let options = PlanOptions {
        mesh: "x=2,y=4".into(),
        inputs: vec![
            ("a".into(), "unsharded,x".into()),
            ("b".into(), "unsharded,y".into()),
        ],
        ..PlanOptions::default()
    };
    let report = plan(
        &testdata().join("matmul_unsharded_x__unsharded_y"),
        &options,
    )
    .unwrap();
    let mm = report.ops.iter().find(|o| o.op == "MatMul").unwrap();
    let kinds: Vec<(&str, Vec<String>)> = mm
        .collectives
        .iter()
        .map(|c| (c.kind, c.mesh_dims.clone()))
        .collect();
    // b [16,8] on [u,y]: its contracting axis takes a's x (a slice), the local product
    // [8, 8/4] is summed over x.
    assert!(
        kinds.contains(&("all_reduce", vec!["x".to_string()])),
        "{kinds:?}"
    );
    assert_eq!(report.outputs["out0"].specs, ["unsharded", "y"]);
    assert_eq!(report.totals.per_kind["all_reduce"].count, 1);
    // [8,8] f32 sharded [u,y] on 4: 64 bytes locally; 2·(2-1)/2 of it over x.
    assert_eq!(report.totals.per_kind["all_reduce"].bytes, 64);
}

#[test]
fn unknown_inputs_and_bad_layouts_are_refused_by_name() {
    let dir = testdata().join("add_broadcast_vector");
    let bad = |inputs: Vec<(String, String)>| {
        plan(
            &dir,
            &PlanOptions {
                mesh: "x=2,y=4".into(),
                inputs,
                ..PlanOptions::default()
            },
        )
        .unwrap_err()
        .to_string()
    };
    assert!(bad(vec![("nope".into(), "x".into())]).contains("--input nope"));
    assert!(bad(vec![("a".into(), "z,unsharded".into())]).contains("no dimension \"z\""));
    assert!(bad(vec![("a".into(), "x".into())]).contains("rank 2"));
}

fn pair(n: &str, s: &str) -> (String, String) {
    (n.to_string(), s.to_string())
}

/// The transformer block's model-parallel layouts by object path (record.py keeps the
/// variables in the module's dict `vars`), the query/key/value kernels by a regex.
fn transformer_options(variables: Vec<(String, String)>) -> PlanOptions {
    PlanOptions {
        mesh: "x=2,y=4".into(),
        inputs: vec![pair("x", "x,unsharded,unsharded")],
        variables,
        ..PlanOptions::default()
    }
}

fn model_parallel_by_path() -> Vec<(String, String)> {
    vec![
        pair("vars/w[qkv]", "unsharded,y,unsharded"),
        pair("vars/wo", "y,unsharded,unsharded"),
        pair("vars/w1", "unsharded,y"),
        pair("vars/b1", "y"),
        pair("vars/w2", "y,unsharded"),
    ]
}

/// The transformer block, data parallel on x and model parallel on y (heads, MLP columns):
/// DTensor's einsum rule all-reduces the two contractions over y (the attention output
/// projection and the MLP's second matmul), nothing else communicates, and the output keeps
/// the batch sharding DTensor gave it.
#[test]
fn a_transformer_block_costs_two_all_reduces() {
    let options = transformer_options(model_parallel_by_path());
    let report = plan(&testdata().join("transformer_block_dp_mp"), &options).unwrap();
    assert_eq!(
        report.outputs["out0"].specs,
        ["x", "unsharded", "unsharded"]
    );
    assert_eq!(report.totals.collectives, 2);
    let ar = &report.totals.per_kind["all_reduce"];
    assert_eq!(ar.count, 2);
    // [8,16,32] f32 on [x,u,u]: 8192 bytes locally, 2·3/4 of it sent per all-reduce.
    assert_eq!(ar.bytes, 2 * 12288);
    assert!(report.assumed.is_empty());
}

/// Variables are matched by object path: the report lists them by path with the layouts
/// given (the regex `vars/w[qkv]` reaching all three kernels), the unnamed ones replicated;
/// the same layouts spelled as exact paths give the same plan.
#[test]
fn variables_are_laid_out_by_object_path() {
    let dir = testdata().join("transformer_block_dp_mp");
    let by_regex = plan(&dir, &transformer_options(model_parallel_by_path())).unwrap();
    let keys: Vec<&str> = by_regex.variables.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "vars/b1",
            "vars/ln_b",
            "vars/ln_g",
            "vars/w1",
            "vars/w2",
            "vars/wk",
            "vars/wo",
            "vars/wq",
            "vars/wv"
        ]
    );
    for qkv in ["vars/wq", "vars/wk", "vars/wv"] {
        assert_eq!(
            by_regex.variables[qkv].specs,
            ["unsharded", "y", "unsharded"]
        );
    }
    assert_eq!(
        by_regex.variables["vars/wo"].specs,
        ["y", "unsharded", "unsharded"]
    );
    assert_eq!(by_regex.variables["vars/ln_g"].specs, ["unsharded"]);

    let mut exact = model_parallel_by_path();
    exact.remove(0);
    for qkv in ["vars/wq", "vars/wk", "vars/wv"] {
        exact.push(pair(qkv, "unsharded,y,unsharded"));
    }
    let by_path = plan(&dir, &transformer_options(exact)).unwrap();
    assert_eq!(
        serde_json::to_value(&by_path).unwrap(),
        serde_json::to_value(&by_regex).unwrap()
    );

    // Without the variable layouts the block is purely data parallel: no collective.
    let replicated = plan(&dir, &transformer_options(Vec::new())).unwrap();
    assert_eq!(replicated.totals.collectives, 0);
    assert_eq!(
        replicated.variables["vars/wo"].specs,
        ["unsharded", "unsharded", "unsharded"]
    );
}

/// The first `--variable` that matches wins: a catch-all after a specific path leaves the
/// specific one in force.
#[test]
fn the_first_matching_variable_pattern_wins() {
    let dir = testdata().join("dense_model_parallel");
    let options = PlanOptions {
        mesh: "x=2,y=4".into(),
        inputs: vec![pair("a", "x,unsharded")],
        variables: vec![
            pair("vars/kernel", "unsharded,y"),
            pair("vars/.*", "unsharded"),
        ],
        ..PlanOptions::default()
    };
    let report = plan(&dir, &options).unwrap();
    assert_eq!(report.variables["vars/kernel"].specs, ["unsharded", "y"]);
    assert_eq!(report.variables["vars/bias"].specs, ["unsharded"]);
}

/// A pattern no object path matches, such as the variable's graph name (`kernel`, its
/// VarHandleOp's shared_name), is an error naming it and listing the paths there are.
#[test]
fn a_variable_pattern_matching_no_path_is_an_error() {
    let dir = testdata().join("dense_model_parallel");
    let options = PlanOptions {
        mesh: "x=2,y=4".into(),
        inputs: vec![pair("a", "x,unsharded")],
        variables: vec![pair("kernel", "unsharded,y")],
        ..PlanOptions::default()
    };
    let err = plan(&dir, &options).unwrap_err();
    assert!(matches!(err, PlanError::Argument { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("--variable kernel"), "{text}");
    assert!(text.contains("\"vars/kernel\""), "{text}");
    assert!(text.contains("\"vars/bias\""), "{text}");
}

/// A TF1 model has no object graph: its variables are matched by name (shared_name).
#[test]
fn tf1_variables_are_matched_by_name() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/models/tf1_large_consts");
    let options = PlanOptions {
        mesh: "x=2".into(),
        variables: vec![pair("dense/kernel", "unsharded,x")],
        shapes: vec![("x".into(), vec![8, 16])],
        ..PlanOptions::default()
    };
    let report = plan(&dir, &options).unwrap();
    assert_eq!(report.variables["dense/kernel"].specs, ["unsharded", "x"]);
}

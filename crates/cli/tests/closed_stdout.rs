//! Every subcommand with a standard output that cannot be written (crates/cli/src/output.rs):
//! - `> /dev/full`: exit 1 with `unbound: error: writing to standard output: ...`, never a
//!   panic; `split`/`merge`/`proto` that wrote their output first say it is complete, and it is.
//! - a pipe whose reader is gone (EPIPE): no error, the command's own exit code (0 here; 1 for
//!   `verify` of a broken model), never a signal or a panic.

mod common;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::plugins::build_plugin;
use common::{bin, describe, model, unbound};

const MESH: &str = "|x=2,y=4|*CPU";

/// One command line; `out` is a fresh path the command may create.
struct Case {
    name: &'static str,
    args: Vec<OsString>,
    /// The output a successful run writes before printing its report.
    writes: Option<PathBuf>,
}

/// Test inputs shared by every case: a `.pb` model, its `.cpb` split, a `.npy` array.
struct Inputs {
    _tmp: tempfile::TempDir,
    pb_dir: PathBuf,
    cpb_dir: PathBuf,
    npy: PathBuf,
    plugin: PathBuf,
}

fn inputs() -> Inputs {
    let tmp = tempfile::tempdir().unwrap();
    let pb_dir = model("tf2_multi_sig");
    let cpb_dir = tmp.path().join("cpb");
    let out = unbound([
        OsString::from("split"),
        pb_dir.clone().into(),
        cpb_dir.clone().into(),
        "--max-size".into(),
        "1000".into(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let npy = tmp.path().join("g.npy");
    let data: Vec<u8> = (0..8 * 4).flat_map(|i| (i as f32).to_le_bytes()).collect();
    unbound_bundle::npy::write_npy_bytes(&npy, "<f4", &[8, 4], &data).unwrap();
    Inputs {
        _tmp: tmp,
        pb_dir,
        cpb_dir,
        npy,
        plugin: build_plugin("identity_remover"),
    }
}

fn os(items: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    items.iter().map(|s| s.as_ref().to_os_string()).collect()
}

/// Every subcommand, on valid input, with a fresh output path under `fresh`.
fn cases(i: &Inputs, fresh: &Path) -> Vec<Case> {
    let out = fresh.join("out");
    let npy_out = fresh.join("x.npy");
    let layout = format!("sharding_specs:x,y, mesh:{MESH}");
    let pb = i.pb_dir.join("saved_model.pb");
    let cpb = i.cpb_dir.join("saved_model.cpb");
    let prefix = fresh.join("proto");
    let case = |name, args: Vec<OsString>, writes: Option<&Path>| Case {
        name,
        args,
        writes: writes.map(Path::to_path_buf),
    };
    vec![
        case("show", os(&[&"show", &i.pb_dir]), None),
        case("show --json", os(&[&"show", &i.cpb_dir, &"--json"]), None),
        case("inspect", os(&[&"inspect", &cpb]), None),
        case("inspect --json", os(&[&"inspect", &cpb, &"--json"]), None),
        case("fingerprint", os(&[&"fingerprint", &i.pb_dir]), None),
        case(
            "fingerprint --json",
            os(&[&"fingerprint", &i.cpb_dir, &"--json"]),
            None,
        ),
        case("vars", os(&[&"vars", &i.pb_dir]), None),
        case("vars --json", os(&[&"vars", &i.pb_dir, &"--json"]), None),
        case(
            "vars --npy",
            os(&[&"vars", &i.pb_dir, &"w_f32", &"--npy", &npy_out]),
            Some(&npy_out),
        ),
        case("verify", os(&[&"verify", &i.cpb_dir]), None),
        case(
            "split",
            os(&[&"split", &i.pb_dir, &out, &"--max-size", &"1000"]),
            Some(&out),
        ),
        case("merge", os(&[&"merge", &i.cpb_dir, &out]), Some(&out)),
        case(
            "proto split",
            os(&[
                &"proto",
                &"split",
                &"--type",
                &"tensorflow.SavedModel",
                &pb,
                &prefix,
                &"--max-size",
                &"1000",
            ]),
            Some(&fresh.join("proto.cpb")),
        ),
        case(
            "proto merge",
            os(&[
                &"proto",
                &"merge",
                &"--type",
                &"tensorflow.SavedModel",
                &i.cpb_dir.join("saved_model"),
                &fresh.join("merged.pb"),
            ]),
            Some(&fresh.join("merged.pb")),
        ),
        case(
            "optimize",
            os(&[
                &"optimize",
                &i.pb_dir,
                &out,
                &"--plugin",
                &i.plugin,
                &"--device-type",
                &"CPU",
            ]),
            Some(&out),
        ),
        case("layout show", os(&[&"layout", &"show", &layout]), None),
        case(
            "layout show --json",
            os(&[&"layout", &"show", &layout, &"--json"]),
            None,
        ),
        case(
            "layout from-op-sharding",
            os(&[
                &"layout",
                &"from-op-sharding",
                &"{devices=[2,1,4]<=[8] last_tile_dim_replicate}",
                &"--mesh",
                &MESH,
            ]),
            None,
        ),
        case(
            "layout unpack",
            os(&[&"layout", &"unpack", &"--layout", &layout, &i.npy, &out]),
            Some(&out),
        ),
        case("tags", os(&[&"tags", &i.pb_dir]), None),
        case("tags --json", os(&[&"tags", &i.pb_dir, &"--json"]), None),
        case(
            "tags --duplicate",
            os(&[&"tags", &i.pb_dir, &out, &"--duplicate", &"serve=serve,gpu"]),
            Some(&out),
        ),
        case(
            "export-tpu --list-functions",
            os(&[&"export-tpu", &"--list-functions", &i.pb_dir]),
            None,
        ),
        case(
            "export-tpu",
            os(&[&"export-tpu", &i.pb_dir, &out]),
            Some(&out),
        ),
        case(
            "reshard",
            os(&[
                &"reshard",
                &i.pb_dir.join("variables").join("variables"),
                &fresh.join("ckpt"),
                &"--mesh",
                &"x=1",
            ]),
            Some(&fresh.join("ckpt")),
        ),
        case(
            "reshard --dry-run",
            os(&[
                &"reshard",
                &i.pb_dir.join("variables").join("variables"),
                &fresh.join("ckpt"),
                &"--mesh",
                &"x=1",
                &"--dry-run",
            ]),
            None,
        ),
        case(
            "layout relayout --plan",
            os(&[
                &"layout",
                &"relayout",
                &"--from",
                &layout,
                &"--to",
                &format!("sharding_specs:y,x, mesh:{MESH}"),
                &"--plan",
            ]),
            None,
        ),
    ]
}

/// Runs `args` with `stdout` as standard output.
fn run_with(args: &[OsString], stdout: Stdio) -> Output {
    Command::new(bin())
        .args(args)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .expect("the unbound binary runs")
}

/// Whether the case's output exists (for a checkpoint prefix: its index).
fn out_path_exists(case: &Case) -> bool {
    case.writes.as_ref().is_some_and(|p| {
        p.exists() || std::path::PathBuf::from(format!("{}.index", p.display())).exists()
    })
}

/// A pipe whose read end is already closed.
fn closed_pipe() -> Stdio {
    // The write end of the stdin pipe of a process that has exited: nobody can read it.
    let mut gone = Command::new("true")
        .stdin(Stdio::piped())
        .spawn()
        .expect("true runs");
    let writer = gone.stdin.take().expect("a pipe");
    gone.wait().expect("true exits");
    writer.into()
}

fn assert_no_panic(out: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code().is_some(),
        "{what}: killed by a signal\n{}",
        describe(out)
    );
    assert_ne!(out.status.code(), Some(101), "{what}\n{}", describe(out));
    assert!(
        !stderr.contains("panicked"),
        "{what}: panicked\n{}",
        describe(out)
    );
}

#[test]
fn every_subcommand_reports_a_full_stdout_and_shrugs_off_a_closed_pipe() {
    let inputs = inputs();
    let n = cases(&inputs, Path::new("/")).len();
    for k in 0..n {
        // Each run gets fresh output paths.
        for full in [true, false] {
            let fresh = tempfile::tempdir().unwrap();
            let case = cases(&inputs, fresh.path()).swap_remove(k);
            // Sanity: the command succeeds with a normal stdout.
            if full {
                let ok_dir = tempfile::tempdir().unwrap();
                let ok_case = cases(&inputs, ok_dir.path()).swap_remove(k);
                let out = run_with(&ok_case.args, Stdio::piped());
                assert_eq!(
                    out.status.code(),
                    Some(0),
                    "{}: fails on a normal stdout\n{}",
                    case.name,
                    describe(&out)
                );
                assert!(!out.stdout.is_empty(), "{}: prints nothing", case.name);
            }
            let stdout = if full {
                Stdio::from(std::fs::File::create("/dev/full").expect("/dev/full"))
            } else {
                closed_pipe()
            };
            let out = run_with(&case.args, stdout);
            let what = format!(
                "{} with {}",
                case.name,
                if full { "/dev/full" } else { "a closed pipe" }
            );
            assert_no_panic(&out, &what);
            let stderr = String::from_utf8_lossy(&out.stderr);
            if full {
                assert_eq!(out.status.code(), Some(1), "{what}\n{}", describe(&out));
                assert!(
                    stderr.contains("unbound: error: writing to standard output: No space left"),
                    "{what}\n{}",
                    describe(&out)
                );
                // optimize prints what it loaded before it writes: a full stdout stops it
                // before OUT exists. The others print only after their output is written.
                if case.name == "optimize" {
                    assert!(!out_path_exists(&case), "{what}: wrote OUT anyway");
                    continue;
                }
                if let Some(written) = &case.writes {
                    if !case.name.starts_with("layout") {
                        assert!(
                            stderr.contains(&format!(
                                "{} was written and is complete",
                                written.display()
                            )),
                            "{what}: does not say its output is complete\n{}",
                            describe(&out)
                        );
                    }
                }
            } else {
                assert_eq!(out.status.code(), Some(0), "{what}\n{}", describe(&out));
                assert!(!stderr.contains("error"), "{what}\n{}", describe(&out));
            }
            if let Some(written) = &case.writes {
                assert!(
                    out_path_exists(&case),
                    "{what}: {} missing",
                    written.display()
                );
            }
        }
    }
}

#[test]
fn verify_keeps_its_verdict_when_the_pipe_closes() {
    let tmp = tempfile::tempdir().unwrap();
    let broken = tmp.path().join("broken");
    common::copy_dir(&model("tf2_multi_sig"), &broken);
    let pb = broken.join("saved_model.pb");
    let mut bytes = std::fs::read(&pb).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&pb, bytes).unwrap();
    let out = run_with(&os(&[&"verify", &broken]), closed_pipe());
    assert_no_panic(&out, "verify of a broken model with a closed pipe");
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("problem"),
        "{}",
        describe(&out)
    );
}

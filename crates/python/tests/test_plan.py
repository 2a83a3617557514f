"""`unbound.plan` against the layouts TensorFlow 2.21's DTensor gave (testdata/plan, recorded
by interop/plan/record.py on 8 logical CPU devices), and the report's shape: the same dict
`unbound plan --json` prints."""

import json
import subprocess

import pytest

import unbound
from _toolkit_support import ROOT

PLAN = ROOT / "testdata" / "plan"
CASES = json.loads((PLAN / "expected.json").read_text())


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_layouts_equal_dtensor(case):
    run = lambda: unbound.plan(PLAN / case["name"], case["mesh"], case["inputs"], case["variables"])
    if "refused" in case:
        with pytest.raises(unbound.UnsupportedError, match="DTensor refuses"):
            run()
        return
    report = run()
    assert {k: v["specs"] for k, v in report["outputs"].items()} == case["outputs"]


def test_report_is_the_cli_json():
    case = next(c for c in CASES if c["name"] == "dense_model_parallel")
    report = unbound.plan(
        PLAN / case["name"], unbound.Mesh([("x", 2), ("y", 4)]), case["inputs"], case["variables"]
    )
    assert set(report) >= {"outputs", "ops", "totals", "assumed", "inputs", "variables"}
    for op in report["ops"]:
        assert set(op) >= {"name", "op", "inputs", "outputs", "collectives"}
        for c in op["collectives"]:
            assert set(c) >= {"kind", "mesh_dims", "bytes"}
    unbound_bin = ROOT / "target" / "release" / "unbound"
    if unbound_bin.exists():
        cmd = [str(unbound_bin), "plan", str(PLAN / case["name"]), "--mesh", "x=2,y=4", "--json"]
        for k, v in case["inputs"].items():
            cmd += ["--input", f"{k}={','.join(v)}"]
        for k, v in case["variables"].items():
            cmd += ["--variable", f"{k}={','.join(v)}"]
        cli = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        assert cli["outputs"] == report["outputs"]
        assert cli["totals"] == report["totals"]


def test_bad_arguments_are_named():
    with pytest.raises(unbound.InvalidArgumentError, match="--input nope"):
        unbound.plan(PLAN / "add_broadcast_vector", "x=2,y=4", {"nope": "x"})
    with pytest.raises(unbound.LayoutError):
        unbound.plan(PLAN / "add_broadcast_vector", "x=2,y=", {})


def test_variables_by_object_path():
    """Variables are named by object path (`vars/kernel`), not by their graph names."""
    case = next(c for c in CASES if c["name"] == "dense_model_parallel")
    dir = PLAN / case["name"]
    report = unbound.plan(dir, case["mesh"], case["inputs"], {"vars/kernel": ["unsharded", "y"]})
    assert report["variables"]["vars/kernel"]["specs"] == ["unsharded", "y"]
    assert report["variables"]["vars/bias"]["specs"] == ["unsharded"]
    with pytest.raises(unbound.InvalidArgumentError, match="--variable kernel.*vars/kernel"):
        unbound.plan(dir, case["mesh"], case["inputs"], {"kernel": "unsharded,y"})

"""Compares `unbound plan` with what DTensor did (record.py's expected.json).

    python interop/plan/check.py --unbound PATH SUITE_DIR

For every case: the layout `unbound plan --json` gives each output equals the one DTensor gave
(`dtensor.fetch_layout`), and where DTensor refused the program, the plan refuses it too
(exit 1, naming the op); and the number of communicating collectives the plan counts
(all-gathers, all-reduces, all-to-alls) equals the number of Collective*V2 ops DTensor's
expanded program holds on one device (record.py; on CPU an all-gather lowers to an
all-reduce, so kinds are not compared, only the count). Prints one line per case and a
summary; exits 1 on any mismatch.
"""

import argparse
import json
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--unbound", required=True)
    ap.add_argument("suite")
    args = ap.parse_args()
    with open(os.path.join(args.suite, "expected.json")) as f:
        expected = json.load(f)
    passed = failed = 0
    for e in expected:
        cmd = [args.unbound, "plan", os.path.join(args.suite, e["name"]), "--mesh", e["mesh"], "--json"]
        for name, specs in e["inputs"].items():
            cmd += ["--input", f"{name}={','.join(specs)}"]
        for path, specs in e["variables"].items():  # object paths (vars/kernel)
            cmd += ["--variable", f"{path}={','.join(specs)}"]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if "refused" in e:
            ok = run.returncode == 1 and "DTensor refuses" in run.stderr
            got = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else f"exit {run.returncode}"
            want = "refused: " + e["refused"]
        elif run.returncode != 0:
            ok, got, want = False, run.stderr.strip(), e["outputs"]
        else:
            report = json.loads(run.stdout)
            got = {k: v["specs"] for k, v in report["outputs"].items()}
            want = e["outputs"]
            ok = got == want
            if ok and e.get("collectives") is not None:
                n = report["totals"]["collectives"]
                if n != len(e["collectives"]):
                    ok = False
                    got, want = f"{n} collectives", f"{len(e['collectives'])} collectives {e['collectives']}"
        if ok:
            passed += 1
            print(f"ok {e['name']}")
        else:
            failed += 1
            print(f"FAIL {e['name']}: DTensor {want}, plan {got}")
    print(f"plan check: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Compare `unbound layout ...` with the vectors make_vectors.py recorded from TensorFlow.

    python interop/dtensor/check_cli.py VECTORS_DIR UNBOUND_BINARY

For every mesh and layout TensorFlow parsed, `unbound layout show SPEC --json` must print the
same to_string, proto_hex and properties; where TensorFlow rejected the input, unbound must
exit 1 (with TensorFlow's message, unless TensorFlow aborted). For every layout on a
`use_xla_spmd` mesh, op_sharding_hex must equal TensorFlow's `_XlaSharding`. For every dtype
and layout pair, `unbound layout unpack` of the global array and `unbound layout relayout` of
the components must write TensorFlow's components byte for byte, and `unbound layout pack`
must give the global array back. Needs only NumPy. Prints each difference and a summary
line; exits 1 on any difference.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

DTYPES = {
    "float16": "<f2", "bfloat16": "<u2", "float32": "<f4", "float64": "<f8", "int8": "|i1",
    "int16": "<i2", "int32": "<i4", "int64": "<i8", "uint8": "|u1", "uint16": "<u2",
    "uint32": "<u4", "uint64": "<u8", "bool": "|b1", "complex64": "<c8", "complex128": "<c16",
}


class Checker:
    def __init__(self, unbound):
        self.unbound = unbound
        self.passed = 0
        self.failed = 0

    def run(self, *args):
        return subprocess.run([self.unbound, *args], capture_output=True, text=True)

    def fail(self, what, detail):
        self.failed += 1
        print(f"DIFF {what}: {detail}")

    def ok(self):
        self.passed += 1

    def show(self, case):
        spec = case["input"]
        if case["kind"].endswith("_proto"):
            fd, path = tempfile.mkstemp(suffix=".pb")
            os.write(fd, bytes.fromhex(spec))
            os.close(fd)
            spec = "@" + path
        kind = "mesh" if case["kind"].startswith("mesh") else "layout"
        r = self.run("layout", "show", spec, "--kind", kind, "--json")
        what = f"{case['kind']} {case['input'][:70]!r}"
        if not case["ok"]:
            if r.returncode != 1:
                return self.fail(what, f"TensorFlow rejects it, unbound exit {r.returncode}")
            tf = case["error"].splitlines()[0].split("goo.gle/debug")[0].strip()
            if not case.get("crash") and tf not in r.stderr:
                return self.fail(what, f"TensorFlow says {tf!r}, unbound {r.stderr.strip()!r}")
            return self.ok()
        if r.returncode != 0:
            return self.fail(what, f"TensorFlow accepts it, unbound: {r.stderr.strip()}")
        got = json.loads(r.stdout)
        for key in ("to_string", "proto_hex", "sharding_specs", "rank", "type", "is_fully_replicated",
                    "is_single_device", "dim_names", "shape", "size", "local_device_ids", "local_devices",
                    "global_devices", "use_xla_spmd", "is_remote"):
            if key in case and key in got and case[key] != got[key]:
                return self.fail(what, f"{key}: TensorFlow {case[key]!r}, unbound {got[key]!r}")
        self.ok()

    def op_sharding(self, case):
        r = self.run("layout", "show", case["layout"], "--json")
        what = f"op_sharding {case['layout'][:60]!r}"
        if r.returncode != 0:
            return self.fail(what, r.stderr.strip())
        got = json.loads(r.stdout)["op_sharding_hex"]
        if [got] != case["op_sharding_hex"]:
            return self.fail(what, f"TensorFlow {case['op_sharding_hex']}, unbound {got}")
        back = self.run("layout", "from-op-sharding", got, "--mesh", case["layout"].split(" mesh:", 1)[1],
                        "--rank", str(len(json.loads(r.stdout)["sharding_specs"])), "--json")
        if back.returncode != 0:
            return self.fail(what, "from-op-sharding: " + back.stderr.strip())
        self.ok()

    def data(self, case, work):
        dtype = case["dtype"]
        what = f"data {dtype} {case['from'][:40]!r} -> {case['to'][:40]!r}"
        shape = tuple(case["global_shape"])

        def array(data, shp):
            if dtype == "string":
                vals = [bytes.fromhex(h) for h in data]
                width = max([len(v) for v in vals] + [1])
                return np.array(vals, dtype=f"S{width}").reshape(shp)
            return np.frombuffer(bytes.fromhex(data), dtype=DTYPES[dtype]).reshape(shp)

        g = array(case["global"], shape)
        gpath = os.path.join(work, "g.npy")
        np.save(gpath, g)
        a_dir, b_dir = os.path.join(work, "a"), os.path.join(work, "b")
        for d in (a_dir, b_dir):
            for f in os.listdir(d) if os.path.isdir(d) else []:
                os.remove(os.path.join(d, f))
        r = self.run("layout", "unpack", "--layout", case["from"], gpath, a_dir)
        if r.returncode != 0:
            return self.fail(what, "unpack: " + r.stderr.strip())

        def same(dirname, comps, step):
            if comps is None:
                return True
            for i, c in enumerate(comps):
                ours = np.load(os.path.join(dirname, f"{i}.npy"))
                want = array(c["data"], tuple(c["shape"]))
                if ours.shape != want.shape or ours.tobytes() != want.astype(ours.dtype).tobytes():
                    self.fail(what, f"{step}: component {i} differs")
                    return False
            return True

        if not same(a_dir, case.get("from_components"), "unpack"):
            return
        r = self.run("layout", "relayout", "--from", case["from"], "--to", case["to"], a_dir, b_dir,
                     "--global-shape", ",".join(map(str, shape)))
        if r.returncode != 0:
            return self.fail(what, "relayout: " + r.stderr.strip())
        if not same(b_dir, case.get("to_components"), "relayout"):
            return
        out = os.path.join(work, "back.npy")
        if os.path.exists(out):
            os.remove(out)  # unbound never overwrites an output
        r = self.run("layout", "pack", "--layout", case["to"], b_dir, out,
                     "--global-shape", ",".join(map(str, shape)))
        if r.returncode != 0:
            return self.fail(what, "pack: " + r.stderr.strip())
        if np.load(out).tobytes() != g.tobytes():
            return self.fail(what, "pack does not give the global array back")
        self.ok()


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    vec, unbound = sys.argv[1], sys.argv[2]
    c = Checker(unbound)
    load = lambda name: json.load(open(os.path.join(vec, name)))["cases"]  # noqa: E731
    for case in load("meshes.json"):
        c.show(case)
    for case in load("layouts.json"):
        if case["kind"] != "equal":
            c.show(case)
    for case in load("op_sharding.json"):
        c.op_sharding(case)
    with tempfile.TemporaryDirectory() as work:
        for case in load("data.json"):
            c.data(case, work)
    print(f"dtensor check: {c.passed} passed, {c.failed} failed")
    sys.exit(1 if c.failed else 0)


if __name__ == "__main__":
    main()

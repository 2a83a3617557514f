#!/usr/bin/env python3
"""Runs the `unbound` CLI over the bundled models and compares every output with a recorded
manifest, so a refactoring can prove it changed no behaviour.

    scripts/cli_golden.py --unbound target/release/unbound --check testdata/cli_golden.txt
    scripts/cli_golden.py --unbound target/release/unbound --record testdata/cli_golden.txt

Each manifest line is `<name> <sha256> <bytes>`: the SHA-256 of one output, whether the stdout
of `show --json`, `inspect --json`, `vars --json`, `fingerprint --json`, their text forms,
`verify` and `plan` (of testdata/plan's models, text and JSON), or a file written by `split`, `merge`, `externalize`, `proto split/merge` and
`vars --npy`.
`optimize` is run with the example plugins built beside the binary (prune-identity and
fold-constants, in and out of `--isolate`); the files it writes are recorded, not its stdout
(which reports timings). Fingerprint uuids are left out: in written `fingerprint.pb` files and in `fingerprint`'s output
(TensorFlow makes a fresh random one every time). With `--keep DIR` the raw outputs are kept there to diff by hand.
Exits 1 listing every output that differs, is missing or is new.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["tf1_large_consts", "tf2_multi_sig"]
MAX_SIZES = ["1073741824", "20000", "2000", "300"]
COMPRESSIONS = ["zstd", "brotli", "snappy", "none"]
FINGERPRINT_UUID_FIELD = 7


def varint(buf, pos):
    value, shift = 0, 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def without_field(buf, number):
    """The message `buf` with every occurrence of field `number` removed (wire level)."""
    out, pos = bytearray(), 0
    while pos < len(buf):
        start = pos
        key, pos = varint(buf, pos)
        wire_type = key & 7
        if wire_type == 0:
            _, pos = varint(buf, pos)
        elif wire_type == 1:
            pos += 8
        elif wire_type == 5:
            pos += 4
        elif wire_type == 2:
            length, pos = varint(buf, pos)
            pos += length
        else:
            raise ValueError(f"unexpected wire type {wire_type}")
        if key >> 3 != number:
            out += buf[start:pos]
    return bytes(out)


class Run:
    def __init__(self, unbound, work):
        self.unbound = unbound
        self.work = work
        self.outputs = {}

    def add(self, name, data):
        self.outputs[name] = data

    def cli(self, name, *args, allow_fail=False):
        proc = subprocess.run([self.unbound, *args], capture_output=True, cwd=ROOT)
        if proc.returncode != 0 and not allow_fail:
            sys.exit(f"{name}: unbound {' '.join(args)} failed: {proc.stderr.decode()}")
        out = proc.stdout.replace(self.work.encode(), b"$WORK")
        # TensorFlow's fingerprint uuid is random on every computation.
        out = re.sub(rb'(uuid"?: "?)[0-9]+', rb"\1<random>", out)
        self.add(name, out + f"\nexit {proc.returncode}\n".encode())

    def tree(self, name, directory):
        for dirpath, _, files in sorted(os.walk(directory)):
            for file in sorted(files):
                path = os.path.join(dirpath, file)
                with open(path, "rb") as f:
                    data = f.read()
                if file == "fingerprint.pb":
                    data = without_field(data, FINGERPRINT_UUID_FIELD)
                self.add(f"{name}/{os.path.relpath(path, directory)}", data)


PLUGINS = ["libunbound_plugin_prune_identity.so", "libunbound_plugin_fold_constants.so"]


def optimize(run, model, src, work):
    """The models `optimize` writes with each example plugin (which must be built beside the
    binary: cargo build --release -p unbound-plugin-prune-identity -p
    unbound-plugin-fold-constants)."""
    for plugin in PLUGINS:
        path = os.path.join(os.path.dirname(run.unbound), plugin)
        if not os.path.exists(path):
            sys.exit(f"optimize: {path} is not built")
        for isolate in ([], ["--isolate"]):
            name = f"{model}.optimize.{plugin.split('_plugin_')[1][:-3]}{'.isolate' if isolate else ''}"
            out = os.path.join(work, name)
            proc = subprocess.run([run.unbound, "optimize", src, out, "--plugin", path,
                                   "--device-type", "CPU", *isolate], capture_output=True, cwd=ROOT)
            if proc.returncode != 0:
                sys.exit(f"{name}: unbound optimize failed: {proc.stderr.decode()}")
            run.tree(name, out)


def plan(run):
    """`unbound plan` of the models in testdata/plan, laid out as DTensor ran them (refusals
    included: their exit code is pinned too), as text and JSON."""
    with open(os.path.join(ROOT, "testdata", "plan", "expected.json")) as f:
        cases = json.load(f)
    for case in cases:
        args = ["plan", os.path.join("testdata", "plan", case["name"]), "--mesh", case["mesh"]]
        for flag, layouts in (("--input", case["inputs"]), ("--variable", case["variables"])):
            for name, specs in sorted(layouts.items()):
                args += [flag, f"{name}={','.join(specs)}"]
        for flag in ([], ["--json"]):
            tag = "json" if flag else "text"
            run.cli(f"plan.{case['name']}.{tag}", *args, *flag, allow_fail=True)


def collect(unbound, work):
    run = Run(unbound, work)
    plan(run)
    for model in MODELS:
        src = os.path.join("testdata/models", model)
        optimize(run, model, src, work)
        for flag in ([], ["--json"]):
            tag = "json" if flag else "text"
            run.cli(f"{model}.show.{tag}", "show", src, *flag)
            run.cli(f"{model}.vars.{tag}", "vars", src, *flag)
            run.cli(f"{model}.fingerprint.{tag}", "fingerprint", src, *flag)
        run.cli(f"{model}.verify", "verify", src)
        keys = subprocess.run([unbound, "vars", src], capture_output=True, cwd=ROOT, check=True)
        for line in keys.stdout.decode().splitlines()[2:]:
            key = line.split()[0]
            if key == "_CHECKPOINTABLE_OBJECT_GRAPH":
                continue
            npy = os.path.join(work, "v.npy")
            run.cli(f"{model}.vars.{key}.npy.stdout", "vars", src, key, "--npy", npy, "--raw-bits")
            with open(npy, "rb") as f:
                run.add(f"{model}.vars.{key}.npy", f.read())
            os.remove(npy)  # outputs are never overwritten: the next key writes a new file
        # Externalize (issue 33): the dry run's report, then the directory written.
        name = f"{model}.externalize.1000"
        out = os.path.join(work, name)
        run.cli(f"{name}.dry_run.json", "externalize", src, out, "--min-size", "1000",
                "--dry-run", "--json")
        run.cli(f"{name}.stdout", "externalize", src, out, "--min-size", "1000")
        run.tree(name, out)
        for comp in COMPRESSIONS:
            for max_size in MAX_SIZES:
                name = f"{model}.split.{comp}.{max_size}"
                out = os.path.join(work, name)
                run.cli(f"{name}.stdout", "split", src, out, "--max-size", max_size,
                        "--compression", comp)
                run.tree(name, out)
                cpb = os.path.join(out, "saved_model.cpb")
                if os.path.exists(cpb):
                    run.cli(f"{name}.inspect.text", "inspect", cpb)
                    run.cli(f"{name}.inspect.json", "inspect", cpb, "--json")
                    run.cli(f"{name}.show.json", "show", out, "--json")
                    run.cli(f"{name}.fingerprint.json", "fingerprint", out, "--json")
                    run.cli(f"{name}.verify", "verify", out)
                    merged = out + ".merged"
                    run.cli(f"{name}.merge.stdout", "merge", out, merged)
                    run.tree(f"{name}.merge", merged)
    for max_size in ["1000", "100", "10"]:
        name = f"frozen_graph.proto.{max_size}"
        prefix = os.path.join(work, name)
        run.cli(f"{name}.split.stdout", "proto", "split", "--type", "tensorflow.GraphDef",
                "testdata/models/frozen_graph.pb", prefix, "--max-size", max_size)
        for ext in (".cpb", ".pb"):
            if os.path.exists(prefix + ext):
                with open(prefix + ext, "rb") as f:
                    run.add(f"{name}{ext}", f.read())
        run.cli(f"{name}.merge.stdout", "proto", "merge", "--type", "tensorflow.GraphDef",
                prefix, prefix + ".merged.pb")
        with open(prefix + ".merged.pb", "rb") as f:
            run.add(f"{name}.merged.pb", f.read())
    return run.outputs


def manifest_of(outputs):
    return {
        name: f"{hashlib.sha256(data).hexdigest()} {len(data)}" for name, data in outputs.items()
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unbound", required=True)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record")
    mode.add_argument("--check")
    parser.add_argument("--keep", help="keep the raw outputs in this directory")
    args = parser.parse_args()
    unbound = os.path.abspath(args.unbound)
    work = tempfile.mkdtemp(prefix="unbound-golden-")
    try:
        outputs = collect(unbound, work)
    finally:
        shutil.rmtree(work)
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        for name, data in outputs.items():
            with open(os.path.join(args.keep, name.replace("/", "__")), "wb") as f:
                f.write(data)
    got = manifest_of(outputs)
    if args.record:
        with open(args.record, "w") as f:
            for name in sorted(got):
                f.write(f"{name} {got[name]}\n")
        print(f"recorded {len(got)} outputs in {args.record}")
        return 0
    want = {}
    with open(args.check) as f:
        for line in f:
            name, rest = line.rstrip("\n").split(" ", 1)
            want[name] = rest
    failed = 0
    for name in sorted(set(want) | set(got)):
        if want.get(name) != got.get(name):
            failed += 1
            print(f"DIFF {name}: recorded {want.get(name)}, now {got.get(name)}")
    print(f"cli golden outputs: {len(got) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

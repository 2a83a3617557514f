#!/usr/bin/env python3
"""The hostile-input campaign: mutate the bundled test models and check every read command.

Each mutant is a copy of a SavedModel directory from testdata/models (as .pb, and split into
.cpb with each compression) with one class of damage:

  flip       1-4 flipped bits in one file (model, index, data shard, fingerprint)
  truncate   one file cut short
  append     bytes appended to one file
  lie        a .cpb rewritten with lying chunk metadata, every hash valid
             (crates/chunked/examples/lie_metadata.rs, the project's own records writer)
  special    one file replaced by a FIFO, a symlink to /dev/zero, a directory, a dangling link
  delete     one file removed (variables.index, a data shard, fingerprint.pb)
  shadow     a garbage saved_model.pb beside a valid saved_model.cpb
  symlink    a file or directory (variables/, a shard, the model file) moved out of the model
             and replaced by a symbolic link to it: every command must treat it as the original

On each, every read command runs (inspect, inspect --json, verify, show, show --json,
fingerprint, vars, vars --json, split, merge) and every writer (tags --duplicate, export-tpu
--to-cpu, and optimize with the example plugin built beside the binary, when it is) under
`prlimit --as=4000000000` with a 20 s timeout, and these must hold:

  - no command is killed by a signal, panics (exit 101 or "panicked"), exits other than 0/1,
    runs 20 s or more, or peaks at 1 GB of memory or more (getrusage of the child);
  - no writer (split, merge, tags, export-tpu, optimize) exits 0 on a mutant verify rejects;
  - verify never exits 0 on a mutant another command rejects;
  - what split writes, verify and merge accept;
  - every error line names a file (a path inside the mutant's directory);
  - fingerprint and show of a mutant whose variables.index is there but unreadable (a FIFO,
    /dev/zero, a directory, a dangling link) warn on stderr, naming it.

Once per run, the other inputs commands read are tried as special and damaged files (see
`special_inputs`): export-tpu --topology and optimize --plugin as a FIFO, /dev/zero, a directory, a
missing path, garbage, and the example plugin cut short (the loader would die of SIGBUS on it);
each must exit 1 promptly with an error naming the file.

Then issue 30's surfaces (scripts/hostile_surfaces.py: layouts, HLO text, .npy headers checked
against NumPy when it is importable, reshard to a 2,048-device mesh, safetensors device files,
deeply nested .pbtxt), `--surfaces` cases of them, under the same contract, each error line
naming the input or the argument.

Usage: scripts/hostile_campaign.py [--unbound target/release/unbound] [--mutants 3000]
       [--surfaces 40] [--seed 1] [--jobs 2] [--kinds flip,lie,...] [--report out.json]
Exits 1 if any check fails (each failure is printed with the mutant's seed and kind, which
recreate it).
"""

import argparse
import concurrent.futures
import json
import os
import random
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hostile_surfaces  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODELS = ["tf2_multi_sig", "tf1_large_consts"]
KINDS = ["flip", "truncate", "append", "lie", "special", "delete", "shadow", "symlink"]
# The example plugin `optimize` runs with, beside the binary when CI built it.
PLUGIN = "libunbound_plugin_prune_identity.so"
# Commands that write a model: each must refuse what verify rejects.
WRITERS = ("split", "merge", "tags", "export-tpu", "optimize")
TIMEOUT_S = 20
MEMORY_LIMIT = 4_000_000_000
PEAK_LIMIT = 1_000_000_000


def run(cmd, timeout=TIMEOUT_S):
    """Runs cmd under prlimit; returns (exit code or -signal, stdout, stderr, peak bytes, secs)."""
    full = ["prlimit", f"--as={MEMORY_LIMIT}", "--"] + [str(c) for c in cmd]
    start = time.monotonic()
    proc = subprocess.Popen(
        full,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    # communicate() reaped the child; its rusage is read from the wait status instead.
    secs = time.monotonic() - start
    peak = getattr(proc, "_peak", None)
    code = proc.returncode
    if timed_out:
        code = "timeout"
    return code, out.decode(errors="replace"), err.decode(errors="replace"), peak, secs


class Popen(subprocess.Popen):
    """subprocess.Popen that keeps the child's peak RSS (wait4's rusage)."""

    def _try_wait(self, wait_flags):
        try:
            pid, sts, usage = os.wait4(self.pid, wait_flags)
        except ChildProcessError:
            pid, sts = self.pid, 0
            usage = None
        if usage is not None and pid == self.pid:
            self._peak = usage.ru_maxrss * 1024
        return (pid, sts)


subprocess.Popen = Popen


def base_models(unbound, work):
    """The unmutated models: each bundled one as .pb, and split into .cpb per compression."""
    bases = []
    for name in MODELS:
        src = ROOT / "testdata" / "models" / name
        bases.append((f"{name}.pb", src))
        for compression, max_size in [("zstd", 1000), ("brotli", 20000), ("none", 1000), ("snappy", 5000)]:
            out = work / f"base-{name}-{compression}"
            if not out.exists():
                subprocess.run(
                    [unbound, "split", src, out, "--max-size", str(max_size), "--compression", compression],
                    check=True,
                    capture_output=True,
                )
            bases.append((f"{name}.cpb-{compression}", out))
    return bases


def files_of(d):
    return sorted(p for p in d.rglob("*") if p.is_file() and not p.is_symlink())


def mutate(kind, rng, base, d, lie_tool):
    """Makes the mutant directory d from base; returns a description, or None if the kind
    does not apply to this base."""
    shutil.copytree(base, d, symlinks=True)
    files = files_of(d)
    cpb = d / "saved_model.cpb"
    if kind == "flip":
        f = rng.choice(files)
        data = bytearray(f.read_bytes())
        if not data:
            return None
        spots = [rng.randrange(len(data) * 8) for _ in range(rng.randint(1, 4))]
        for bit in spots:
            data[bit // 8] ^= 1 << (bit % 8)
        f.write_bytes(bytes(data))
        return f"flip bits {spots} of {f.relative_to(d)}"
    if kind == "truncate":
        f = rng.choice(files)
        size = f.stat().st_size
        if size == 0:
            return None
        cut = rng.choice([0, rng.randrange(size), size - 1, rng.randrange(min(size, 100))])
        with open(f, "r+b") as fh:
            fh.truncate(cut)
        return f"truncate {f.relative_to(d)} to {cut} of {size}"
    if kind == "append":
        f = rng.choice(files)
        n = rng.choice([1, 3, 48, 4096])
        extra = bytes(rng.randrange(256) for _ in range(n)) if rng.random() < 0.5 else bytes(n)
        with open(f, "ab") as fh:
            fh.write(extra)
        return f"append {n} bytes to {f.relative_to(d)}"
    if kind == "lie":
        if not cpb.exists():
            return None
        seed = rng.randrange(1 << 62)
        tmp = d / "lied.cpb"
        r = subprocess.run([lie_tool, cpb, tmp, str(seed)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"lie_metadata failed: {r.stderr}")
        tmp.replace(cpb)
        return f"lie (seed {seed}): {r.stdout.strip()}"
    if kind == "special":
        f = rng.choice(files)
        how = rng.choice(["fifo", "devzero", "dir", "dangling"])
        f.unlink()
        if how == "fifo":
            os.mkfifo(f)
        elif how == "devzero":
            os.symlink("/dev/zero", f)
        elif how == "dir":
            f.mkdir()
        else:
            os.symlink(d / "nowhere", f)
        return f"{f.relative_to(d)} replaced by {how}"
    if kind == "delete":
        f = rng.choice(files)
        f.unlink()
        return f"delete {f.relative_to(d)}"
    if kind == "shadow":
        if not cpb.exists():
            return None
        junk = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 64, 1000])))
        (d / "saved_model.pb").write_bytes(junk)
        return f"garbage saved_model.pb ({len(junk)} bytes) beside the .cpb"
    if kind == "symlink":
        # Outside the mutant (its sibling), so the copy of the tree cannot take it in.
        store = d.parent / "linked"
        store.mkdir(exist_ok=True)
        target = rng.choice([d / "variables"] + files)
        if not target.exists():
            return None
        moved = store / target.name
        shutil.move(str(target), str(moved))
        os.symlink(moved, target)
        return f"{target.relative_to(d)} moved out and replaced by a symlink to it"
    raise ValueError(kind)


def commands(unbound, d, out_root):
    cmds = {
        "verify": [unbound, "verify", d],
        "show": [unbound, "show", d],
        "show --json": [unbound, "show", d, "--json"],
        "fingerprint": [unbound, "fingerprint", d],
        "vars": [unbound, "vars", d],
        "vars --json": [unbound, "vars", d, "--json"],
        "split": [unbound, "split", d, out_root / "split", "--max-size", "2000"],
        "merge": [unbound, "merge", d, out_root / "merge"],
        "tags": [unbound, "tags", d, out_root / "tags", "--duplicate", "serve=serve,tpu"],
        "export-tpu": [unbound, "export-tpu", d, out_root / "cpu", "--to-cpu"],
    }
    plugin = Path(unbound).parent / PLUGIN
    if plugin.exists():
        cmds["optimize"] = [unbound, "optimize", d, out_root / "optimize", "--plugin", plugin]
    cpb = d / "saved_model.cpb"
    if os.path.lexists(cpb):
        cmds["inspect"] = [unbound, "inspect", cpb]
        cmds["inspect --json"] = [unbound, "inspect", cpb, "--json"]
    return cmds


def unreadable_index(d):
    """Whether d's variables/variables.index is there (perhaps a dangling link) but is not a
    regular file once links are followed."""
    index = d / "variables" / "variables.index"
    return os.path.lexists(index) and not index.is_file()


def check_exit_1(where, cmd, named):
    """Runs cmd, which must exit 1 promptly, without a signal or panic, with an error naming
    `named`; returns the violations."""
    code, out, err, peak, secs = run(cmd)
    if code == 1 and "panicked" not in err and any(
        line.startswith("unbound: error:") and str(named) in line for line in err.splitlines()
    ):
        return []
    shown = "timeout" if code == "timeout" else f"exit {code}" if code >= 0 else f"signal {-code}"
    return [f"{where}: {shown}, not exit 1 with an error naming {named}: {err.strip()[-300:]}"]


def special_inputs(args):
    """The inputs commands read beside a model, each tried as special and damaged files:
    export-tpu --topology and optimize --plugin. Returns the violations."""
    work = Path(tempfile.mkdtemp(dir=args.work))
    model = ROOT / "testdata" / "models" / "tf2_multi_sig"
    bad = {}
    fifo = work / "fifo"
    os.mkfifo(fifo)
    bad["a FIFO"] = fifo
    bad["/dev/zero"] = Path("/dev/zero")
    bad["a directory"] = work
    bad["a missing path"] = work / "missing"
    garbage = work / "garbage.so"
    garbage.write_bytes(random.Random(args.seed).randbytes(5000))
    bad["garbage"] = garbage
    link = work / "zero-link"
    os.symlink("/dev/zero", link)
    bad["a symlink to /dev/zero"] = link
    violations = []
    cuts = 0
    for what, path in bad.items():
        out = work / "out"
        violations += check_exit_1(
            f"export-tpu --topology on {what}",
            [args.unbound, "export-tpu", model, out, "--topology", path],
            path,
        )
        violations += check_exit_1(
            f"optimize --plugin on {what}", [args.unbound, "optimize", model, out, "--plugin", path], path
        )
    plugin = Path(args.unbound).parent / PLUGIN
    if plugin.exists():
        data = plugin.read_bytes()
        rng = random.Random(args.seed)
        for cut in sorted({1000, 64, 63, len(data) // 2, len(data) - 1, rng.randrange(len(data))}):
            cut_plugin = work / f"cut-{cut}.so"
            cut_plugin.write_bytes(data[:cut])
            for isolate in ([], ["--isolate"]):
                cuts += 1
                violations += check_exit_1(
                    f"optimize {' '.join(isolate)} --plugin {PLUGIN} cut to {cut} of {len(data)} bytes",
                    [args.unbound, "optimize", model, work / "out", "--plugin", cut_plugin] + isolate,
                    cut_plugin,
                )
    else:
        print(f"note: {plugin} is not built: optimize is not tried with it", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    print(f"surfaces: {len(bad) * 2 + cuts} runs (--topology, --plugin), {len(violations)} violations", flush=True)
    return violations


def check_mutant(args, index):
    """Makes mutant `index` and runs every command on it; returns (record, violations)."""
    rng = random.Random(f"{args.seed}-{index}")
    kinds = args.kinds
    kind = kinds[index % len(kinds)]
    base_name, base = rng.choice(args.bases)
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        tmp = Path(tmp)
        d = tmp / "model"
        what = mutate(kind, rng, base, d, args.lie)
        if what is None:
            return {"index": index, "skipped": True}, []
        out_root = tmp / "out"
        out_root.mkdir()
        results = {}
        violations = []
        for name, cmd in commands(args.unbound, d, out_root).items():
            code, out, err, peak, secs = run(cmd)
            results[name] = code
            where = f"mutant {index} ({base_name}, {what}): {name}"
            if code == "timeout":
                violations.append(f"{where}: ran {TIMEOUT_S} s or more")
            elif code < 0:
                violations.append(f"{where}: killed by signal {-code}: {err.strip()[-300:]}")
            elif code == 101 or "panicked" in err:
                violations.append(f"{where}: panicked: {err.strip()[-300:]}")
            elif code not in (0, 1):
                violations.append(f"{where}: exit code {code}: {err.strip()[-300:]}")
            if peak is not None and peak >= PEAK_LIMIT:
                violations.append(f"{where}: peak memory {peak} bytes")
            if code == 1 and "unbound: error:" not in err:
                violations.append(f"{where}: exit 1 without an error message: {err.strip()[-300:]}")
            elif code == 1 and any(
                str(d) not in line for line in err.splitlines() if line.startswith("unbound: error:")
            ):
                violations.append(f"{where}: an error names no input file: {err.strip()[-300:]}")
            if name in ("fingerprint", "show") and code == 0 and unreadable_index(d):
                index_path = str(d / "variables" / "variables.index")
                if not any("warning" in line and index_path in line for line in err.splitlines()):
                    violations.append(f"{where}: an unreadable variables.index gives no warning naming it")
        rejected = [n for n, c in results.items() if c != 0]
        if results.get("verify") != 0:
            for n in WRITERS:
                if results.get(n) == 0:
                    violations.append(f"mutant {index} ({base_name}, {what}): {n} exits 0 on a model verify rejects")
        elif rejected:
            violations.append(
                f"mutant {index} ({base_name}, {what}): verify exits 0, but {', '.join(rejected)} reject it"
            )
        split_out = out_root / "split"
        if results.get("split") == 0:
            for name in ("verify", "merge"):
                cmd = [args.unbound, name, split_out] + ([out_root / "remerge"] if name == "merge" else [])
                code, out, err, _, _ = run(cmd)
                if code != 0:
                    violations.append(
                        f"mutant {index} ({base_name}, {what}): split wrote a model {name} rejects: {err.strip()[-300:]}"
                    )
        record = {"index": index, "kind": kind, "base": base_name, "what": what, "results": results}
        return record, violations


def check_surface(where, cmd, inputs):
    """The contract for one command of a surface case: returns (code, stderr, violations);
    every error line must name one of `inputs` (paths or argument names)."""
    code, out, err, peak, secs = run(cmd)
    v = []
    if code == "timeout":
        v.append(f"{where}: ran {TIMEOUT_S} s or more")
        return code, err, v
    if code < 0:
        v.append(f"{where}: killed by signal {-code}: {err.strip()[-300:]}")
    elif code == 101 or "panicked" in err:
        v.append(f"{where}: panicked: {err.strip()[-300:]}")
    elif code not in (0, 1):
        v.append(f"{where}: exit code {code}: {err.strip()[-300:]}")
    if peak is not None and peak >= PEAK_LIMIT:
        v.append(f"{where}: peak memory {peak} bytes")
    if code == 1:
        lines = [line for line in err.splitlines() if line.startswith("unbound: error:")]
        if not lines:
            v.append(f"{where}: exit 1 without an error message: {err.strip()[-300:]}")
        elif any(not any(i in line for i in inputs) for line in lines):
            v.append(f"{where}: an error names neither input nor argument: {err.strip()[-300:]}")
    return code, err, v


def run_surfaces(args, pool):
    """Issue 30's surfaces: `args.surfaces` cases; returns (cases run, violations)."""
    fx = hostile_surfaces.Fixtures(args.unbound, Path(tempfile.mkdtemp(dir=args.work)), run)
    picked = hostile_surfaces.cases(random.Random(f"{args.seed}-surfaces"), args.surfaces)
    violations = []
    for v in pool.map(lambda c: hostile_surfaces.run_case(c, args.unbound, fx, run, check_surface), picked):
        violations.extend(v)
        for line in v:
            print(line, flush=True)
    return len(picked), violations


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--unbound", default=str(ROOT / "target" / "release" / "unbound"))
    ap.add_argument("--lie", default=str(ROOT / "target" / "debug" / "examples" / "lie_metadata"),
                    help="the lie_metadata example (cargo build -p unbound-chunked --example lie_metadata)")
    ap.add_argument("--mutants", type=int, default=300)
    ap.add_argument("--surfaces", type=int, default=40,
                    help="cases of issue 30's surfaces (scripts/hostile_surfaces.py) run after the mutants")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--report", help="write every mutant's results here as JSON")
    args = ap.parse_args()
    args.kinds = [k for k in args.kinds.split(",") if k]
    for k in args.kinds:
        if k not in KINDS:
            ap.error(f"unknown kind {k}")
    for tool in (args.unbound, args.lie):
        if not os.access(tool, os.X_OK):
            ap.error(f"{tool} is not built")
    if shutil.which("prlimit") is None:
        ap.error("prlimit is not installed")
    work = Path(tempfile.mkdtemp(prefix="unbound-campaign-"))
    args.work = work
    started = time.monotonic()
    try:
        args.bases = base_models(args.unbound, work)
        records, violations = [], []
        for line in special_inputs(args):
            violations.append(line)
            print(line, flush=True)
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for record, v in pool.map(lambda i: check_mutant(args, i), range(args.mutants)):
                records.append(record)
                violations.extend(v)
                for line in v:
                    print(line, flush=True)
            surface_started = time.monotonic()
            surfaces, sv = run_surfaces(args, pool)
            violations.extend(sv)
            surface_secs = time.monotonic() - surface_started
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ran = [r for r in records if not r.get("skipped")]
    by_kind = {}
    for r in ran:
        k = by_kind.setdefault(r["kind"], {"mutants": 0, "verify_rejects": 0})
        k["mutants"] += 1
        k["verify_rejects"] += r["results"].get("verify") != 0
    runs = sum(len(r["results"]) for r in ran)
    print(
        f"{len(ran)} mutants ({len(records) - len(ran)} skipped: kind not applicable), {runs} command runs, "
        f"{len(violations)} violations, {time.monotonic() - started:.0f} s (seed {args.seed})"
    )
    for k, v in sorted(by_kind.items()):
        print(f"  {k:9} {v['mutants']:5} mutants, verify rejects {v['verify_rejects']}")
    numpy_note = "compared with NumPy" if hostile_surfaces.HAVE_NUMPY else "NumPy not importable: not compared"
    print(f"  surfaces  {surfaces:5} cases of issue 30's surfaces in {surface_secs:.0f} s (.npy {numpy_note})")
    if args.report:
        Path(args.report).write_text(json.dumps({"records": records, "violations": violations}, indent=1))
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())

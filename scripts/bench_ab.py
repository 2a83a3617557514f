#!/usr/bin/env python3
"""Times two `unbound` binaries on the same commands and files, runs interleaved (A, B, A, B,
...) so that load on the machine falls on both alike, and prints the median wall time and the
largest peak RSS of each, with the ratio B/A. For checking that a change (a refactoring, an
optimization) leaves speed unchanged or better.

    scripts/bench_ab.py OLD_UNBOUND NEW_UNBOUND MODEL_DIR [--reps 5] [--max-size BYTES]

MODEL_DIR holds model_pb/ and model_cpb/ (as `make_bench_model` writes them). Outputs go to a
scratch directory beside MODEL_DIR and are removed after each run. Peak RSS comes from
`/usr/bin/time -f %M` (Debian package `time`).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys


def commands(model, max_size):
    pb, cpb = os.path.join(model, "model_pb"), os.path.join(model, "model_cpb")
    out = os.path.join(os.path.dirname(os.path.abspath(model)), "ab-scratch", "out")
    return out, [
        ("merge .cpb", ["merge", cpb, out]),
        ("split (zstd)", ["split", pb, out, "--max-size", max_size]),
        ("split (none)", ["split", pb, out, "--max-size", max_size, "--compression", "none"]),
        ("fingerprint .pb", ["fingerprint", pb, "--json"]),
        ("fingerprint .cpb", ["fingerprint", cpb, "--json"]),
        ("show --json .cpb", ["show", cpb, "--json"]),
        ("verify .cpb", ["verify", cpb]),
    ]


def run_once(binary, args, out):
    shutil.rmtree(os.path.dirname(out), ignore_errors=True)
    os.makedirs(os.path.dirname(out))
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%e %M", binary, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if proc.returncode != 0:
        sys.exit(f"{binary} {' '.join(args)} failed: {proc.stderr}")
    seconds, kib = proc.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(kib) * 1024 / 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("model")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--max-size", default="100000000", help="split's --max-size")
    args = parser.parse_args()
    out, cmds = commands(args.model, args.max_size)
    print(f"{'command':<18} {'A median s':>10} {'B median s':>10} {'B/A':>6} {'A MB':>7} {'B MB':>7}")
    for label, cmd in cmds:
        times = {"A": [], "B": []}
        rss = {"A": 0.0, "B": 0.0}
        run_once(args.old, cmd, out)  # warm the page cache
        for _ in range(args.reps):
            for side, binary in (("A", args.old), ("B", args.new)):
                t, m = run_once(binary, cmd, out)
                times[side].append(t)
                rss[side] = max(rss[side], m)
        a, b = statistics.median(times["A"]), statistics.median(times["B"])
        ratio = b / a if a > 0 else float("nan")
        print(f"{label:<18} {a:>10.3f} {b:>10.3f} {ratio:>6.2f} {rss['A']:>7.0f} {rss['B']:>7.0f}")
    shutil.rmtree(os.path.dirname(out), ignore_errors=True)


if __name__ == "__main__":
    main()

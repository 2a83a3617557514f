#!/usr/bin/env python3
"""Reading 1 GiB of float32 from a checkpoint: `unbound.Checkpoint(p)[k]` (a zero-copy view,
with and without its CRC32C check, and followed by a full copy), `numpy.fromfile` of the
same bytes, and TensorFlow's `tf.train.load_checkpoint(p).get_tensor(k)`, in one run.

Each method runs in its own Python process (so that its peak memory is its own) after the
page cache holds the data file: the median wall time of several reads; for the first read,
the growth of anonymous resident memory (`RssAnon`) while the result is held and its peak
(sampled every millisecond during the read), the growth of file-backed resident memory
(`RssFile`: page-cache pages mapped into the process, shared, not extra memory), and the
growth of peak resident memory (`VmHWM`, reset before the read through
/proc/self/clear_refs; it counts mapped file pages too).

usage: ~/.cache/unbound/tf-2.21.0/bin/python scripts/bench_python_checkpoint.py [--gib N]
       [--repeat N] [--dir DIR]   (needs `unbound` importable, e.g. PYTHONPATH=<site dir>)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

KEY = "big/.ATTRIBUTES/VARIABLE_VALUE"
METHODS = [
    ("unbound view (CRC checked)", "view"),
    ("unbound view, verify=False", "view_noverify"),
    ("unbound view + np.array copy", "view_copy"),
    ("unbound view + .sum()", "view_sum"),
    ("numpy.fromfile", "fromfile"),
    ("numpy.fromfile + .sum()", "fromfile_sum"),
    ("tf get_tensor", "tf"),
]


def status(field: str) -> int:
    """A /proc/self/status field in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def warm(path: str) -> None:
    """Reads `path` through the page cache in small blocks (no memory kept)."""
    with open(path, "rb", buffering=0) as f:
        while f.read(8 << 20):
            pass


def one(method: str, prefix: str, count: int, repeat: int) -> dict:
    """Runs `method` `repeat` times in this process; returns its measurements."""
    import numpy as np

    data = prefix + ".data-00000-of-00001"
    warm(data)
    if method == "tf":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as tf

        reader = tf.train.load_checkpoint(prefix)

        def read():
            return reader.get_tensor(KEY)
    elif method.startswith("view"):
        import unbound

        ck = unbound.Checkpoint(prefix)
        verify = method != "view_noverify"

        def read():
            a = ck.read(KEY, verify=verify)
            if method == "view_copy":
                return np.array(a)
            if method == "view_sum":
                return a.sum(dtype=np.float64)
            return a
    else:

        def read():
            a = np.fromfile(data, dtype="<f4", count=count, offset=0)
            return a.sum(dtype=np.float64) if method == "fromfile_sum" else a

    # The first read alone: peak memory (VmHWM, reset first; it counts mapped file pages
    # too), anonymous memory sampled every millisecond meanwhile, and what holding the result
    # costs. Then the timed reads, each result dropped before the next.
    anon0, file0 = status("RssAnon"), status("RssFile")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS
    hwm0 = status("VmHWM")
    peak_anon = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak_anon[0] = max(peak_anon[0], status("RssAnon") - anon0)
            time.sleep(0.001)

    sampler = threading.Thread(target=sample)
    sampler.start()
    t = time.perf_counter()
    result = read()
    first = time.perf_counter() - t
    done.set()
    sampler.join()
    peak = status("VmHWM") - hwm0
    held_anon, held_file = status("RssAnon") - anon0, status("RssFile") - file0
    peak_anon[0] = max(peak_anon[0], held_anon)
    del result
    times = [first]
    for _ in range(repeat - 1):
        t = time.perf_counter()
        result = read()
        times.append(time.perf_counter() - t)
        del result
    return {
        "median_s": statistics.median(times),
        "times": times,
        "anon": held_anon,
        "file": held_file,
        "peak_anon": peak_anon[0],
        "peak": peak,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where to write the checkpoint (a temporary directory)")
    ap.add_argument("--one", nargs=3, metavar=("METHOD", "PREFIX", "COUNT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        method, prefix, count = args.one
        print(json.dumps(one(method, prefix, int(count), args.repeat)))
        return

    import numpy as np

    import unbound

    count = int(args.gib * (1 << 30)) // 4
    work = tempfile.mkdtemp(prefix="bench_ckpt_", dir=args.dir)
    try:
        prefix = os.path.join(work, "ckpt")
        values = np.arange(count, dtype=np.float32)
        t = time.perf_counter()
        with unbound.CheckpointWriter(prefix) as w:
            w.write(KEY, values)
        written = time.perf_counter() - t
        del values
        print(f"{count * 4 / (1 << 30):.2f} GiB float32 checkpoint written by unbound.CheckpointWriter "
              f"in {written:.2f} s; {args.repeat} reads per method, page cache warm")
        rows = []
        for label, method in METHODS:
            out = subprocess.run(
                [sys.executable, __file__, "--repeat", str(args.repeat), "--one", method, prefix, str(count)],
                check=True, capture_output=True, text=True,
            ).stdout
            rows.append((label, json.loads(out.strip().splitlines()[-1])))
        base = dict(rows)["numpy.fromfile"]["median_s"]
        print()
        print("| method | median time | vs numpy.fromfile | RssAnon growth, result held | "
              "peak RssAnon growth | RssFile growth (mapped page cache) | peak RSS growth (VmHWM) |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for label, r in rows:
            print(f"| {label} | {r['median_s'] * 1000:.1f} ms | {r['median_s'] / base:.2f}x | "
                  f"{r['anon'] / 1e6:.1f} MB | {r['peak_anon'] / 1e6:.1f} MB | {r['file'] / 1e6:.1f} MB | "
                  f"{r['peak'] / 1e6:.1f} MB |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

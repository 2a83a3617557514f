#!/usr/bin/env python3
"""The Python toolkit and Splitter against the CLI and TensorFlow's own Merger, in one run.

Builds the graph-heavy model of `make_graph_model` (NODES small nodes, FUNCTIONS functions),
then times each pair of commands on it, each as its own process, measuring wall time and peak
resident memory (from wait4):

- `unbound split` (CLI) vs `unbound.split` (Python), max size 1 MiB;
- `unbound merge` (CLI) vs `unbound.merge` (Python), of that split;
- reading the `.cpb` into a serialized `SavedModel` file: TensorFlow's C++ `Merger::Read`
  (interop/merger_harness read) vs `unbound.read_message(..., as_bytes=True)` written to a file;
- splitting a parsed `saved_model_pb2.SavedModel` held in Python: `unbound.Splitter(msg).write`
  vs serializing it and `unbound proto split` (the CLI) on the bytes.

usage: PYTHONPATH=SITE python scripts/bench_python_toolkit.py [NODES] [FUNCTIONS]
       (python: the TensorFlow 2.21 venv's; SITE: where the unbound wheel is installed)
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def run(args, **kwargs):
    """Wall seconds and peak RSS (MB) of one process."""
    start = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kwargs)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.monotonic() - start
    err = proc.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{args}: failed: {err}")
    return elapsed, usage.ru_maxrss / 1024


def python(code):
    return [PY, "-c", code]


def main():
    nodes = sys.argv[1] if len(sys.argv) > 1 else "1500000"
    functions = sys.argv[2] if len(sys.argv) > 2 else "2000"
    subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "unbound-cli"], cwd=ROOT, check=True)
    subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "unbound-savedmodel", "--example", "make_graph_model"], cwd=ROOT, check=True)
    harness = subprocess.run(["bash", str(ROOT / "interop/build_harness.sh")], capture_output=True, text=True, check=True).stdout.split()[-1]
    cli = str(ROOT / "target/release/unbound")
    work = Path(tempfile.mkdtemp(prefix="bench-python-"))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    try:
        subprocess.run([str(ROOT / "target/release/examples/make_graph_model"), str(work / "m"), "--nodes", nodes, "--functions", functions], check=True, capture_output=True)
        src = work / "m" / "model_pb"
        size = (src / "saved_model.pb").stat().st_size
        print(f"model: {nodes} nodes, {functions} functions, saved_model.pb {size / 1e6:.0f} MB")
        rows = []
        rows.append(("split (max 1 MiB)", run([cli, "split", src, work / "s_cli", "--max-size", "1048576"]),
                     run(python(f"import unbound; unbound.split({str(src)!r}, {str(work / 's_py')!r}, max_size=1 << 20)"))))
        assert (work / "s_cli/saved_model.cpb").read_bytes() == (work / "s_py/saved_model.cpb").read_bytes()
        rows.append(("merge", run([cli, "merge", work / "s_cli", work / "m_cli"]),
                     run(python(f"import unbound; unbound.merge({str(work / 's_cli')!r}, {str(work / 'm_py')!r})"))))
        prefix = work / "s_cli" / "saved_model"
        rows.append((".cpb -> serialized SavedModel file",
                     run([harness, "read", "--type", "tensorflow.SavedModel", prefix, work / "tf.pb"], env=env),
                     run(python(f"import unbound; open({str(work / 'py.pb')!r}, 'wb').write(unbound.read_message({str(prefix)!r}, 'tensorflow.SavedModel', as_bytes=True))"))))
        assert (work / "py.pb").stat().st_size == (work / "tf.pb").stat().st_size
        load = f"from tensorflow.core.protobuf import saved_model_pb2; m = saved_model_pb2.SavedModel.FromString(open({str(src / 'saved_model.pb')!r}, 'rb').read())"
        base = run(python(load), env=env)
        cli_side = run(python(load + f"; open({str(work / 'msg.pb')!r}, 'wb').write(m.SerializeToString(deterministic=True)); import subprocess; subprocess.run([{cli!r}, 'proto', 'split', '--type', 'tensorflow.SavedModel', {str(work / 'msg.pb')!r}, {str(work / 'p_cli')!r}, '--max-size', '1048576'], check=True, stdout=subprocess.DEVNULL)"), env=env)
        py_side = run(python(load + f"; import unbound; unbound.Splitter(m, max_size=1 << 20).write({str(work / 'p_py')!r})"), env=env)
        assert (work / "p_cli.cpb").read_bytes() == (work / "p_py.cpb").read_bytes()
        rows.append(("SavedModel message in Python -> .cpb (after a parse of "
                     f"{base[0]:.2f} s, {base[1]:.0f} MB)", cli_side, py_side))
        print(f"| {'work':<60} | {'reference s':>11} | {'MB':>6} | {'unbound (Python) s':>18} | {'MB':>6} |")
        print(f"|{'-' * 62}|{'-' * 13}|{'-' * 8}|{'-' * 20}|{'-' * 8}|")
        for name, (t1, m1), (t2, m2) in rows:
            print(f"| {name:<60} | {t1:>11.2f} | {m1:>6.0f} | {t2:>18.2f} | {m2:>6.0f} |")
        print("reference: the CLI for split/merge; TensorFlow's C++ Merger for the .cpb read; "
              "serialize + `unbound proto split` for the message")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

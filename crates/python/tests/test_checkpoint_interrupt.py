"""Ctrl-C during a long checkpoint write or read: KeyboardInterrupt at once, no file left
behind by an interrupted write, and the process goes on working."""

import os
import signal
import subprocess
import sys
import textwrap


def _sigint_as_python_sets_it() -> None:
    """Run in the child before it starts: SIGINT back to its default, so that the child's
    Python installs its KeyboardInterrupt handler even when this process was started with
    SIGINT ignored (a shell's background job, `nohup`), which the child would inherit."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    import numpy as np
    import unbound

    out = sys.argv[1]
    big = np.ones(96 << 20, dtype=np.float32)  # 384 MiB

    def interrupted(work):
        threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
        t = time.perf_counter()
        try:
            for _ in range(50):
                work()
        except KeyboardInterrupt:
            return time.perf_counter() - t
        raise SystemExit("not interrupted")

    w = unbound.CheckpointWriter(os.path.join(out, "cut", "ckpt"))
    def write():
        w.write("k%d" % time.perf_counter_ns(), big)
    print("write interrupted after %.2f s" % interrupted(write))
    del w
    print("left:", sorted(os.listdir(os.path.join(out, "cut"))))

    prefix = os.path.join(out, "whole", "ckpt")
    with unbound.CheckpointWriter(prefix) as w2:
        w2.write("big", big)
    ck = unbound.Checkpoint(prefix)
    print("read interrupted after %.2f s" % interrupted(lambda: ck.read_box("big", "")))
    print("after:", float(ck["big"][:10].sum()))
    """
)


def test_ctrl_c_interrupts_writes_and_reads(tmp_path):
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=300,
                       preexec_fn=_sigint_as_python_sets_it)
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(":", 1) if ":" in line else (line, "") for line in r.stdout.splitlines())
    assert lines["left"].strip() == "[]", r.stdout  # the temporary data file was removed
    assert lines["after"].strip() == "10.0", r.stdout
    assert "write interrupted" in r.stdout and "read interrupted" in r.stdout
    assert not os.path.exists(tmp_path / "cut" / "ckpt.index")

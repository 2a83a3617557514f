"""Ctrl-C during a long `unbound.split` or `unbound.merge`: KeyboardInterrupt at once, and neither the output
directory nor any `.unbound-tmp-` temporary left behind.

The model is conftest's `big_model` (`make_graph_model`, about 260 MB of small nodes), which takes
seconds to merge, and to split with Brotli (with zstd, the default, a split of it ended within
the second the test used to wait before interrupting, once splitting got faster in issue 15)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

def _sigint_as_python_sets_it() -> None:
    """Run in the child before it starts: SIGINT back to its default, so that the child's
    Python installs its KeyboardInterrupt handler even when this process was started with
    SIGINT ignored (a shell's background job, `nohup`), which the child would inherit."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


CALLS = {
    "split": ("model_pb", "unbound.split({src!r}, {out!r}, max_size=1 << 20, compression='brotli')"),
    "merge": ("model_cpb", "unbound.merge({src!r}, {out!r})"),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_ctrl_c_stops_the_call_and_leaves_nothing(tmp_path, big_model, call):
    model, template = CALLS[call]
    src = big_model / model
    out = tmp_path / "out"
    code = textwrap.dedent(f"""
        import sys, unbound
        print("start", flush=True)
        try:
            {template.format(src=str(src), out=str(out))}
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(42)
        print("finished", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_sigint_as_python_sets_it)
    assert proc.stdout.readline() == "start\n"
    # The call starts right after "start": half a second in, it is well under way.
    time.sleep(0.5)
    assert proc.poll() is None, f"{call} ended before the interrupt: the test model is too small"
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    elapsed = time.monotonic() - sent
    assert proc.returncode == 42, (stdout, stderr)
    assert stdout == "interrupted\n"
    assert elapsed < 2.0, f"KeyboardInterrupt came {elapsed:.2f} s after SIGINT"
    assert not out.exists()
    leftovers = [p.name for p in tmp_path.iterdir()] + [p.name for p in src.iterdir()]
    assert not [name for name in leftovers if ".unbound-tmp-" in name], leftovers
    assert not [p for p in tmp_path.rglob("*") if ".unbound-tmp-" in p.name]

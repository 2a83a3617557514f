"""Ctrl-C during the Rust calls under `unbound.tensorflow` (the `SavedModelSplitter.write` of
a parsed SavedModel, and the merge behind `read_saved_model`): KeyboardInterrupt at once, and
no `.cpb` or `.unbound-tmp-` temporary left behind.

The model is conftest's `big_model` (1.5M nodes). The write gets its parts already serialized,
so the interrupt lands inside the Rust call (seconds long) rather than in the Python before it,
which Python interrupts by itself."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytest.importorskip("tensorflow")

def _sigint_as_python_sets_it() -> None:
    """Run in the child before it starts: SIGINT back to its default, so that the child's
    Python installs its KeyboardInterrupt handler even when this process was started with
    SIGINT ignored (a shell's background job, `nohup`), which the child would inherit."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


PRELUDE = """
    import sys
    from pathlib import Path
    from tensorflow.core.protobuf import saved_model_pb2
    from unbound import _unbound
    from unbound._parts import PART_LIMIT, message_parts
    import unbound.tensorflow as ut
"""

CALLS = {
    # `SavedModelSplitter.write` without its Python part (the parse and `message_parts`).
    # The graph is doubled (its nodes and functions twice over): the split of the model as it
    # is became fast enough (under a second) to end before the interrupt.
    "write": """
        data = Path({src!r}, "model_pb", "saved_model.pb").read_bytes()
        message = saved_model_pb2.SavedModel()
        message.ParseFromString(data)
        again = saved_model_pb2.SavedModel()
        again.ParseFromString(data)
        message.meta_graphs[0].graph_def.MergeFrom(again.meta_graphs[0].graph_def)
        del again, data
        parts = message_parts(message, PART_LIMIT)
        print("start", flush=True)
        _unbound._tf_write(parts, {prefix!r}, 1 << 20, "zstd")
    """,
    # `read_saved_model` whole: the merge in Rust is short (under a second), Python's parse of
    # the steps long.
    "read": """
        print("start", flush=True)
        ut.read_saved_model(Path({src!r}, "model_cpb"))
    """,
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_ctrl_c_stops_the_rust_call_and_leaves_nothing(tmp_path, big_model, call):
    prefix = tmp_path / "out" / "saved_model"
    prefix.parent.mkdir()
    body = textwrap.dedent(CALLS[call]).format(src=str(big_model), prefix=str(prefix))
    code = textwrap.dedent(PRELUDE) + textwrap.dedent(f"""
try:
{textwrap.indent(body, "    ")}
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(42)
print("finished", flush=True)
""")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_sigint_as_python_sets_it)
    assert proc.stdout.readline() == "start\n", proc.communicate()
    # Long enough for the Rust call to have begun ("start" is printed just before it).
    time.sleep(0.3)
    assert proc.poll() is None, f"{call} ended before the interrupt: the test model is too small"
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    line = proc.stdout.readline()
    # Until the exception is caught, not until the process ends: TensorFlow's exit is slow.
    elapsed = time.monotonic() - sent
    rest, stderr = proc.communicate(timeout=60)
    assert (line, rest, proc.returncode) == ("interrupted\n", "", 42), stderr
    assert elapsed < 2.0, f"KeyboardInterrupt came {elapsed:.2f} s after SIGINT"
    assert not list(prefix.parent.iterdir()), "something was written"
    assert not [p for p in big_model.rglob("*") if ".unbound-tmp-" in p.name]

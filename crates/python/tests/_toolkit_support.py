"""Shared by the toolkit and splitter tests: where the repository, its bundled models, the
release CLI and TensorFlow's Merger harness are."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, List

import pytest

ROOT = Path(__file__).resolve().parents[3]
MODELS = ROOT / "testdata" / "models"
SAVED_MODELS = ["tf1_large_consts", "tf2_multi_sig"]


def cli_path() -> Path:
    """The release `unbound` binary (``UNBOUND_CLI`` overrides); the tests compare with it."""
    path = Path(os.environ.get("UNBOUND_CLI", ROOT / "target" / "release" / "unbound"))
    if not path.exists():
        pytest.fail(f"{path} is missing: run `cargo build --release -p unbound-cli` first")
    return path


def cli(*args: Any, check: bool = True) -> subprocess.CompletedProcess:
    """Runs the CLI; its stdout, stderr and exit code."""
    result = subprocess.run([str(cli_path()), *map(str, args)], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"unbound {args}: exit {result.returncode}: {result.stderr}")
    return result


def cli_json(*args: Any) -> Any:
    """The CLI's ``--json`` output, parsed."""
    return json.loads(cli(*args, "--json").stdout)


def harness() -> Path:
    """TensorFlow's C++ Merger as a command (interop/build_harness.sh; ``UNBOUND_HARNESS``
    overrides)."""
    if "UNBOUND_HARNESS" in os.environ:
        return Path(os.environ["UNBOUND_HARNESS"])
    out = subprocess.run(
        ["bash", str(ROOT / "interop" / "build_harness.sh")], capture_output=True, text=True, check=True
    )
    return Path(out.stdout.strip().splitlines()[-1])


def tf_read(type_name: str, prefix: Path, out: Path, descriptor_set: Path = None) -> bytes:
    """What TensorFlow's ``Merger::Read(prefix)`` makes of ``prefix.cpb`` / ``prefix.pb``,
    serialized by TensorFlow."""
    args: List[str] = [str(harness()), "read", "--type", type_name]
    if descriptor_set is not None:
        args += ["--descriptor-set", str(descriptor_set)]
    result = subprocess.run([*args, str(prefix), str(out)], capture_output=True, text=True)
    assert result.returncode == 0, f"TensorFlow's Merger refused {prefix}: {result.stderr}"
    return out.read_bytes()

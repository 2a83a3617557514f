"""Fixtures shared by several test modules."""

from __future__ import annotations

import subprocess

import pytest

from _toolkit_support import ROOT


@pytest.fixture(scope="session")
def big_model(tmp_path_factory):
    """A graph-heavy SavedModel of `make_graph_model` (crates/savedmodel/examples): 1.5M small
    nodes and 2,000 functions, about 260 MB, as `model_pb/saved_model.pb` and
    `model_cpb/saved_model.cpb`. Splitting, merging or parsing it takes seconds, long enough
    to interrupt."""
    subprocess.run(
        ["cargo", "build", "--quiet", "--release", "-p", "unbound-savedmodel", "--example", "make_graph_model"],
        cwd=ROOT,
        check=True,
    )
    out = tmp_path_factory.mktemp("graph")
    subprocess.run(
        [str(ROOT / "target" / "release" / "examples" / "make_graph_model"), str(out),
         "--nodes", "1500000", "--functions", "2000"],
        check=True,
        capture_output=True,
    )
    yield out
    subprocess.run(["rm", "-rf", str(out)], check=False)

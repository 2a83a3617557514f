#!/usr/bin/env bash
# unbound.tensorflow past 2 GiB (issue 14, "Past 2 GiB"): a TensorFlow-made SavedModel message
# extended in Python to 2.7 GB of functions is written by SavedModelSplitter without one whole
# serialization, read by TensorFlow's C++ Merger, read back equal by read_saved_model, and
# loaded by tf.saved_model.load through enable_image_format (python_huge.py). Needs the
# `unbound` wheel importable (scripts/python_check.sh runs this after pytest, with
# PYTHONPATH set), about 12 GB of memory and 3 GB of /tmp. UNBOUND_SKIP_HUGE=1 skips it.
#
# usage: interop/python_huge.sh
set -euo pipefail
if [[ "${UNBOUND_SKIP_HUGE:-0}" == 1 ]]; then
  echo "python_huge.sh: skipped (UNBOUND_SKIP_HUGE=1)"
  exit 0
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$("$root/scripts/tf-venv.sh" | tail -n 1)"
py="$venv/bin/python"
export TF_CPP_MIN_LOG_LEVEL=2
harness="$("$root/interop/build_harness.sh" | tail -n 1)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Random constants make a 2.7 GB .cpb. A CI machine's disk can be smaller: then the constants
# are one repeated byte (the same message sizes, past 2 GiB, and the same checks; a .cpb of a
# few megabytes), saying so. UNBOUND_HUGE_REQUIRE_DISK=1 makes the shortage a failure instead.
free_kb="$(df -Pk "$work" | awk 'NR==2 {print $4}')"
need_kb=$(( 3300 * 1024 ))
export PYTHON_HUGE_CONTENT=random
if (( free_kb < need_kb )); then
  msg="only $((free_kb / 1024)) MiB free in $work, the random 2.7 GB .cpb needs $((need_kb / 1024)) MiB"
  if [[ "${UNBOUND_HUGE_REQUIRE_DISK:-0}" == 1 ]]; then
    echo "python_huge.sh: FAIL: $msg" >&2
    exit 1
  fi
  echo "python_huge.sh: $msg; its constants are one repeated byte instead" >&2
  PYTHON_HUGE_CONTENT=repeated
fi
"$py" "$root/interop/python_huge.py" build "$work" "$harness"
"$py" "$root/interop/python_huge.py" load "$work"
echo "python_huge.sh: passed"

#!/usr/bin/env bash
# `unbound plan` against TensorFlow 2.21's DTensor on 8 logical CPU devices: record.py saves
# ~90 small programs as SavedModels (every op family plan has a rule for, meshes 2x4 and 8,
# inputs sharded on each axis, mismatched operand layouts, contracting and reduced axes
# sharded, programs DTensor refuses) and records the layout DTensor gives each output
# (dtensor.fetch_layout) or its refusal; check.py plans each model and compares: equal
# layouts, a refusal (exit 1 naming the op) wherever DTensor refused, and as many collective
# calls as DTensor's expanded program holds (TensorFlow's graph dumps, TF_DUMP_GRAPH_PREFIX:
# the Collective*V2 ops of device CPU:0; see BENCHMARKS.md, issue 31).
#
# usage: interop/plan/check.sh     (prints "plan check: N passed, M failed"; recording takes
#        about a minute on 2 busy cores, planning the 90 models a few seconds)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
py="$venv/bin/python"
export TF_CPP_MIN_LOG_LEVEL=3
cargo build --quiet --release -p unbound-cli
unbound="${CARGO_TARGET_DIR:-$root/target}/release/unbound"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== recording DTensor's layouts"
"$py" interop/plan/record.py "$work/suite" >"$work/record.log" 2>&1 || {
  tail -20 "$work/record.log"
  exit 1
}
echo "== unbound plan against DTensor"
python3 interop/plan/check.py --unbound "$unbound" "$work/suite"

#!/usr/bin/env bash
# `unbound plan` against TensorFlow 2.21's DTensor on 8 logical CPU devices: record.py saves
# ~90 small programs as SavedModels (every op family plan has a rule for, meshes 2x4 and 8,
# inputs sharded on each axis, mismatched operand layouts, contracting and reduced axes
# sharded, programs DTensor refuses) and records the layout DTensor gives each output
# (dtensor.fetch_layout) or its refusal; check.py plans each model and compares: equal
# layouts, and a refusal (exit 1 naming the op) wherever DTensor refused.
#
# Collectives are not compared here: TensorFlow exposes no post-expansion program for them
# through its Python API (see BENCHMARKS.md).
#
# usage: interop/plan/check.sh     (prints "plan check: N passed, M failed"; about 30 s)
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

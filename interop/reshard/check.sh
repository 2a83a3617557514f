#!/usr/bin/env bash
# Sharded checkpoints against TensorFlow 2.21 DTensor on 8 logical CPU devices (check.py):
# checkpoints TensorFlow writes (meshes 2x4, 2x2x2 and x8, partial writers, replicated-only,
# a plain checkpoint; .write and .save; float32/float16/bfloat16/bool/int64/string) are read by
# `unbound vars` (every variable, random boxes against RestoreV2), resharded by
# `unbound reshard` to other layouts and meshes, and restored by TensorFlow into DVariables of
# the target layouts; safetensors output per device (read by a small independent reader) and
# back; checkpoints unbound writes from scratch (every dtype, random layouts) restored by
# TensorFlow.
#
# usage: interop/reshard/check.sh     (prints "reshard check: N passed, M failed")
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
export TF_CPP_MIN_LOG_LEVEL=3
cargo build --quiet --release -p unbound-cli
cargo build --quiet --release -p unbound-reshard --example make_random_checkpoint
unbound="${CARGO_TARGET_DIR:-$root/target}/release/unbound"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "== sharded checkpoints and unbound reshard"
maker="${CARGO_TARGET_DIR:-$root/target}/release/examples/make_random_checkpoint"
"$venv/bin/python" interop/reshard/check.py "$unbound" "$work" "$maker" 2>"$work/py.err" | tee "$work/out" | grep -v '^ok ' || true
grep -q '^reshard check: .* 0 failed$' "$work/out" || { tail -n 30 "$work/py.err" >&2; exit 1; }

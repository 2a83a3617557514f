#!/usr/bin/env bash
# Hostile inputs against TensorFlow 2.21 (interop/hostile_check.py): SavedModels TensorFlow
# writes now pass `unbound verify` (no false alarms from the fingerprint, shard and index
# checks), and on mutated model files unbound is never looser than TensorFlow's C++ Merger:
# what `verify` accepts TensorFlow reads into the message `merge` writes, and what `split`
# accepts TensorFlow reads back unchanged.
#
# usage: interop/hostile_check.sh [MUTANTS]    (prints "hostile check: N passed, M failed")
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
py="$venv/bin/python"
export TF_CPP_MIN_LOG_LEVEL=2
harness="$(interop/build_harness.sh | tail -n 1)"
cargo build --quiet --release -p unbound-cli
cargo build --quiet -p unbound-chunked --example lie_metadata
target="${CARGO_TARGET_DIR:-$root/target}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "== hostile inputs against TensorFlow's readers"
"$py" interop/hostile_check.py "$target/release/unbound" "$harness" "$target/debug/examples/lie_metadata" "$work" "${1:-60}"

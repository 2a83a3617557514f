#!/usr/bin/env bash
# `unbound scan` against TensorFlow 2.21's `saved_model_cli scan` (check.py).
#
# usage: interop/scan/check.sh     (prints "scan check: N passed, M failed")
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
export TF_CPP_MIN_LOG_LEVEL=3
cargo build --quiet --release -p unbound-cli
unbound="${CARGO_TARGET_DIR:-$root/target}/release/unbound"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "== unbound scan vs saved_model_cli scan"
"$venv/bin/python" interop/scan/check.py "$unbound" "$work" 2>"$work/py.err" | tee "$work/out" | grep -v '^ok ' || true
grep -q '^scan check: .* 0 failed$' "$work/out" || { tail -n 30 "$work/py.err" >&2; exit 1; }

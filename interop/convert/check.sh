#!/usr/bin/env bash
# `unbound convert` against TensorFlow 2.21 and the `safetensors` package (check.py):
# TensorFlow-made checkpoints (every safetensors dtype, partitioned variables, a Keras model's
# SavedModel) to Hugging Face's layout and back, PyTorch DCP's Hugging Face writer layout
# assembled, strings refused.
#
# usage: interop/convert/check.sh     (prints "convert check: N passed, M failed")
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
export TF_CPP_MIN_LOG_LEVEL=3
cargo build --quiet --release -p unbound-cli
unbound="${CARGO_TARGET_DIR:-$root/target}/release/unbound"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "== unbound convert: TensorFlow checkpoints <-> safetensors"
# The safetensors package beside the venv, not in it (the venv is shared).
site="${UNBOUND_ST_SITE:-$HOME/.cache/unbound/safetensors-site}"
if ! PYTHONPATH="$site" "$venv/bin/python" -c 'import safetensors' 2>/dev/null; then
  "$venv/bin/python" -m pip install --disable-pip-version-check --quiet --target "$site" "safetensors>=0.4"
fi
PYTHONPATH="$site" "$venv/bin/python" interop/convert/check.py "$unbound" "$work" 2>"$work/py.err" | tee "$work/out" | grep -v '^ok ' || true
grep -q '^convert check: .* 0 failed$' "$work/out" || { tail -n 30 "$work/py.err" >&2; exit 1; }

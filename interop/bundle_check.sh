#!/usr/bin/env bash
# Tensor bundles against TensorFlow 2.21 (see bundle_check.py): `unbound vars --npy` equals
# TensorFlow's checkpoint reader on TensorFlow-made bundles, and TensorFlow reads a bundle
# written by unbound's BundleWriter (every dtype, strings, two shards, slices).
#
# usage: interop/bundle_check.sh     (needs scripts/tf-venv.sh's TensorFlow; builds what it needs)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
export TF_CPP_MIN_LOG_LEVEL=3
target="${CARGO_TARGET_DIR:-$root/target}"
cargo build --quiet --release -p unbound-cli
cargo build --quiet --release -p unbound-bundle --example write_test_bundle
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "== tensor bundles"
"$target/release/examples/write_test_bundle" "$work/ours/variables" "$work/manifest.json"
"$venv/bin/python" interop/bundle_check.py "$target/release/unbound" "$work" \
  "$work/ours/variables" "$work/manifest.json" 2>"$work/py.err" | tee "$work/out" | grep -v '^ok ' || true
grep -q '^bundle check: .* 0 failed$' "$work/out" || { tail -n 20 "$work/py.err" >&2; exit 1; }

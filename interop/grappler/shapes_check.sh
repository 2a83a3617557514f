#!/usr/bin/env bash
# Static shape inference (what TF_InferStatically answers plugins), unbound against TensorFlow
# 2.21's GraphProperties on one graph of the common inference ops: see shapes_check.py.
# Prints FAIL/KNOWN lines and a summary; exit 1 on any failure.
#
# usage: interop/grappler/shapes_check.sh     (needs scripts/tf-venv.sh's TensorFlow)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
export TF_CPP_MIN_LOG_LEVEL=2
cargo build --quiet --release -p unbound-graph --example infer_shapes
source interop/grappler/quiet.sh
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "== static shape inference: TensorFlow's GraphProperties vs unbound"
"$venv/bin/python" interop/grappler/shapes_check.py \
  "${CARGO_TARGET_DIR:-$root/target}/release/examples/infer_shapes" "$work" 2> >(quiet)

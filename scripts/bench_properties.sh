#!/usr/bin/env bash
# Static shape inference on a 120,000-node graph, unbound against TensorFlow 2.21's
# GraphProperties (see bench_properties.py).
#
# usage: scripts/bench_properties.sh [BLOCKS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
export TF_CPP_MIN_LOG_LEVEL=2
cargo build --quiet --release -p unbound-graph --example infer_shapes
source interop/grappler/quiet.sh
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$venv/bin/python" scripts/bench_properties.py \
  "${CARGO_TARGET_DIR:-$root/target}/release/examples/infer_shapes" "$work" "$@" 2> >(quiet)

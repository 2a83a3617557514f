#!/usr/bin/env bash
# DTensor unpack / pack / relayout of a float32 array (default 1 GiB) on an 8-device mesh:
# unbound (Rust, against one memcpy of the same size in the same run), NumPy splitting, and
# TensorFlow's dtensor.unpack(relayout(...)) on 8 logical CPU devices.
#
# usage: scripts/bench_dtensor.sh [MiB]     (TensorFlow from scripts/tf-venv.sh)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mib="${1:-1024}"
echo "== unbound (cargo run --release -p unbound-dtensor --example bench_dtensor -- $mib)"
cargo run --quiet --release -p unbound-dtensor --example bench_dtensor -- "$mib"
venv="$(scripts/tf-venv.sh | tail -n 1)"
echo "== numpy and TensorFlow (scripts/bench_dtensor.py $mib)"
"$venv/bin/python" scripts/bench_dtensor.py "$mib" 2> >(grep -v -e "port.cc" -e "absl::InitializeLog" >&2)

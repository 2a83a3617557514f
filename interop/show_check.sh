#!/usr/bin/env bash
# `unbound show` against TensorFlow 2.21: for the TensorFlow-made models and for `unbound split`
# copies of them (.cpb), the signatures, dtypes, shapes, tensor names, ops, functions,
# variables and checkpoint keys `unbound show --json` reports equal TensorFlow's (its loader,
# tf.saved_model.load, its checkpoint reader), and the listing equals saved_model_cli's.
# Prints `show check: N passed, M failed`; exit 1 on any failure.
#
# usage: interop/show_check.sh     (needs scripts/tf-venv.sh's TensorFlow; builds unbound)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
cargo build --quiet --release -p unbound-cli
unbound="${CARGO_TARGET_DIR:-$root/target}/release/unbound"
echo "== show vs TensorFlow"
TF_CPP_MIN_LOG_LEVEL=3 "$venv/bin/python" interop/show_check.py "$unbound" \
  testdata/models/tf2_multi_sig testdata/models/tf1_large_consts \
  2> >(grep -v -e 'oneDNN custom operations' -e 'absl::InitializeLog' >&2)

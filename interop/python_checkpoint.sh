#!/usr/bin/env bash
# The Python package's checkpoints and DTensor against TensorFlow 2.21 (pytest files
# crates/python/tests/test_checkpoint_*.py and test_dtensor_*.py, in the TensorFlow venv):
# `unbound.Checkpoint(prefix)[key]` equals `tf.train.load_checkpoint(prefix).get_tensor(key)`
# for checkpoints TensorFlow writes (every dtype, scalars, empty and partitioned tensors), a
# flipped data byte is an error for both; what `unbound.CheckpointWriter` writes TensorFlow
# reads back equal, its index and data byte for byte what SaveV2 writes; `unbound.Mesh` /
# `Layout` print TensorFlow's strings and `unbound.pack` / `relayout` give the components
# DTensor gives on 8 logical CPU devices; `unbound.reshard` output loads in TensorFlow.
#
# usage: interop/python_checkpoint.sh   (UNBOUND_PY_SITE=DIR: use the wheel installed there
#        by scripts/python_check.sh instead of building one)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
py="$venv/bin/python"
site="${UNBOUND_PY_SITE:-}"
if [[ -z "$site" || ! -d "$site/unbound" ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  "$py" -m pip install --disable-pip-version-check --quiet "maturin>=1.9,<2" pytest ml_dtypes
  "$venv/bin/maturin" build --quiet --release -m crates/python/Cargo.toml -i "$py" -o "$work/wheels"
  site="$work/site"
  "$py" -m pip install --disable-pip-version-check --quiet --no-deps --target "$site" "$work"/wheels/unbound-*.whl
fi
echo "== Python checkpoints and DTensor vs TensorFlow (pytest)"
cd crates/python
PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" TF_CPP_MIN_LOG_LEVEL=3 \
  "$py" -m pytest -q -p no:cacheprovider tests/test_checkpoint_read.py tests/test_checkpoint_write.py tests/test_dtensor_tf.py

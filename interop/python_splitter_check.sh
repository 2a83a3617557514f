#!/usr/bin/env bash
# The Python package's chunked-format claims against TensorFlow 2.21's own C++ Merger
# (interop/merger_harness): every .cpb `unbound.Splitter(...).write()` makes (TensorFlow's
# GraphDef and SavedModel messages, a type with no splitter of its own, the proto splitter
# guide's ModelConfig given by its schema, subclasses with insertions and no initial chunk) is
# read by TensorFlow into the message split; `unbound.Merger.read` and `unbound.read_message`
# of .cpb files equal what TensorFlow reads; the one layout TensorFlow's Merger aborts on (a
# bytes chunk at a map value, the guide's own example) is shown to abort there; a .cpb past
# 2 GiB - 1 is refused by read_message with TooLargeError (Python's protobuf cannot parse it).
#
# usage: interop/python_splitter_check.sh   (builds the wheel into a temporary directory)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
py="$venv/bin/python"
echo "== Python Splitter / Merger -> TensorFlow Merger"
"$py" -m pip install --disable-pip-version-check --quiet "maturin>=1.9,<2" pytest
site="$(mktemp -d)"
trap 'rm -rf "$site"' EXIT
"$venv/bin/maturin" build --quiet --release -m crates/python/Cargo.toml -i "$py" -o "$site/wheels" 2>/dev/null
"$py" -m pip install --disable-pip-version-check --quiet --no-deps --target "$site/lib" "$site"/wheels/unbound-*.whl
cargo build --quiet --release -p unbound-cli
UNBOUND_HARNESS="$(interop/build_harness.sh | tail -n 1)"
# A .cpb past 2 GiB (2.1 GiB, about 15 s) is refused with TooLargeError, unless UNBOUND_SKIP_HUGE=1.
UNBOUND_HUGE=1
[[ "${UNBOUND_SKIP_HUGE:-0}" == 1 ]] && UNBOUND_HUGE=0
export UNBOUND_HARNESS UNBOUND_HUGE TF_CPP_MIN_LOG_LEVEL=2
cd crates/python
PYTHONPATH="$site/lib" "$py" -m pytest -q -p no:cacheprovider \
  tests/test_splitter_tensorflow.py tests/test_splitter_custom.py tests/test_splitter_examples.py \
  tests/test_toolkit_read_message.py

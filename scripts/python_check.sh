#!/usr/bin/env bash
# The Python package: builds the `unbound` wheel with maturin, installs it into the cached
# TensorFlow 2.21 virtual environment (scripts/tf-venv.sh), runs its pytest suite there, then
# checks the README's install line in a fresh virtual environment with no TensorFlow.
#
# usage: scripts/python_check.sh   (UNBOUND_SKIP_FRESH_VENV=1 skips the fresh-venv check;
#        UNBOUND_PY_SITE=DIR installs the wheel into DIR instead of the venv)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
py="$venv/bin/python"
"$py" -m pip install --disable-pip-version-check --quiet "maturin>=1.9,<2" pytest ml_dtypes
cargo build --quiet --release -p unbound-cli  # test_tensorflow_* compare with `unbound split`
rm -rf target/wheels
"$venv/bin/maturin" build --quiet --release -m crates/python/Cargo.toml -i "$py" -o target/wheels
wheel="$(ls target/wheels/unbound-*.whl)"
if [[ -n "${UNBOUND_PY_SITE:-}" ]]; then
  # A private install (for parallel work trees sharing the cached venv): the wheel goes to
  # UNBOUND_PY_SITE, which leads PYTHONPATH for the tests and every Python they start.
  rm -rf "$UNBOUND_PY_SITE"
  "$py" -m pip install --disable-pip-version-check --quiet --no-deps --target "$UNBOUND_PY_SITE" "$wheel"
  export PYTHONPATH="$UNBOUND_PY_SITE${PYTHONPATH:+:$PYTHONPATH}"
else
  "$py" -m pip install --disable-pip-version-check --quiet --force-reinstall --no-deps "$wheel"
fi
# TensorFlow's C++ Merger for the tests that read with it; UNBOUND_HUGE=1 runs the test that
# builds a 2.1 GiB model (skipped with UNBOUND_SKIP_HUGE=1, as python_huge.sh is).
UNBOUND_HARNESS="$(interop/build_harness.sh | tail -n 1)"
UNBOUND_HUGE=1
[[ "${UNBOUND_SKIP_HUGE:-0}" == 1 ]] && UNBOUND_HUGE=0
export UNBOUND_HARNESS UNBOUND_HUGE
echo "== pytest (crates/python/tests, in $venv)"
(cd crates/python && TF_CPP_MIN_LOG_LEVEL=2 "$py" -m pytest -q -p no:cacheprovider tests)
echo "== unbound.tensorflow past 2 GiB (interop/python_huge.sh; UNBOUND_SKIP_HUGE=1 skips it)"
interop/python_huge.sh

if [[ "${UNBOUND_SKIP_FRESH_VENV:-0}" != 1 ]]; then
  echo "== the README's install line in a fresh virtual environment (no TensorFlow)"
  fresh="$(mktemp -d)"
  trap 'rm -rf "$fresh"' EXIT
  python3 -m venv "$fresh/venv"
  "$fresh/venv/bin/pip" install --disable-pip-version-check --quiet ./crates/python
  "$fresh/venv/bin/python" -c "import unbound, sys; print('unbound', unbound.__version__); sys.exit('tensorflow' in sys.modules)"
fi

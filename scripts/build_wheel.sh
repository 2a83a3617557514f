#!/usr/bin/env bash
# The release build of the Python package: a manylinux_2_17 wheel (as portable as
# TensorFlow's own manylinux_2_27 wheel, and more), linked against an old glibc by zig
# (`maturin build --zig`), stripped, and the sdist beside it; then the wheel is checked to be
# manylinux-tagged, to need no glibc symbol newer than 2.17, and to install into a fresh
# virtual environment without TensorFlow and import there.
#
# usage: scripts/build_wheel.sh [OUT_DIR]     (default target/wheels-release; prints the wheel)
#   build tools (maturin, ziglang from PyPI) go to ${UNBOUND_WHEEL_VENV:-$HOME/.cache/unbound/wheel-build}
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${1:-${CARGO_TARGET_DIR:-$root/target}/wheels-release}"
tools="${UNBOUND_WHEEL_VENV:-$HOME/.cache/unbound/wheel-build}"
if [[ ! -x "$tools/bin/maturin" ]] || ! "$tools/bin/python" -c 'import ziglang' 2>/dev/null; then
  python3 -m venv "$tools"
  "$tools/bin/pip" install --disable-pip-version-check --quiet "maturin>=1.9,<2" ziglang
fi
rm -rf "$out"
mkdir -p "$out"
# The abi3 wheel needs no particular interpreter; zig provides the old glibc to link against.
PATH="$tools/bin:$PATH" "$tools/bin/maturin" build --quiet --release --strip --zig \
  --compatibility manylinux_2_17 -m crates/python/Cargo.toml -i "$tools/bin/python" -o "$out"
"$tools/bin/maturin" sdist -m crates/python/Cargo.toml -o "$out" >&2
wheel="$(ls "$out"/unbound-*.whl)"
ls "$out"/unbound-*.tar.gz >/dev/null
case "$(basename "$wheel")" in
  *manylinux_2_17_x86_64.whl | *manylinux_2_17_aarch64.whl) ;;
  *) echo "FAIL: $wheel is not tagged manylinux_2_17" >&2; exit 1 ;;
esac
# No versioned glibc symbol newer than 2.17 in the extension.
ext="$(mktemp -d)"
trap 'rm -rf "$ext"' EXIT
"$tools/bin/python" -m zipfile -e "$wheel" "$ext/w"
so="$(find "$ext/w" -name '_unbound*.so' | head -n 1)"
newest="$( (objdump -T "$so" 2>/dev/null || true) | grep -o 'GLIBC_[0-9.]*' | sort -t. -k2,2n -u | tail -n 1)"
echo "newest glibc symbol: ${newest:-none}" >&2
case "$newest" in
  "" | GLIBC_2.[0-9] | GLIBC_2.1[0-7] | GLIBC_2.[0-9].* | GLIBC_2.1[0-7].*) ;;
  *) echo "FAIL: $so needs $newest" >&2; exit 1 ;;
esac
if file "$so" | grep -q 'not stripped'; then
  echo "FAIL: $so is not stripped" >&2; exit 1
fi
# A fresh virtual environment without TensorFlow: install and import.
python3 -m venv "$ext/venv"
"$ext/venv/bin/pip" install --disable-pip-version-check --quiet "$wheel"
"$ext/venv/bin/python" -c "import unbound, sys; print('unbound', unbound.__version__, file=sys.stderr); sys.exit('tensorflow' in sys.modules)"
# ... and reads a TensorFlow-made checkpoint there.
"$ext/venv/bin/python" - "$root/testdata/models/tf1_large_consts/variables/variables" <<'PY'
import sys
import unbound
w = unbound.Checkpoint(sys.argv[1]).read("dense/kernel")
assert w.shape == (16, 16) and str(w.dtype) == "float32", (w.shape, w.dtype)
PY
ls -la "$wheel" >&2
echo "$wheel"

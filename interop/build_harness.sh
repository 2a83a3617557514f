#!/usr/bin/env bash
# Builds interop/merger_harness.cc against the tensorflow-cpu 2.21.0 wheel:
# headers from site-packages/tensorflow/include, linked against
# site-packages/tensorflow/libtensorflow_framework.so.2 (rpath set to it, so
# the binary runs without LD_LIBRARY_PATH).
#
# usage: interop/build_harness.sh [--force] [OUT]
#   OUT defaults to target/interop/merger_harness (relative to the repo root).
#   The TensorFlow venv is ${UNBOUND_TF_VENV:-$HOME/.cache/unbound/tf-2.21.0};
#   it is created with scripts/tf-venv.sh when missing. TF_DIR may point
#   directly at an installed .../site-packages/tensorflow instead.
#   CXX overrides the compiler (default g++). Skips the build when OUT is newer
#   than its inputs, unless --force. Prints the binary's path on stdout.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"

force=0
out=""
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "build_harness.sh: unknown option $arg" >&2; exit 2 ;;
    *) [[ -z "$out" ]] || { echo "build_harness.sh: one OUT only" >&2; exit 2; }; out="$arg" ;;
  esac
done
out="${out:-$root/target/interop/merger_harness}"

if [[ -z "${TF_DIR:-}" ]]; then
  venv="${UNBOUND_TF_VENV:-$HOME/.cache/unbound/tf-2.21.0}"
  if [[ ! -x "$venv/bin/python" ]]; then
    echo "build_harness.sh: no TensorFlow venv at $venv; creating it" >&2
    venv="$("$root/scripts/tf-venv.sh" | tail -n 1)"
  fi
  shopt -s nullglob
  candidates=("$venv"/lib/python3*/site-packages/tensorflow)
  shopt -u nullglob
  if (( ${#candidates[@]} > 0 )); then
    TF_DIR="${candidates[0]}"
  else
    TF_DIR="$("$venv/bin/python" -c 'import os, tensorflow; print(os.path.dirname(tensorflow.__file__))' 2>/dev/null | tail -n 1)"
  fi
fi

lib="$TF_DIR/libtensorflow_framework.so.2"
inc="$TF_DIR/include"
[[ -f "$lib" ]] || { echo "build_harness.sh: $lib not found" >&2; exit 1; }
[[ -f "$inc/tensorflow/tools/proto_splitter/merge.h" ]] || {
  echo "build_harness.sh: $inc lacks tensorflow/tools/proto_splitter/merge.h" >&2; exit 1; }

src="$here/merger_harness.cc"
if (( force == 0 )) && [[ -x "$out" && "$out" -nt "$src" && "$out" -nt "$0" && "$out" -nt "$lib" ]]; then
  echo "$out"
  exit 0
fi

mkdir -p "$(dirname "$out")"
# Flags match tf.sysconfig.get_compile_flags() / get_link_flags() of the
# wheel: the libraries are built with the C++11 std::string ABI
# (_GLIBCXX_USE_CXX11_ABI=1, symbols carry [abi:cxx11]) and C++17;
# EIGEN_MAX_ALIGN_BYTES=64 keeps Eigen-dependent layouts identical.
# -isystem silences warnings from TensorFlow/protobuf/absl headers.
"${CXX:-g++}" -std=c++17 -O2 -D_GLIBCXX_USE_CXX11_ABI=1 -DEIGEN_MAX_ALIGN_BYTES=64 \
  -Wall -Wextra -Wno-unused-parameter \
  -isystem "$inc" \
  "$src" -o "$out.tmp.$$" \
  -L"$TF_DIR" -l:libtensorflow_framework.so.2 -Wl,-rpath,"$TF_DIR"
mv -f "$out.tmp.$$" "$out"
echo "$out"

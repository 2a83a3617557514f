#!/usr/bin/env bash
# Past 2 GiB (issue 33): a TensorFlow-made model inflated to 2.16 GB of constants (in functions
# its signature calls) is an image-format model (`saved_model.cpb`) no stock TensorFlow loader
# reads; `unbound externalize` makes it a saved_model.pb of kilobytes beside a 2.16 GB
# checkpoint, which TensorFlow's C++ LoadSavedModel serves (serve_harness) with outputs equal,
# bit for bit, to the values the constants hold (huge.py expect) and to the original's loaded
# through unbound.tensorflow (when the `unbound` package is importable and
# UNBOUND_EXTERNALIZE_SKIP_UNBOUND_TF is not 1: that load needs ~12 GB and minutes). Prints the time and
# peak memory of the externalize and of a `cp` of the variables it wrote.
#
# Needs ~6 GB free in ${TMPDIR:-/tmp} and ~8 GB of available memory (14 GB with the
# unbound.tensorflow comparison); with less, or with
# UNBOUND_SKIP_HUGE=1, it is skipped, saying so.
#
# usage: interop/externalize/huge.sh
set -euo pipefail
if [[ "${UNBOUND_SKIP_HUGE:-0}" == 1 ]]; then
  echo "externalize huge.sh: skipped (UNBOUND_SKIP_HUGE=1)"; exit 0
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
elements=90000000    # 360 MB per constant, six constants: 2.16 GB
need_kb=$((6 * 1024 * 1024))
tmp_parent="${TMPDIR:-/tmp}"
free_kb="$(df -Pk "$tmp_parent" | awk 'NR==2 {print $4}')"
if (( free_kb < need_kb )); then
  echo "externalize huge.sh: skipped: $((free_kb / 1024)) MiB free in $tmp_parent, $((need_kb / 1024)) MiB needed"
  exit 0
fi
avail_kb="$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo 2>/dev/null || echo 0)"
if (( avail_kb > 0 && avail_kb < 8000000 )); then
  echo "externalize huge.sh: skipped: $((avail_kb / 1024)) MiB of memory available, 8 GB needed"
  exit 0
fi
venv="$(scripts/tf-venv.sh | tail -n 1)"
py="$venv/bin/python"
export TF_CPP_MIN_LOG_LEVEL=2 TF_ENABLE_ONEDNN_OPTS=0
target="${CARGO_TARGET_DIR:-$root/target}"
cargo build --quiet --release -p unbound-cli
cargo build --quiet --release -p unbound-externalize --example inflate_consts
unbound="$target/release/unbound"
serve="$target/interop/serve_harness"
[[ -x "$serve" ]] || { echo "FAIL: $serve missing (interop/externalize/check.sh builds it)"; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$py" interop/externalize/huge.py make "$work/small" >/dev/null 2>&1
"$target/release/examples/inflate_consts" "$work/small" "$work/huge" "$elements"
[[ -f "$work/huge/saved_model.cpb" ]] || { echo "FAIL: no saved_model.cpb"; exit 1; }
echo "source: $(du -sb "$work/huge/saved_model.cpb" | cut -f1) bytes in saved_model.cpb"
if "$serve" "$work/huge" >/dev/null 2>"$work/err"; then
  echo "FAIL: the C++ loader read the .cpb (expected: it reads only .pb)"; exit 1
fi
echo "ok: the C++ loader refuses the .cpb: $(grep -o 'Could not find SavedModel[^.]*' "$work/err" | head -n 1)"

/usr/bin/time -f "%e s %M KB" -o "$work/time" "$unbound" externalize "$work/huge" "$work/ext" >"$work/report"
tail -n 1 "$work/report"
echo "externalize: $(cat "$work/time") (elapsed, peak resident)"
sync
/usr/bin/time -f "%e s %M KB" -o "$work/cptime" cp -r "$work/ext/variables" "$work/cp_variables"
echo "cp -r of the variables written ($(du -sb "$work/ext/variables" | cut -f1) bytes): $(cat "$work/cptime")"
rm -rf "$work/cp_variables"
pb_size="$(stat -c %s "$work/ext/saved_model.pb")"
(( pb_size < 2147483647 )) || { echo "FAIL: saved_model.pb is $pb_size bytes"; exit 1; }
"$unbound" verify "$work/ext" >/dev/null && echo "ok: unbound verify"

"$serve" "$work/ext" >"$work/ext.out" 2>"$work/err" || {
  echo "FAIL: C++ LoadSavedModel: $(grep -v '^[IW]0000' "$work/err" | tail -n 1)"; exit 1; }
"$py" interop/externalize/huge.py expect "$elements" >"$work/expected.out"
if cmp -s "$work/ext.out" "$work/expected.out"; then
  echo "ok: C++ LoadSavedModel serves the externalized model (saved_model.pb $pb_size bytes), outputs the constants' values bit for bit"
else
  echo "FAIL: C++ LoadSavedModel's outputs differ from the constants' values"; diff "$work/ext.out" "$work/expected.out" | cut -c1-120; exit 1
fi
# The same model, smaller (480 MB), stored and zstd-compressed: a chunk of a function holds
# three values, which a compressed record gives in one pass (crates/externalize/src/one_pass.rs)
# and a stored one where they lie; both must write the very same checkpoint.
for kind in stored zstd; do
  flag=""; [[ "$kind" == zstd ]] && flag="--zstd"
  "$target/release/examples/inflate_consts" "$work/small" "$work/mid_$kind" 20000000 --max-size 300000000 $flag >/dev/null
  "$unbound" externalize "$work/mid_$kind" "$work/mid_${kind}_ext" >/dev/null
done
for f in variables/variables.index variables/variables.data-00000-of-00001 saved_model.pb; do
  cmp -s "$work/mid_stored_ext/$f" "$work/mid_zstd_ext/$f" \
    || { echo "FAIL: externalize of the stored and the zstd .cpb differ in $f"; exit 1; }
done
"$serve" "$work/mid_zstd_ext" >"$work/mid.out" 2>"$work/err" || {
  echo "FAIL: C++ LoadSavedModel of the zstd variant: $(grep -v '^[IW]0000' "$work/err" | tail -n 1)"; exit 1; }
"$py" interop/externalize/huge.py expect 20000000 >"$work/mid_expected.out"
cmp -s "$work/mid.out" "$work/mid_expected.out" \
  || { echo "FAIL: the zstd variant's outputs differ from the constants' values"; exit 1; }
echo "ok: a stored and a zstd-compressed .cpb of several values per chunk externalize to the same files, served bit for bit"
rm -rf "$work"/mid_*
if [[ "${UNBOUND_EXTERNALIZE_SKIP_UNBOUND_TF:-0}" == 1 ]]; then
  echo "note: the comparison with unbound.tensorflow is skipped (UNBOUND_EXTERNALIZE_SKIP_UNBOUND_TF=1)"
elif "$py" -c "import unbound.tensorflow" 2>/dev/null; then
  rm -rf "$work/small"
  if "$py" interop/externalize/huge.py unbound-tf "$work/huge" >"$work/utf.out" 2>"$work/err" \
      && cmp -s "$work/ext.out" "$work/utf.out"; then
    echo "ok: the original .cpb loaded through unbound.tensorflow gives the same outputs"
  else
    echo "FAIL: unbound.tensorflow load of the original: $(tail -n 1 "$work/err")"; exit 1
  fi
else
  echo "note: the unbound package is not importable: the comparison with unbound.tensorflow is skipped"
fi
echo "externalize huge.sh: passed"

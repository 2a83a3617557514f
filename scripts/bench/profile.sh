#!/usr/bin/env bash
# Where unbound spends its time in the benchmark commands: perf record (sampling, call graphs
# by frame pointer) of one run, then the top symbols by self time, and a syscall time summary
# (strace -c -w) of another run, which shows time spent waiting (fsync) that samples of CPU
# time do not.
#
# usage: scripts/bench/profile.sh merge|merge-zstd|split [VARIANT_DIR]
#   VARIANT_DIR defaults to bench-data (made by scripts/bench.sh; bench-data/uniform for the
#   incompressible variant). merge: unbound merge VARIANT_DIR/model_cpb; merge-zstd: of
#   VARIANT_DIR/model_cpb_zstd; split: unbound split VARIANT_DIR/model_pb (defaults).
#
# Needs perf (Debian: apt-get install -y linux-perf) and strace. The release profile keeps
# line tables (debug = 1), so symbols resolve.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
what="${1:-}"
dir="${2:-$root/bench-data}"
unbound="${CARGO_TARGET_DIR:-$root/target}/release/unbound"
command -v perf >/dev/null || { echo "profile.sh: perf is missing (apt-get install -y linux-perf)" >&2; exit 1; }
[[ -x "$unbound" ]] || { echo "profile.sh: build first: cargo build --release" >&2; exit 1; }

case "$what" in
  merge) cmd=("$unbound" merge "$dir/model_cpb") ;;
  merge-zstd) cmd=("$unbound" merge "$dir/model_cpb_zstd") ;;
  split) cmd=("$unbound" split "$dir/model_pb") ;;
  *) sed -n '2,13p' "$0" >&2; exit 2 ;;
esac

work="$(mktemp -d "$dir/.profile.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cat "${cmd[2]}"/* >/dev/null  # warm the page cache, as bench.sh does

perf record -q -g -o "$work/perf.data" "${cmd[@]}" "$work/out" >/dev/null 2>"$work/perf.err" \
  || { cat "$work/perf.err" >&2; exit 1; }
echo "== top symbols by self time: ${cmd[*]} OUT"
perf report -i "$work/perf.data" --no-children --stdio --sort dso,sym 2>/dev/null \
  | grep -E '^ +[0-9]+\.[0-9]+%' | head -n 15 || true  # head closes the pipe early
rm -rf "$work/out"
if command -v strace >/dev/null; then
  echo "== syscalls by wall time"
  strace -f -w -c -o "$work/strace.txt" "${cmd[@]}" "$work/out" >/dev/null
  head -n 8 "$work/strace.txt"
fi

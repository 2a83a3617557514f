#!/usr/bin/env bash
# `unbound export-tpu` against `unbound split` on the 1.6 GB benchmark model (issue 11, "Speed":
# export-tpu within 2x of split's time, peak memory not above split's). Results: BENCHMARKS.md.
#
# usage: scripts/bench_tpu.sh [--reps N]
#
# The model (generated once under bench-data/tpu_model/, reused when present) is the model of
# scripts/bench.sh, 12 float32 constants of 128 MiB (1.6 GB, same values), laid out as TF2
# saves a model: constants and MatMuls in a function the graph calls through
# StatefulPartitionedCall (crates/tpu/examples/make_tpu_bench_model.rs); the TF1-shaped
# bench model has no function to run on TPU.
#
# Commands, each --reps times (default 3) under /usr/bin/time -f '%e %M', best wall time and
# largest peak RSS shown (MB = 10^6 bytes); the input is read once first (warm page cache);
# outputs go to bench-data/scratch/ and are removed after each run; the last output is first
# fingerprinted on its own (`unbound fingerprint OUT`, the step every command ends with), once:
#   split:                unbound split MODEL OUT                       (one 1.6 GB .cpb)
#   export-tpu --tpu-only: unbound export-tpu MODEL OUT --tpu-only      (one MetaGraphDef, 1.6 GB)
#   export-tpu:           unbound export-tpu MODEL OUT                  ({serve} and {serve,tpu}:
#                                                                      both hold the constants,
#                                                                      both graphs split, 3.2 GB
#                                                                      .cpb)
#   export-tpu --batch:   as above with --batch max_batch_size=8
# All with unbound's defaults (--max-size 1 GiB, zstd with incompressible chunks stored).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
reps=3
while (( $# > 0 )); do
  case "$1" in
    --reps) reps="$2"; shift 2 ;;
    *) echo "bench_tpu.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
cd "$root"
source "$root/scripts/bench/build.sh"
bench_build unbound-tpu:make_tpu_bench_model
model="$root/bench-data/tpu_model"
scratch="$root/bench-data/scratch"
if [ ! -f "$model/saved_model.pb" ]; then
  "$bench_release/examples/make_tpu_bench_model" "$model"
fi
mkdir -p "$scratch"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); unbound $(git rev-parse --short HEAD)"
echo "model: $(stat -c %s "$model/saved_model.pb") bytes"
cat "$model/saved_model.pb" >/dev/null

measure() { # LABEL ARGS... (OUT is appended)
  local label="$1"; shift
  local best="" peak=0 out="$scratch/out"
  for _ in $(seq "$reps"); do
    rm -rf "$out"
    /usr/bin/time -f '%e %M' -o "$scratch/time" "$unbound" "$@" "$out" >"$scratch/log" 2>&1 ||
      { cat "$scratch/log"; exit 1; }
    read -r secs kb <"$scratch/time"
    best=$(python3 -c "print(min(float('$secs'), float('${best:-1e9}')))")
    peak=$(( kb > peak ? kb : peak ))
  done
  local size
  size=$(du -sb "$out" | cut -f1)
  # The last step of every command is fingerprinting what it wrote (read back from disk):
  # the same on its own, to tell its share of the time and of the peak.
  /usr/bin/time -f '%e %M' -o "$scratch/time" "$unbound" fingerprint "$out" >"$scratch/log" 2>&1 ||
    { cat "$scratch/log"; exit 1; }
  read -r fp_secs fp_kb <"$scratch/time"
  rm -rf "$out"
  printf '| %s | %.2f | %d | %d | %.2f | %d |\n' "$label" "$best" $(( peak * 1024 / 1000000 )) \
    $(( size / 1000000 )) "$fp_secs" $(( fp_kb * 1024 / 1000000 ))
}
echo "| command | best wall (s) | peak RSS (MB) | output (MB) | fingerprint of the output alone (s) | its peak RSS (MB) |"
echo "|---|---|---|---|---|---|"
measure "unbound split" split "$model"
measure "unbound export-tpu --tpu-only" export-tpu --tpu-only "$model"
measure "unbound export-tpu (keeps {serve})" export-tpu "$model"
measure "unbound export-tpu --batch max_batch_size=8" export-tpu --batch max_batch_size=8 "$model"

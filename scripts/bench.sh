#!/usr/bin/env bash
# Whole-command benchmarks of unbound against TensorFlow 2.21's own code on the same files
# (issue 2, "Speed and memory"); results are recorded in BENCHMARKS.md.
#
# usage: scripts/bench.sh [--reps N] [--variant normal|uniform|all] [--skip-split]
#
# Data (generated once under bench-data/, gitignored, and reused when present; delete a
# directory to regenerate it):
#   bench-data/model_pb/saved_model.pb     a SavedModel of 12 float32 Const nodes of 128 MiB
#                                          (1.6 GB), made in Rust by
#                                          crates/savedmodel/examples/make_bench_model.rs
#   bench-data/model_cpb/saved_model.cpb   its chunked form as TensorFlow writes it: each
#                                          tensor_content a BYTES chunk (max size 100,000,000),
#                                          every chunk Brotli quality 6
#   bench-data/model_cpb_zstd/             `unbound split` of model_pb with default settings
#                                          (zstd; incompressible chunks stored)
#   variant "normal" (the issue's benchmark): constants roughly normal (std 0.05), like trained
#   weights; Brotli shrinks them ~12%, so its streams hold compressed meta-blocks to decode.
#   variant "uniform" (bench-data/uniform/...): uniformly random bytes; Brotli stores them as
#   uncompressed meta-blocks. Run with --variant all or uniform.
#
# Measurements: every command runs --reps times (default 3) under /usr/bin/time -f '%e %M';
# the table shows the best wall time and the largest peak RSS (MB = 10^6 bytes). Nothing is dropped from the page
# cache: each input is read once before its group (cat > /dev/null), so both sides read warm
# files. Outputs go to bench-data/scratch/ (same filesystem) and are removed between runs.
# unbound and merger_harness both fsync what they write; plain `cp -r` does not, so
# `cp -r + fsync` (coreutils `sync FILE`) is shown as well.
#
# Commands compared:
#   merge: unbound merge bench-data/model_cpb OUT
#          vs merger_harness read --type tensorflow.SavedModel bench-data/model_cpb/saved_model OUT.pb
#          (TensorFlow's Merger::Read + deterministic serialization + write), outputs checked
#          byte-identical to each other and to model_pb/saved_model.pb
#   split: unbound split bench-data/model_pb OUT  (and --compression none) vs cp -r
#   read:  cat FILE > /dev/null
# Targets (issue 2): merge >= 5x faster than TensorFlow at <= 1/2 its peak RSS; split within 3x
# the time of copying the file.
#
# Needs /usr/bin/time (Debian/Ubuntu package `time`; installed here with `apt-get install -y
# time` when missing and running as root), the TensorFlow venv and merger_harness
# (interop/build_harness.sh), ~12 GB of disk under bench-data/ (with --variant all), and a
# quiet machine: other processes (e.g. a parallel cargo build) distort the numbers; the load
# average is printed first.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
reps=3
variants=(normal)
skip_split=0
while (( $# > 0 )); do
  case "$1" in
    --reps) reps="$2"; shift 2 ;;
    --variant)
      case "$2" in
        normal|uniform) variants=("$2") ;;
        all) variants=(normal uniform) ;;
        *) echo "bench.sh: --variant normal|uniform|all" >&2; exit 2 ;;
      esac
      shift 2 ;;
    --skip-split) skip_split=1; shift ;;
    -h|--help) sed -n '2,45p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

log() { echo "bench.sh: $*" >&2; }
die() { echo "bench.sh: error: $*" >&2; exit 1; }

# /usr/bin/time (GNU time) reports peak RSS; the shell keyword does not.
if [[ ! -x /usr/bin/time ]]; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    log "installing GNU time: apt-get install -y time"
    apt-get install -y time >&2 || die "apt-get install -y time failed"
  else
    die "/usr/bin/time is missing: apt-get install -y time"
  fi
fi

log "building unbound and make_bench_model (release)"
source "$root/scripts/bench/build.sh"
bench_build unbound-savedmodel:make_bench_model
generator="$bench_release/examples/make_bench_model"
harness="$("$root/interop/build_harness.sh" | tail -n 1)"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"

data="${BENCH_DATA:-$root/bench-data}"
# For a quick smoke test on small data, BENCH_GEN_ARGS passes extra make_bench_model arguments
# and BENCH_MAX_SIZE (default 100000000) sets the chunking maximum of both .cpb forms, e.g.
#   BENCH_DATA=/tmp/bench-small BENCH_GEN_ARGS="--consts 2 --mib 8" BENCH_MAX_SIZE=4000000 \
#     scripts/bench.sh --reps 1 --variant all
read -r -a gen_args <<<"${BENCH_GEN_ARGS:-}"
max_size="${BENCH_MAX_SIZE:-100000000}"
scratch="$data/scratch"
mkdir -p "$data"
rm -rf "$scratch"
mkdir -p "$scratch"
results="$data/results.tsv"
: >"$results"

# ------------------------------------------------------------------ data ----

# ensure_data DIR CONTENT: DIR/model_pb, DIR/model_cpb (TensorFlow-style Brotli) and
# DIR/model_cpb_zstd (unbound split defaults).
ensure_data() {
  local dir="$1" content="$2"
  if [[ ! -f "$dir/model_pb/saved_model.pb" || ! -f "$dir/model_cpb/saved_model.cpb" ]]; then
    log "generating $dir ($content content; Brotli quality 6 on 1.6 GB takes ~2 minutes)"
    rm -rf "$dir/model_pb" "$dir/model_cpb" "$dir/model_cpb_zstd"
    mkdir -p "$dir"
    "$generator" "$dir" --content "$content" --max-size "$max_size" "${gen_args[@]}" \
      >"$dir/model.json"
  fi
  if [[ ! -f "$dir/model_cpb_zstd/saved_model.cpb" ]]; then
    log "writing $dir/model_cpb_zstd with unbound split (defaults)"
    "$unbound" split "$dir/model_pb" "$dir/model_cpb_zstd" --max-size "$max_size" >/dev/null
  fi
}

warm() { for f in "$@"; do cat "$f" >/dev/null; done; }

# ------------------------------------------------------------- measuring ----

# measure KEY LABEL CMD...: runs CMD $reps times (scratch emptied before each), records the
# best wall time and the largest peak RSS in $results and prints a line.
measure() {
  local key="$1" label="$2"; shift 2
  local best="" maxrss=0 t m r
  for (( r = 1; r <= reps; r++ )); do
    rm -rf "${scratch:?}"/*
    if ! /usr/bin/time -f '%e %M' -o "$scratch/.time" "$@" >"$scratch/.out" 2>"$scratch/.err"; then
      cat "$scratch/.err" >&2
      die "$label failed: $*"
    fi
    read -r t m <"$scratch/.time"
    if [[ -z "$best" ]] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best="$t"; fi
    (( m > maxrss )) && maxrss="$m"
  done
  printf '%s\t%s\t%s\t%s\n' "$key" "$best" "$maxrss" "$label" >>"$results"
  printf '  %-58s %8.2f s %9.1f MB\n' "$label" "$best" "$(awk -v k="$maxrss" 'BEGIN { print k * 1.024 / 1000 }')"
}

# anon KEY CMD...: one more run of CMD under scripts/bench/peak_rss.sh, to split its peak RSS
# into private memory (RssAnon) and mapped file pages (RssFile); recorded as KEY.anon/KEY.file.
anon() {
  local key="$1" line; shift
  rm -rf "${scratch:?}"/*
  "$root/scripts/bench/peak_rss.sh" "$@" >/dev/null 2>"$scratch/.err" || die "$* failed"
  line="$(grep '^peak_rss:' "$scratch/.err")"
  printf '%s.anon\t%s\n%s.file\t%s\n' "$key" "$(awk '{print $5}' <<<"$line")" \
    "$key" "$(awk '{print $7}' <<<"$line")" >>"$results"
  printf '  %-58s %s\n' "  of which (sampled):" \
    "$(awk '{printf "private (RssAnon) %.1f MB, mapped files (RssFile) %.1f MB", $5*1.024/1000, $7*1.024/1000}' <<<"$line")"
}

get() { awk -F'\t' -v k="$1" -v c="$2" '$1 == k { print $c }' "$results"; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# verdict VALUE OP LIMIT
verdict() { awk -v v="$1" -v l="$3" -v op="$2" 'BEGIN {
  ok = (op == ">=") ? (v >= l) : (v <= l); print ok ? "met" : "MISSED" }'; }

# keep_output DEST: moves the last run's scratch output to DEST (for comparing outputs).
keep_output() { rm -rf "$1"; mv "$scratch/out" "$1"; }

# ----------------------------------------------------------------- run ------

echo "bench.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GB", $2/1048576}' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg), $reps runs each (best wall time, largest peak RSS)"
echo "unbound $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'); $("$harness" version 2>/dev/null | head -n 1)"

for variant in "${variants[@]}"; do
  if [[ "$variant" == normal ]]; then dir="$data"; else dir="$data/uniform"; fi
  ensure_data "$dir" "$variant"
  pb="$dir/model_pb/saved_model.pb"
  cpb="$dir/model_cpb/saved_model.cpb"
  zcpb="$dir/model_cpb_zstd/saved_model.cpb"
  echo
  echo "== variant $variant: $(stat -c %s "$pb") byte .pb; TensorFlow-style .cpb $(stat -c %s "$cpb") bytes; unbound-split .cpb $(stat -c %s "$zcpb") bytes"
  v="$variant"

  warm "$pb" "$cpb" "$zcpb"
  measure "$v.read_cpb" "read the Brotli .cpb once (cat > /dev/null)" cat "$cpb"
  measure "$v.read_pb" "read the .pb once (cat > /dev/null)" cat "$pb"

  echo "merge (TensorFlow-style Brotli .cpb -> saved_model.pb):"
  warm "$cpb"
  measure "$v.merge_unbound" "unbound merge" "$unbound" merge "$dir/model_cpb" "$scratch/out"
  keep_output "$data/.merged_unbound"
  anon "$v.merge_unbound" "$unbound" merge "$dir/model_cpb" "$scratch/out"
  measure "$v.merge_tf" "TensorFlow Merger::Read + serialize + write" \
    "$harness" read --type tensorflow.SavedModel "$dir/model_cpb/saved_model" "$scratch/out"
  keep_output "$data/.merged_tf.pb"
  anon "$v.merge_tf" "$harness" read --type tensorflow.SavedModel "$dir/model_cpb/saved_model" "$scratch/out"
  cmp -s "$data/.merged_unbound/saved_model.pb" "$data/.merged_tf.pb" \
    || die "unbound merge and TensorFlow's Merger wrote different saved_model.pb"
  cmp -s "$data/.merged_tf.pb" "$pb" || die "the merged model differs from $pb"
  echo "  (outputs byte-identical to each other and to the original .pb)"
  rm -rf "$data/.merged_unbound" "$data/.merged_tf.pb"

  echo "merge (unbound-split zstd .cpb -> saved_model.pb):"
  warm "$zcpb"
  measure "$v.merge_zstd_unbound" "unbound merge" "$unbound" merge "$dir/model_cpb_zstd" "$scratch/out"
  anon "$v.merge_zstd_unbound" "$unbound" merge "$dir/model_cpb_zstd" "$scratch/out"
  measure "$v.merge_zstd_tf" "TensorFlow Merger::Read + serialize + write" \
    "$harness" read --type tensorflow.SavedModel "$dir/model_cpb_zstd/saved_model" "$scratch/out"
  anon "$v.merge_zstd_tf" "$harness" read --type tensorflow.SavedModel "$dir/model_cpb_zstd/saved_model" "$scratch/out"

  if (( ! skip_split )); then
    echo "split (.pb -> saved_model.cpb) and copy:"
    warm "$pb"
    measure "$v.split_zstd" "unbound split (defaults: zstd, incompressible stored)" \
      "$unbound" split "$dir/model_pb" "$scratch/out"
    anon "$v.split_zstd" "$unbound" split "$dir/model_pb" "$scratch/out"
    measure "$v.split_none" "unbound split --compression none" \
      "$unbound" split "$dir/model_pb" "$scratch/out" --compression none
    measure "$v.cp" "cp -r model_pb" cp -r "$dir/model_pb" "$scratch/out"
    measure "$v.cp_sync" "cp -r model_pb + fsync (sync FILE)" \
      sh -c 'cp -r "$1" "$2" && sync "$2/saved_model.pb"' sh "$dir/model_pb" "$scratch/out"
  fi

  echo "ratios ($v):"
  mu=$(get "$v.merge_unbound" 2); mt=$(get "$v.merge_tf" 2)
  ru=$(get "$v.merge_unbound" 3); rt=$(get "$v.merge_tf" 3)
  speed=$(ratio "$mt" "$mu"); mem=$(ratio "$ru" "$rt")
  printf '  merge: TensorFlow time / unbound time = %sx (target >= 5x: %s); unbound RSS / TensorFlow RSS = %s (target <= 0.5: %s)\n' \
    "$speed" "$(verdict "$speed" ">=" 5)" "$mem" "$(verdict "$mem" "<=" 0.5)"
  printf '  merge: private memory (RssAnon) unbound / TensorFlow = %s\n' \
    "$(ratio "$(get "$v.merge_unbound.anon" 2)" "$(get "$v.merge_tf.anon" 2)")"
  printf '  merge: unbound time / reading the .cpb once = %s\n' "$(ratio "$mu" "$(get "$v.read_cpb" 2)")"
  zs=$(ratio "$(get "$v.merge_zstd_tf" 2)" "$(get "$v.merge_zstd_unbound" 2)")
  zm=$(ratio "$(get "$v.merge_zstd_unbound" 3)" "$(get "$v.merge_zstd_tf" 3)")
  printf '  merge of the unbound-split .cpb: TensorFlow / unbound time = %sx; RSS ratio = %s\n' "$zs" "$zm"
  if (( ! skip_split )); then
    cp_t=$(get "$v.cp" 2); cps_t=$(get "$v.cp_sync" 2)
    for k in split_zstd split_none; do
      s=$(ratio "$(get "$v.$k" 2)" "$cp_t")
      printf '  %-13s / cp -r = %s (target <= 3: %s); / (cp -r + fsync) = %s\n' \
        "$k" "$s" "$(verdict "$s" "<=" 3)" "$(ratio "$(get "$v.$k" 2)" "$cps_t")"
    done
  fi
done
rm -rf "$scratch"
echo
echo "raw results (key, best wall s, max peak RSS KB, label): $results"

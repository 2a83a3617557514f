#!/usr/bin/env bash
# Issue 15's benchmark: a graph-heavy SavedModel (millions of small nodes and thousands of
# functions, made by crates/savedmodel/examples/make_graph_model.rs), each unbound command
# side by side with its reference on the same file, in one run. Results go in BENCHMARKS.md.
#
# usage: scripts/bench_nodes.sh [--nodes N] [--functions F] [--reps R] [--chunk BYTES]
#   default: 3,000,000 graph nodes and 10,000 functions of 100 nodes (about 0.55 GB), under
#   bench-data/nodes-N-F/ (generated once, reused; delete it to regenerate). The .cpb is split
#   at --chunk bytes (default 67108864; a model under that needs a smaller one, e.g. 300,000
#   nodes: --chunk 16000000).
#
# Rows (best wall time of R runs, largest peak RSS; files read once before each group):
#   merge        unbound merge of the .cpb (64 MiB chunks) vs TensorFlow's Merger::Read +
#                deterministic serialization + write (merger_harness read); outputs compared
#   split        unbound split --max-size 67108864 vs zstd -3 -T2 of the .pb
#   split (.pb)  unbound split with the default max size (nothing to split: writes a .pb and
#                its fingerprint) vs cp -r + sync
#   fingerprint  unbound fingerprint vs TensorFlow's C++ CreateFingerprintDef
#                (merger_harness fingerprint: a C++ process, no Python import)
#   show         unbound show vs saved_model_cli show --all
#   verify       unbound verify of the .cpb (target: under 2x merge)
#   optimize     unbound optimize --plugin libunbound_plugin_prune_identity.so --device-type CPU
#                (a plugin that changes nothing on this model; every function is a call) of the
#                .pb, without and with --isolate, next to unbound merge of the same model in
#                the same run; the host's overhead is the total minus the plugins' own time,
#                which optimize prints (targets: peak <= 5x the .pb, overhead <= 2x merge)
# Needs /usr/bin/time, zstd, the TensorFlow venv (scripts/tf-venv.sh) and merger_harness.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
nodes=3000000
functions=10000
reps=1
chunk=67108864
while (( $# > 0 )); do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --functions) functions="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --chunk) chunk="$2"; shift 2 ;;
    *) echo "bench_nodes.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
log() { echo "bench_nodes.sh: $*" >&2; }
command -v zstd >/dev/null || { log "zstd missing (apt-get install -y zstd)"; exit 1; }
[[ -x /usr/bin/time ]] || { log "/usr/bin/time missing (apt-get install -y time)"; exit 1; }

source "$root/scripts/bench/build.sh"
bench_build unbound-savedmodel:make_graph_model unbound-plugin-prune-identity
harness="$("$root/interop/build_harness.sh" | tail -n 1)"
venv="$("$root/scripts/tf-venv.sh" | tail -n 1)"
export TF_CPP_MIN_LOG_LEVEL=2

data="$root/bench-data/nodes-$nodes-$functions"
if [[ ! -f "$data/model_pb/saved_model.pb" || ! -f "$data/model_cpb/saved_model.cpb" ]]; then
  log "generating $data"
  rm -rf "$data"
  "$bench_release/examples/make_graph_model" "$data" --nodes "$nodes" --functions "$functions" \
    --max-size "$chunk" >/dev/null
fi
scratch="$data/scratch"
pb_dir="$data/model_pb"
cpb_dir="$data/model_cpb"

# measure LABEL CMD...: best wall time and largest peak RSS of $reps runs; sets T and M (MB).
measure() {
  local label="$1" best="" maxrss=0 t m r
  shift
  for (( r = 1; r <= reps; r++ )); do
    rm -rf "$scratch"; mkdir -p "$scratch"
    /usr/bin/time -f '%e %M' -o "$data/.time" "$@" >"$data/.out" 2>"$data/.err" \
      || { cat "$data/.err" >&2; log "$label failed"; exit 1; }
    read -r t m <"$data/.time"
    if [[ -z "$best" ]] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best="$t"; fi
    (( m > maxrss )) && maxrss="$m"
  done
  T="$best"; M="$(awk -v k="$maxrss" 'BEGIN { printf "%.0f", k * 1.024 / 1000 }')"
  printf '  %-52s %8.2f s %8s MB\n' "$label" "$T" "$M"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
warm() { cat "$@" >/dev/null; }

echo "bench_nodes.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), unbound $(git -C "$root" rev-parse --short HEAD)"
echo "model: $nodes graph nodes, $functions functions of 100 nodes; .pb $(stat -c %s "$pb_dir/saved_model.pb") bytes, .cpb $(stat -c %s "$cpb_dir/saved_model.cpb") bytes"

echo "merge (.cpb -> saved_model.pb):"
warm "$cpb_dir/saved_model.cpb"
measure "unbound merge" "$unbound" merge "$cpb_dir" "$scratch/out"
ut="$T" um="$M"; cp "$scratch/out/saved_model.pb" "$data/.ours.pb"
measure "TensorFlow Merger::Read + serialize + write" "$harness" read --type tensorflow.SavedModel "$cpb_dir/saved_model" "$scratch/out.pb"
cmp -s "$data/.ours.pb" "$scratch/out.pb" && echo "  (outputs byte-identical)" || echo "  OUTPUTS DIFFER"
rm -f "$data/.ours.pb"
echo "  ratio: time $(ratio "$ut" "$T") (target <= 0.2), peak memory $(ratio "$um" "$M") (target <= 0.5)"
merge_t="$ut"

echo "split (.pb -> .cpb, 64 MiB chunks):"
warm "$pb_dir/saved_model.pb"
measure "unbound split --max-size 67108864" "$unbound" split "$pb_dir" "$scratch/out" --max-size 67108864
ut="$T"
measure "zstd -3 -T2" zstd -q -3 -T2 -f "$pb_dir/saved_model.pb" -o "$scratch/out.zst"
echo "  ratio: $(ratio "$ut" "$T") (target <= 3)"

echo "split, nothing to split (writes .pb + fingerprint):"
measure "unbound split (default max size)" "$unbound" split "$pb_dir" "$scratch/out"
ut="$T"
measure "cp -r + sync" sh -c 'cp -r "$1" "$2" && sync "$2/saved_model.pb"' sh "$pb_dir" "$scratch/out"
echo "  ratio: $(ratio "$ut" "$T") (target <= 3)"

echo "fingerprint (.pb):"
measure "unbound fingerprint" "$unbound" fingerprint "$pb_dir"
ut="$T"
measure "TensorFlow CreateFingerprintDef (C++)" "$harness" fingerprint "$pb_dir"
echo "  ratio: $(ratio "$ut" "$T") (target <= 0.1)"
measure "unbound fingerprint (.cpb)" "$unbound" fingerprint "$cpb_dir"
measure "TensorFlow CreateFingerprintDef (C++, .cpb)" "$harness" fingerprint "$cpb_dir"

echo "show:"
measure "unbound show" "$unbound" show "$pb_dir"
measure "saved_model_cli show --all" "$venv/bin/saved_model_cli" show --dir "$pb_dir" --all
echo "  (target: unbound under 0.5 s and 200 MB on 3M nodes)"

echo "verify (.cpb):"
measure "unbound verify" "$unbound" verify "$cpb_dir"
echo "  ratio to unbound merge: $(ratio "$T" "$merge_t") (target <= 2)"
echo "optimize (.pb, prune-identity: changes nothing here), next to merge of the .cpb:"
plugin="$bench_release/libunbound_plugin_prune_identity.so"
pb_bytes="$(stat -c %s "$pb_dir/saved_model.pb")"
warm "$cpb_dir/saved_model.cpb"
measure "unbound merge" "$unbound" merge "$cpb_dir" "$scratch/out"
merge_t="$T"
warm "$pb_dir/saved_model.pb"
for isolate in "" "--isolate"; do
  measure "unbound optimize $isolate" "$unbound" optimize "$pb_dir" "$scratch/out" --plugin "$plugin" \
    --device-type CPU $isolate
  cmp -s "$pb_dir/saved_model.pb" "$scratch/out/saved_model.pb" && echo "  (output byte-identical to the input)" \
    || echo "  OUTPUT DIFFERS FROM THE INPUT"
  # "N plugin calls, S s in the plugins' own code": the best run's is close enough to any.
  pt="$(sed -n 's/.* plugin calls, \([0-9.]*\) s in the plugins.*/\1/p' "$data/.out")"
  host="$(awk -v t="$T" -v p="$pt" 'BEGIN { printf "%.2f", t - p }')"
  echo "  plugins' own time $pt s; host overhead $host s = $(ratio "$host" "$merge_t") x merge (target <= 2);" \
    "peak $(ratio "$M" "$(awk -v b="$pb_bytes" 'BEGIN { printf "%.1f", b / 1e6 }')") x the .pb (target <= 5)"
done
rm -rf "$scratch" "$data/.time" "$data/.out" "$data/.err"

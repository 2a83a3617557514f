#!/usr/bin/env bash
# Issue 15's benchmark: a graph-heavy SavedModel (millions of small nodes and thousands of
# functions, made by crates/savedmodel/examples/make_graph_model.rs), each unbound command
# side by side with its reference on the same file, in one run. Results go in BENCHMARKS.md.
#
# usage: scripts/bench_nodes.sh [--nodes N] [--functions F] [--reps R] [--chunk BYTES]
#                               [--noncanonical all|CLASS,CLASS...|none]
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
#
# Then the non-canonical shape (issue 29): the same .pb scrambled by
# crates/savedmodel/examples/scramble_model.rs (--noncanonical CLASSES, default all: fields out
# of order, map entries without default keys, unknown fields at every depth, split messages,
# empty and wrong-wire-type fields, padded varints; seed 1), under
# bench-data/nodes-N-F/noncanonical-CLASSES/ (model_pb, and model_cpb: split as read at --chunk by
# scramble_model --split-at, its chunks scrambled too),
# and the same rows on it: merge vs the Merger (targets: time <= 0.2, memory <= 0.5), split vs
# zstd (<= 3), split with nothing to split vs cp (no target: the copy's fingerprint needs the
# model encoded), fingerprint vs CreateFingerprintDef (<= 0.1; the values are compared too),
# show vs saved_model_cli, verify (<= merge). A row whose unbound command fails prints FAILED
# and the error instead of stopping the run.
# Needs /usr/bin/time, zstd, the TensorFlow venv (scripts/tf-venv.sh) and merger_harness.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
nodes=3000000
functions=10000
reps=1
chunk=67108864
noncanonical=all
while (( $# > 0 )); do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --functions) functions="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --chunk) chunk="$2"; shift 2 ;;
    --noncanonical) noncanonical="$2"; shift 2 ;;
    *) echo "bench_nodes.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
log() { echo "bench_nodes.sh: $*" >&2; }
command -v zstd >/dev/null || { log "zstd missing (apt-get install -y zstd)"; exit 1; }
[[ -x /usr/bin/time ]] || { log "/usr/bin/time missing (apt-get install -y time)"; exit 1; }

source "$root/scripts/bench/build.sh"
bench_build unbound-savedmodel:make_graph_model unbound-savedmodel:scramble_model \
  unbound-plugin-prune-identity
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
# With soft=1, a failing command prints FAILED and its error, empties T and M and returns 1.
soft=0
measure() {
  local label="$1" best="" maxrss=0 t m r
  shift
  for (( r = 1; r <= reps; r++ )); do
    rm -rf "$scratch"; mkdir -p "$scratch"
    if ! /usr/bin/time -f '%e %M' -o "$data/.time" "$@" >"$data/.out" 2>"$data/.err"; then
      if (( soft )); then
        printf '  %-52s FAILED: %s\n' "$label" \
          "$(grep -v -e '^Command exited' -e '^\s*$' "$data/.err" | tail -n 1 | cut -c1-300)"
        T="" M=""
        return 1
      fi
      cat "$data/.err" >&2; log "$label failed"; exit 1
    fi
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

# The non-canonical shape (issue 29). sratio: ratio, or n/a when a row failed.
sratio() { if [[ -n "$1" && -n "$2" ]]; then ratio "$1" "$2"; else echo "n/a"; fi; }
if [[ "$noncanonical" != none ]]; then
  nc="$data/noncanonical-${noncanonical//,/+}"
  nc_pb="$nc/model_pb"
  nc_cpb="$nc/model_cpb"
  if [[ ! -f "$nc_pb/saved_model.pb" ]]; then
    log "scrambling into $nc_pb"
    rm -rf "$nc"; mkdir -p "$nc"
    /usr/bin/time -f '%e %M' -o "$nc/scramble.time" "$bench_release/examples/scramble_model" \
      "$pb_dir" "$nc_pb" --classes "$noncanonical" --seed 1 >"$nc/scramble.json"
  fi
  if [[ ! -f "$nc_cpb/saved_model.cpb" ]]; then
    # Split as read, its chunks keeping the scrambled encoding (another writer's .cpb):
    # `unbound split` would split the model's canonical form.
    rm -rf "$nc_cpb"
    "$bench_release/examples/scramble_model" "$pb_dir" "$nc_cpb" --classes "$noncanonical" \
      --seed 1 --split-at "$chunk" >/dev/null 2>"$nc/split.err" || true
  fi
  echo
  echo "non-canonical shape: the .pb above scrambled by scramble_model --classes $noncanonical --seed 1"
  read -r t m <"$nc/scramble.time"
  echo "model: .pb $(stat -c %s "$nc_pb/saved_model.pb") bytes (scrambled in $t s, peak $(awk -v k="$m" 'BEGIN { printf "%.0f", k * 1.024 / 1000 }') MB), .cpb $(
    if [[ -f "$nc_cpb/saved_model.cpb" ]]; then echo "$(stat -c %s "$nc_cpb/saved_model.cpb") bytes (unbound split at $chunk)";
    else echo "NONE: unbound split failed: $(tail -n 1 "$nc/split.err" | cut -c1-300)"; fi)"
  soft=1
  merge_t=""
  if [[ -f "$nc_cpb/saved_model.cpb" ]]; then
    echo "merge (.cpb -> saved_model.pb):"
    warm "$nc_cpb/saved_model.cpb"
    if measure "unbound merge" "$unbound" merge "$nc_cpb" "$scratch/out"; then
      cp "$scratch/out/saved_model.pb" "$data/.ours.pb"
    fi
    ut="$T" um="$M"
    measure "TensorFlow Merger::Read + serialize + write" "$harness" read --type tensorflow.SavedModel "$nc_cpb/saved_model" "$scratch/out.pb" || true
    if [[ -f "$data/.ours.pb" && -f "$scratch/out.pb" ]]; then
      cmp -s "$data/.ours.pb" "$scratch/out.pb" && echo "  (outputs byte-identical)" || echo "  (outputs differ)"
    fi
    rm -f "$data/.ours.pb"
    echo "  ratio: time $(sratio "$ut" "$T") (target <= 0.2), peak memory $(sratio "$um" "$M") (target <= 0.5)"
    merge_t="$ut"
  fi

  echo "split (.pb -> .cpb, 64 MiB chunks):"
  warm "$nc_pb/saved_model.pb"
  measure "unbound split --max-size 67108864" "$unbound" split "$nc_pb" "$scratch/out" --max-size 67108864 || true
  ut="$T"
  measure "zstd -3 -T2" zstd -q -3 -T2 -f "$nc_pb/saved_model.pb" -o "$scratch/out.zst"
  echo "  ratio: $(sratio "$ut" "$T") (target <= 3)"

  echo "split, nothing to split (writes .pb + fingerprint):"
  measure "unbound split (default max size)" "$unbound" split "$nc_pb" "$scratch/out" || true
  ut="$T"
  measure "cp -r + sync" sh -c 'cp -r "$1" "$2" && sync "$2/saved_model.pb"' sh "$nc_pb" "$scratch/out"
  # No target on this shape: the copy's fingerprint is that of the model's canonical form,
  # which a non-canonical .pb has to be encoded to (the fingerprint row below).
  echo "  ratio: $(sratio "$ut" "$T") (no target here: its fingerprint encodes the model)"

  echo "fingerprint (.pb):"
  measure "unbound fingerprint" "$unbound" fingerprint --json "$nc_pb" && cp "$data/.out" "$nc/ours.json"
  ut="$T"
  measure "TensorFlow CreateFingerprintDef (C++)" "$harness" fingerprint "$nc_pb" && cp "$data/.out" "$nc/tf.json"
  echo "  ratio: $(sratio "$ut" "$T") (target <= 0.1)"
  if [[ -n "$ut" && -n "$T" ]]; then
    d="$("$venv/bin/python" "$root/interop/noncanonical_fp.py" json "$nc/ours.json" "$nc/tf.json")"
    [[ -z "$d" ]] && echo "  (fingerprints equal)" || echo "  FINGERPRINTS DIFFER: $d"
  fi
  if [[ -f "$nc_cpb/saved_model.cpb" ]]; then
    measure "unbound fingerprint (.cpb)" "$unbound" fingerprint "$nc_cpb" || true
    measure "TensorFlow CreateFingerprintDef (C++, .cpb)" "$harness" fingerprint "$nc_cpb" || true
  fi

  echo "show:"
  measure "unbound show" "$unbound" show "$nc_pb" || true
  measure "saved_model_cli show --all" "$venv/bin/saved_model_cli" show --dir "$nc_pb" --all || true

  if [[ -f "$nc_cpb/saved_model.cpb" ]]; then
    echo "verify (.cpb):"
    measure "unbound verify" "$unbound" verify "$nc_cpb" || true
    echo "  ratio to unbound merge: $(sratio "$T" "$merge_t") (target <= 1)"
  fi
  echo "verify (.pb):"
  measure "unbound verify" "$unbound" verify "$nc_pb" || true
  soft=0
fi
rm -rf "$scratch" "$data/.time" "$data/.out" "$data/.err"

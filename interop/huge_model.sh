#!/usr/bin/env bash
# Past 2 GiB: builds a SavedModel whose serialized size exceeds protobuf's 2 GiB limit (in
# Rust: crates/savedmodel/examples/make_huge_model.rs), splits it with unbound's SavedModel
# splitter at TensorFlow's default maximum (1 GiB) into saved_model.cpb, and checks that
# TensorFlow 2.21's own C++ Merger (Merger::Read, through merger_harness summary) reads it into
# the same model: node count, every constant's tensor_content size and FNV-1a checksum, the
# running checksum and total bytes, and the model's byte size. TensorFlow cannot serialize a
# message that large back, so checksums are compared instead of bytes. unbound's own reader
# reads the file back too and must agree. Then `unbound optimize` runs the prune-identity plugin
# (built with our SDK) on it: the plugin gets and returns a graph past 2 GiB, removes the three
# Identity nodes the model has for it, and TensorFlow's Merger reads the optimized
# saved_model.cpb: three nodes fewer, every constant the same.
#
# usage: interop/huge_model.sh [--keep] [-- EXAMPLE_ARGS...]
#   EXAMPLE_ARGS go to make_huge_model (default model: 20 x 120 MiB float32 constants plus a
#   few small nodes, 2.34 GiB); --identities 3 is always added. For a quick check of the machinery on a small model:
#     UNBOUND_HUGE_ALLOW_SMALL=1 interop/huge_model.sh -- --consts 3 --mib 4 --max-size 8000000
#   (without the variable a model that is not past 2 GiB fails the size check).
#   --keep keeps the temporary directory and prints its path.
#
# Needs: ~5.1 GB free in ${TMPDIR:-/tmp} (less: see below), ~13 GB of available memory (TensorFlow's Merger peaks
# at ~6 GB on the default model, unbound optimize at ~12 GB), a few minutes (about 2.5 on 2 cores). Prints
#   huge model: ok (N nodes, S bytes)
# and exits 0, or prints what differs and exits 1.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
keep=0
example_args=()
while (( $# > 0 )); do
  case "$1" in
    --keep) keep=1; shift ;;
    --) shift; example_args=("$@"); break ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "huge_model.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

fail() { echo "huge model: FAIL: $*" >&2; exit 1; }

tmp_parent="${TMPDIR:-/tmp}"
free_kb="$(df -Pk "$tmp_parent" | awk 'NR==2 {print $4}')"
# The disk needed is two models at once (the input and optimize's output) plus 400 MiB. A CI
# machine's disk can be smaller: then the past-2 GiB size is skipped, saying so, and the same
# checks (TensorFlow's Merger, unbound's reader, optimize with a plugin) run on a small chunked
# model, so the script still tests something that can fail. UNBOUND_HUGE_REQUIRE_DISK=1 makes
# the shortage a failure instead.
if (( ${#example_args[@]} == 0 )); then
  need_kb=$(( 2 * 20 * 120 * 1024 + 400 * 1024 ))
  if (( free_kb < need_kb )); then
    msg="only $((free_kb / 1024)) MiB free in $tmp_parent, the 2.34 GiB model needs $((need_kb / 1024)) MiB"
    [[ "${UNBOUND_HUGE_REQUIRE_DISK:-0}" == 1 ]] && fail "$msg"
    echo "huge model: SKIPPED past 2 GiB ($msg); the same checks on a small chunked model" >&2
    export UNBOUND_HUGE_ALLOW_SMALL=1
    example_args=(--consts 3 --mib 4 --max-size 8000000)
  fi
fi
avail_kb="$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo 2>/dev/null || echo 0)"
if (( avail_kb > 0 && avail_kb < 7000000 )); then
  echo "huge_model.sh: warning: only $((avail_kb / 1024)) MiB of memory available;" \
       "TensorFlow's Merger needs ~6 GB for this model" >&2
fi

echo "huge_model.sh: building make_huge_model (release)" >&2
# (Two commands: with --example, cargo builds only examples of the packages named.)
(cd "$root" && cargo build --release --quiet -p unbound-savedmodel --example make_huge_model &&
  cargo build --release --quiet -p unbound-cli -p unbound-plugin-prune-identity)
release="${CARGO_TARGET_DIR:-$root/target}/release"
example="$release/examples/make_huge_model"
example_args+=(--identities 3)
harness="$("$here/build_harness.sh" | tail -n 1)"

work="$(mktemp -d "$tmp_parent/unbound-huge.XXXXXX")"
cleanup() {
  if (( keep )); then echo "huge_model.sh: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"

timed() {  # timed LABEL CMD... : runs CMD, reports wall time and peak RSS on stderr
  local label="$1"; shift
  if [[ -x /usr/bin/time ]]; then
    /usr/bin/time -f "huge_model.sh: $label: %e s, peak RSS %M KB" "$@"
  else
    "$@"
  fi
}

echo "huge_model.sh: generating and splitting into $work/model" >&2
timed "build + split + write (unbound)" \
  "$example" "$work/model" "${example_args[@]}" >"$work/ours.json" \
  || fail "make_huge_model failed"
[[ -f "$work/model/saved_model.cpb" ]] || fail "no saved_model.cpb was written (nothing needed splitting?)"
ls -l "$work/model/saved_model.cpb" >&2

echo "huge_model.sh: TensorFlow's Merger::Read on saved_model.cpb" >&2
timed "Merger::Read + summary (TensorFlow)" \
  "$harness" summary --type tensorflow.SavedModel "$work/model/saved_model" \
  >"$work/tf.json" 2>"$work/tf.err" \
  || { tail -n 5 "$work/tf.err" >&2; fail "TensorFlow's Merger could not read the file"; }
grep '^huge_model.sh:' "$work/tf.err" >&2 || true

echo "huge_model.sh: unbound's reader on saved_model.cpb" >&2
timed "read_cpb + summary (unbound)" \
  "$example" --read "$work/model" >"$work/unbound.json" \
  || fail "unbound could not read the file back"

echo "huge_model.sh: unbound optimize with the prune-identity plugin" >&2
# A small model (UNBOUND_HUGE_ALLOW_SMALL) is chunked at 8 MB so that the output is a .cpb too.
optimize_max=()
[[ "${UNBOUND_HUGE_ALLOW_SMALL:-0}" == 1 ]] && optimize_max=(--max-size 8000000)
timed "optimize (unbound, prune-identity plugin)" \
  "$release/unbound" optimize "$work/model" "$work/optimized" --device-type CPU "${optimize_max[@]}" \
  --plugin "$release/libunbound_plugin_prune_identity.so" >"$work/optimize.log" \
  || { cat "$work/optimize.log" >&2; fail "unbound optimize failed"; }
grep -- ' -> ' "$work/optimize.log" >&2 || true
[[ -f "$work/optimized/saved_model.cpb" ]] || fail "the optimized model was not written as saved_model.cpb"
rm -rf "$work/model"  # keep the disk needed at two models
echo "huge_model.sh: TensorFlow's Merger::Read on the optimized saved_model.cpb" >&2
timed "Merger::Read + summary of the optimized model (TensorFlow)" \
  "$harness" summary --type tensorflow.SavedModel "$work/optimized/saved_model" \
  >"$work/tf_optimized.json" 2>"$work/tf_optimized.err" \
  || { tail -n 5 "$work/tf_optimized.err" >&2; fail "TensorFlow's Merger could not read the optimized file"; }

python3 - "$work/ours.json" "$work/tf.json" "$work/unbound.json" "$work/tf_optimized.json" <<'EOF'
import json, os, sys

ours, tf, back = (json.load(open(p)) for p in sys.argv[1:4])
problems = []

def compare(label, got):
    if got["byte_size"] != ours["byte_size"]:
        problems.append(f"{label}: byte_size {got['byte_size']} != {ours['byte_size']}")
    g, o = got["graph"], ours["graph"]
    for key in ("nodes", "tensor_content_total_bytes", "tensor_content_fnv1a64"):
        if g[key] != o[key]:
            problems.append(f"{label}: graph.{key} {g[key]} != {o[key]}")
    gt, ot = g["node_tensors"], o["node_tensors"]
    if len(gt) != len(ot):
        problems.append(f"{label}: {len(gt)} tensors != {len(ot)}")
    for a, b in zip(gt, ot):
        for key, want in b.items():
            if a.get(key) != want:
                problems.append(f"{label}: tensor {b['name']}: {key} {a.get(key)} != {want}")

compare("TensorFlow", tf)
compare("unbound read-back", back)
optimized = json.load(open(sys.argv[4]))
g, o = optimized["graph"], ours["graph"]
if g["nodes"] != o["nodes"] - 3:
    problems.append(f"optimized: {g['nodes']} nodes, expected {o['nodes'] - 3} (3 Identity removed)")
for key in ("tensor_content_total_bytes", "tensor_content_fnv1a64", "node_tensors"):
    if g[key] != o[key]:
        problems.append(f"optimized: graph.{key} differs from the original's")
if not optimized["byte_size"] < ours["byte_size"]:
    problems.append(f"optimized: byte_size {optimized['byte_size']} not below {ours['byte_size']}")
if tf.get("meta_graphs") != 1 or tf.get("tags") != ["serve"]:
    problems.append(f"TensorFlow: meta_graphs {tf.get('meta_graphs')}, tags {tf.get('tags')}")
if ours["byte_size"] <= 2**31 - 1 and os.environ.get("UNBOUND_HUGE_ALLOW_SMALL") != "1":
    problems.append(f"the model is {ours['byte_size']} bytes, not past 2 GiB")
for p in problems[:40]:
    print("huge model: mismatch:", p, file=sys.stderr)
if problems:
    sys.exit(1)
n, s = ours["graph"]["nodes"], ours["byte_size"]
print(f"huge model: ok ({n} nodes, {s} bytes; optimized by a plugin: {g['nodes']} nodes)")
EOF

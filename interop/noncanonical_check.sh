#!/usr/bin/env bash
# Non-canonical SavedModels (issue 29) against TensorFlow 2.21.
#
# The models: tf2_multi_sig, tf1_large_consts (TensorFlow-made) and a many-node model
# (make_graph_model: 20,000 nodes, 100 functions). The variants: each model scrambled by
# crates/savedmodel/examples/scramble_model.rs with each class alone (reorder, defaults,
# unknown, split, empty, wrongtype, varint), all together and all but wrongtype, seeds 1 and 2;
# plus issue 29's own case, tf2_multi_sig's saved_model.pb with the four bytes `1a 00 0a 00`
# appended; plus scrambles (all classes, both seeds) of a TPU export of tf2_multi_sig, the
# input `export-tpu --to-cpu` takes; plus models protobuf C++ refuses for a fault that their
# canonical form leaves out (interop/refused_variants.py: a string not UTF-8 in an occurrence
# overridden, a oneof member replaced, a map entry replaced; map entries nesting past 100
# levels), as TensorFlow wrote tf2_multi_sig and scrambled: verify, fingerprint and split
# refuse each as TensorFlow's fingerprint does, and the control at the limit passes.
#
# Checked for each variant:
# - the scrambler itself: TensorFlow's Python protobuf parses the variant (made with
#   --no-entry-unknowns: see scramble_model.rs) to the original once unknown fields are
#   discarded, holding exactly the unknown fields the scrambler added
#   (noncanonical_parse_check.py); protobuf C++ parses the variant and its --no-entry-unknowns
#   twin to the same message (TensorFlow's saved_model_checksum is the hash of its
#   deterministic serialization of the parsed model), and for the classes that add no unknown
#   field, to the original (every hash of TensorFlow's fingerprint equal to the original's);
# - `unbound fingerprint --json` equals TensorFlow's CreateFingerprintDef (merger_harness
#   fingerprint): every hash field and the producer;
# - `unbound verify` accepts it;
# - each command that writes a model: `split --max-size` small (chunks), `split` (default:
#   nothing to split), `merge` of that small split and of the variant itself, `tags --duplicate
#   serve=serve,tpu`, `export-tpu` (not on the many-node model: nothing in its graph calls a
#   function), `export-tpu --to-cpu` of that export, `optimize` with the prune-identity
#   plugin: the fingerprint.pb it wrote equals TensorFlow's CreateFingerprintDef of the output
#   directory (hash fields and producer; the uuid is random), and `unbound verify` accepts the
#   output; the `.pb` that `merge`, `tags` and `optimize` write is byte for byte protobuf C++'s
#   deterministic serialization of its message (for `merge`: of what TensorFlow's Merger reads
#   from the input);
# - the variant split as it is read (scramble_model --split-at: a .cpb whose chunks keep the
#   scrambled encoding, as another writer's may): its fingerprint equals TensorFlow's, verify
#   accepts it with the fingerprint.pb written beside it, and its merge is TensorFlow's Merger
#   output, byte for byte.
#
# usage: interop/noncanonical_check.sh [--quick]
#   (prints "noncanonical check: N passed, M failed"; exits 1 if any failed)
#   --quick: seed 1 only, and no many-node model.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
quick=0
[ "${1:-}" = "--quick" ] && quick=1
venv="$(scripts/tf-venv.sh | tail -n 1)"
py="$venv/bin/python"
export TF_CPP_MIN_LOG_LEVEL=2
harness="$(interop/build_harness.sh | tail -n 1)"
cargo build --quiet --release -p unbound-cli -p unbound-plugin-prune-identity
cargo build --quiet --release -p unbound-savedmodel --example scramble_model --example make_graph_model
release="${CARGO_TARGET_DIR:-$root/target}/release"
unbound="$release/unbound"
scramble="$release/examples/scramble_model"
plugin="$release/libunbound_plugin_prune_identity.so"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

passed=0
failed=0
ok() { echo "ok $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
# Last lines of a command's output, on one line.
tail_of() { grep -v '^\s*$' "$1" | tail -n "${2:-2}" | tr '\n' ' ' | sed 's/ $//'; }

# tf_fp DIR OUT.json: TensorFlow's fingerprint of DIR (an error message on stdout if it fails).
tf_fp() {
  "$harness" fingerprint "$1" >"$2" 2>"$work/harness.err" || {
    echo "merger_harness fingerprint: $(tail_of "$work/harness.err" 1)"
    return 1
  }
}

# check_fingerprint NAME DIR: unbound fingerprint --json DIR equals TensorFlow's.
check_fingerprint() {
  local d
  if ! d="$(tf_fp "$2" "$work/tf.json")"; then fail "$1 fingerprint: $d"; return; fi
  if ! "$unbound" fingerprint --json "$2" >"$work/ours.json" 2>"$work/err"; then
    fail "$1 fingerprint: unbound fingerprint failed: $(tail_of "$work/err")"; return
  fi
  d="$("$py" interop/noncanonical_fp.py json "$work/ours.json" "$work/tf.json")"
  if [ -z "$d" ]; then ok "$1 fingerprint"; else fail "$1 fingerprint: unbound vs TensorFlow: $d"; fi
}

# check_verify NAME DIR: unbound verify DIR accepts it.
check_verify() {
  if "$unbound" verify "$2" >"$work/verify.out" 2>&1; then
    ok "$1 verify"
  else
    fail "$1 verify: $(tail_of "$work/verify.out" 3)"
  fi
}

# check_write NAME OUT CMD...: runs CMD (which writes the model directory OUT); then OUT's
# fingerprint.pb equals TensorFlow's fingerprint of OUT, and unbound verify accepts OUT.
check_write() {
  local name="$1" out="$2" d
  shift 2
  rm -rf "$out"
  if ! "$@" >"$work/cmd.out" 2>&1; then
    fail "$name: $(basename "$1") ${2:-} failed: $(tail_of "$work/cmd.out")"; return
  fi
  if [ ! -f "$out/fingerprint.pb" ]; then
    fail "$name fingerprint.pb: not written"
  elif ! d="$(tf_fp "$out" "$work/tf.json")"; then
    fail "$name fingerprint.pb: $d"
  else
    d="$("$py" interop/noncanonical_fp.py pb "$out/fingerprint.pb" "$work/tf.json")"
    if [ -z "$d" ]; then ok "$name fingerprint.pb"; else fail "$name fingerprint.pb vs TensorFlow: $d"; fi
  fi
  check_verify "$name" "$out"
}

# check_canonical NAME OUT [SRC]: OUT's saved_model.pb is byte for byte what protobuf C++ writes
# for its message (merger_harness read: TensorFlow's Merger::Read, then its deterministic
# serialization), and with SRC, what TensorFlow's Merger makes of SRC's model: every .pb a
# command writes from a model it changed or merged is canonical, whatever the input's encoding
# (a `split` with nothing to split copies its input as it is, and is not checked here).
check_canonical() {
  local name="$1" out="$2" src="${3:-$2}"
  [ -f "$out/saved_model.pb" ] || return 0  # not written: reported by check_write
  if ! "$harness" read --type tensorflow.SavedModel "$src/saved_model" "$work/tf_written.pb" \
      2>"$work/harness.err"; then
    fail "$name canonical: merger_harness read: $(tail_of "$work/harness.err" 1)"; return
  fi
  if cmp -s "$out/saved_model.pb" "$work/tf_written.pb"; then
    ok "$name saved_model.pb is TensorFlow's serialization"
  else
    fail "$name saved_model.pb differs from TensorFlow's deterministic serialization of $(basename "$src")"
  fi
}

# check_variant NAME DIR KIND: every check of a variant. KIND: tf2 (every command), tf1
# (export-tpu needs --function), nodes (no export-tpu), tpu (a TPU export: --to-cpu only).
check_variant() {
  local name="$1" dir="$2" kind="$3" small=2000
  [ "$kind" = nodes ] && small=200000
  check_fingerprint "$name" "$dir"
  check_verify "$name" "$dir"
  if [ "$kind" = tpu ]; then
    check_write "$name to-cpu" "$dir.cpu" "$unbound" export-tpu --to-cpu "$dir" "$dir.cpu"
    check_canonical "$name to-cpu" "$dir.cpu"
    return
  fi
  check_write "$name split $small" "$dir.split" "$unbound" split "$dir" "$dir.split" --max-size "$small"
  check_write "$name split" "$dir.split_pb" "$unbound" split "$dir" "$dir.split_pb"
  if [ -d "$dir.split" ]; then
    check_write "$name merge of split $small" "$dir.merged" "$unbound" merge "$dir.split" "$dir.merged"
    check_canonical "$name merge of split $small" "$dir.merged" "$dir.split"
  fi
  check_write "$name merge" "$dir.merged_pb" "$unbound" merge "$dir" "$dir.merged_pb"
  check_canonical "$name merge" "$dir.merged_pb" "$dir"
  check_write "$name tags --duplicate" "$dir.tags" "$unbound" tags "$dir" "$dir.tags" --duplicate serve=serve,tpu
  check_canonical "$name tags --duplicate" "$dir.tags"
  case "$kind" in
    tf2) check_write "$name export-tpu" "$dir.tpu" "$unbound" export-tpu "$dir" "$dir.tpu" ;;
    tf1) check_write "$name export-tpu" "$dir.tpu" "$unbound" export-tpu "$dir" "$dir.tpu" \
      --function __inference_scale_and_shift_350 ;;
  esac
  if [ -d "$dir.tpu" ]; then
    check_canonical "$name export-tpu" "$dir.tpu"
    check_write "$name export-tpu --to-cpu" "$dir.cpu" "$unbound" export-tpu --to-cpu "$dir.tpu" "$dir.cpu"
    check_canonical "$name export-tpu --to-cpu" "$dir.cpu"
  fi
  check_write "$name optimize" "$dir.opt" "$unbound" optimize "$dir" "$dir.opt" --plugin "$plugin" --device-type CPU
  check_canonical "$name optimize" "$dir.opt"
  # Outputs are checked: drop them (the many-node model's add up).
  rm -rf "$dir".split* "$dir".merged* "$dir.tags" "$dir.tpu" "$dir.cpu" "$dir.opt"
}

# check_cpb_variant NAME SRC CLASSES SEED KIND: the variant written as a .cpb split as it is
# read (scramble_model --split-at: its chunks keep the scrambled encoding, as another writer's
# .cpb may; `unbound split` splits a model mostly not canonical from its canonical form, so its
# .cpb would not test this): fingerprinted as TensorFlow does, verified (the fingerprint.pb
# written with it included), and merged into what TensorFlow's Merger makes of it.
check_cpb_variant() {
  local name="$1.cpb" out="$work/v/$1.cpb" small=2000
  [ "$5" = nodes ] && small=200000
  if ! "$scramble" "$2" "$out" --classes "$3" --seed "$4" --split-at "$small" >/dev/null 2>"$work/err"; then
    fail "$name scramble --split-at: $(tail_of "$work/err")"; return
  fi
  if [ ! -f "$out/saved_model.cpb" ]; then fail "$name: no saved_model.cpb written"; return; fi
  check_fingerprint "$name" "$out"
  check_verify "$name" "$out"
  check_write "$name merge" "$out.merged" "$unbound" merge "$out" "$out.merged"
  check_canonical "$name merge" "$out.merged" "$out"
  rm -rf "$out" "$out.merged"
}

# LABEL or LABEL=CLASSES: each class alone, all together, and all but wrongtype (which
# unbound refuses today: a failure there hides the others).
classes="reorder defaults unknown split empty wrongtype varint all
  nowrongtype=reorder,defaults,unknown,split,empty,varint"
seeds="1 2"
[ "$quick" = 1 ] && seeds=1
manifest="$work/python.manifest"
: >"$manifest"

# scramble_variant NAME SRC CLASSES SEED: writes $work/v/NAME (and NAME.py, the
# --no-entry-unknowns twin) and checks the scrambler with protobuf C++; Python's parse is
# checked for all variants at once, below.
scramble_variant() {
  local name="$1" src="$2" cls="$3" seed="$4" out="$work/v/$1" d
  "$scramble" "$src" "$out" --classes "$cls" --seed "$seed" >"$out.json" 2>"$work/err" ||
    { fail "$name scramble: $(tail_of "$work/err")"; return 1; }
  "$scramble" "$src" "$out.py" --classes "$cls" --seed "$seed" --no-entry-unknowns >"$out.py.json" 2>"$work/err" ||
    { fail "$name scramble --no-entry-unknowns: $(tail_of "$work/err")"; return 1; }
  echo "$name $src/saved_model.pb $out.py/saved_model.pb $out.py.json" >>"$manifest"
  if ! d="$(tf_fp "$out" "$work/v.json")" || ! d="$(tf_fp "$out.py" "$work/v.py.json")"; then
    fail "$name scrambler: protobuf C++: $d"; return 1
  fi
  d="$("$py" interop/noncanonical_fp.py same "$work/v.json" "$work/v.py.json" saved_model_checksum)"
  case "$cls" in
    reorder|defaults|split|varint)
      d="$d$("$py" interop/noncanonical_fp.py same "$work/v.json" "$work/$(basename "$src").orig.json")" ;;
  esac
  if [ -z "$d" ]; then ok "$name scrambler (protobuf C++)"; else fail "$name scrambler (protobuf C++): $d"; fi
  rm -rf "$out.py"/variables
}

mkdir -p "$work/v" "$work/models"
models="tf2_multi_sig:tf2 tf1_large_consts:tf1"
if [ "$quick" = 0 ]; then
  "$release/examples/make_graph_model" "$work/models/nodes" --nodes 20000 --functions 100 \
    --max-size 1000000 >/dev/null 2>&1
  models="$models nodes:nodes"
fi
for entry in $models; do
  model="${entry%%:*}" kind="${entry#*:}"
  src="testdata/models/$model"
  [ "$model" = nodes ] && src="$work/models/nodes/model_pb"
  tf_fp "$src" "$work/$(basename "$src").orig.json" >/dev/null
  echo "== $model"
  for label in $classes; do
    cls="${label#*=}" label="${label%%=*}"
    for seed in $seeds; do
      name="$model.$label.$seed"
      scramble_variant "$name" "$src" "$cls" "$seed" || continue
      check_variant "$name" "$work/v/$name" "$kind"
      rm -rf "$work/v/$name"
      check_cpb_variant "$name" "$src" "$cls" "$seed" "$kind"
    done
  done
done

echo "== issue 29: tf2_multi_sig with 1a 00 0a 00 appended"
issue="$work/v/tf2_multi_sig.issue29"
mkdir -p "$issue"
cp -r testdata/models/tf2_multi_sig/variables "$issue/"
{ cat testdata/models/tf2_multi_sig/saved_model.pb; printf '\x1a\x00\x0a\x00'; } >"$issue/saved_model.pb"
check_variant "tf2_multi_sig.issue29" "$issue" tf2

# check_refused NAME DIR: a model protobuf C++ refuses to parse (TensorFlow's fingerprint of it
# fails: the oracle) is refused by unbound verify, fingerprint and split too, and split writes
# nothing.
check_refused() {
  local name="$1" dir="$2"
  if "$harness" fingerprint "$dir" >/dev/null 2>&1; then
    fail "$name: TensorFlow parses it (the variant does not hold the fault it should)"; return
  fi
  if "$unbound" verify "$dir" >"$work/cmd.out" 2>&1; then
    fail "$name verify: accepted a model TensorFlow refuses"
  else
    ok "$name verify refuses it"
  fi
  if "$unbound" fingerprint "$dir" >"$work/cmd.out" 2>&1; then
    fail "$name fingerprint: fingerprinted a model TensorFlow refuses"
  else
    ok "$name fingerprint refuses it"
  fi
  rm -rf "$dir.split"
  if "$unbound" split "$dir" "$dir.split" --max-size 2000 >"$work/cmd.out" 2>&1 || [ -e "$dir.split" ]; then
    fail "$name split: wrote a split of a model TensorFlow refuses"
  else
    ok "$name split refuses it"
  fi
}

echo "== models protobuf C++ refuses for a fault the canonical form leaves out (refused_variants.py)"
# tf2_multi_sig as TensorFlow wrote it, and scrambled (all classes), which unbound reads as its
# canonical form, made by the encoder that also checks what protobuf C++ checks.
"$scramble" testdata/models/tf2_multi_sig "$work/models/scrambled" --classes all --seed 1 >/dev/null
for base in testdata/models/tf2_multi_sig "$work/models/scrambled"; do
  for fault in utf8-overridden utf8-oneof utf8-map-entry utf8-map-value deep-entries-101 \
      deep-entries-100; do
    name="$(basename "$base").$fault" dir="$work/v/$(basename "$base").$fault"
    mkdir -p "$dir"
    cp -r "$base/variables" "$dir/"
    "$py" interop/refused_variants.py "$fault" "$base/saved_model.pb" "$dir/saved_model.pb"
    if [ "$fault" = deep-entries-100 ]; then
      # The control: at protobuf C++'s nesting limit, parsed.
      check_fingerprint "$name" "$dir"
      check_verify "$name" "$dir"
      check_write "$name split 2000" "$dir.split" "$unbound" split "$dir" "$dir.split" --max-size 2000
    else
      check_refused "$name" "$dir"
    fi
    rm -rf "$dir" "$dir".*
  done
done

echo "== scrambled TPU exports of tf2_multi_sig (export-tpu --to-cpu's input)"
"$unbound" export-tpu testdata/models/tf2_multi_sig "$work/models/tpu" >/dev/null
rm -f "$work/models/tpu/fingerprint.pb"
tf_fp "$work/models/tpu" "$work/tpu.orig.json" >/dev/null
for seed in $seeds; do
  name="tf2_multi_sig.tpu.all.$seed"
  scramble_variant "$name" "$work/models/tpu" all "$seed" || continue
  check_variant "$name" "$work/v/$name" tpu
done

echo "== the scrambler against TensorFlow's Python protobuf"
"$py" interop/noncanonical_parse_check.py "$manifest" >"$work/python.out" 2>"$work/python.err" || true
grep -E '^(ok|FAIL) ' "$work/python.out" || tail -n 5 "$work/python.err"
passed=$((passed + $(grep -c '^ok ' "$work/python.out" || true)))
failed=$((failed + $(grep -c '^FAIL ' "$work/python.out" || true)))
if [ "$(grep -c -E '^(ok|FAIL) ' "$work/python.out" || true)" -ne "$(wc -l <"$manifest")" ]; then
  fail "noncanonical_parse_check.py: $(tail_of "$work/python.err")"
fi

echo "noncanonical check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

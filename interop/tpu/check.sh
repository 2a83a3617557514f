#!/usr/bin/env bash
# The TPU export against TensorFlow 2.21 (issue 11). TensorFlow saves four TF2 models
# (make_models.py: a Keras model, one with function_aliases, one whose chosen function reads
# variables, one with several signatures); for each, `unbound export-tpu` writes {serve,tpu}
# beside {serve}, with and without BatchFunction, and then:
# - saved_model_cli show --all lists both tag-sets;
# - TensorFlow loads {serve,tpu} with the TF2 and the TF1 loader, and running it fails only
#   with the missing-kernel error of a TPU op (the graph is valid up to kernel lookup);
# - {serve} still gives the original outputs, bit for bit;
# - `unbound export-tpu --to-cpu` of the export (keeping BatchFunction, and with --unbatch)
#   runs on CPU and gives the original outputs bit for bit.
# Also: `unbound tags --duplicate` (TensorFlow runs the copy), --tpu-only, a .cpb input (a
# model split with a small --max-size, exported and written split, every MetaGraphDef's graph
# in chunks of its own: TensorFlow's Merger reads it equal to the unsplit export, and the
# fingerprint written is TensorFlow's), and the refusals (unknown function, existing tag-set, no MetaGraphDef), which must
# exit 1 and write nothing.
#
# TensorFlow's Python loaders and saved_model_cli (2.21) read only saved_model.pb: the .cpb
# export is read by TensorFlow's C++ Merger (merger_harness, when given) into a saved_model.pb
# beside the export's variables, and that is what the loaders check.
#
# usage: interop/tpu/check.sh UNBOUND PYTHON [MERGER_HARNESS]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
unbound="$1"
py="$2"
harness="${3:-}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export TF_CPP_MIN_LOG_LEVEL=2
quiet() { grep -v -e '^WARNING' -e '^I0000' -e 'absl::InitializeLog' -e 'Instructions for updating' -e 'Use `tf.saved_model.load` instead' || true; }
fail() { echo "FAIL tpu: $*"; exit 1; }

"$py" "$here/make_models.py" "$work/models" 2>&1 | quiet
jobs="$work/jobs"
: >"$jobs"
job() { echo "$*" >>"$jobs"; }
batch="max_batch_size=8,batch_timeout_micros=100,num_batch_threads=1"
for m in keras aliases variables multi_sig; do
  src="$work/models/$m"
  spec="$src.json"
  fn="$("$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['function'])" "$spec")"
  for variant in plain batch; do
    out="$work/$m.$variant"
    extra=()
    [ "$variant" = batch ] && extra=(--batch "$batch")
    "$unbound" export-tpu "$src" "$out" --function "$fn" "${extra[@]}" >"$work/log" 2>&1 ||
      fail "$m $variant: export-tpu: $(cat "$work/log")"
    job show "$out"
    job tpu "$src" "$out" "$spec"
    "$unbound" export-tpu --to-cpu "$out" "$out.cpu" >/dev/null
    job cpu "$src" "$out.cpu" "$spec"
    if [ "$variant" = batch ]; then
      "$unbound" export-tpu --to-cpu --unbatch "$out" "$out.unbatched" >/dev/null
      job cpu "$src" "$out.unbatched" "$spec"
    fi
  done
done

# `unbound tags --duplicate`: TensorFlow lists both tag-sets and runs the copy.
"$unbound" tags "$work/models/variables" "$work/variables.dup" --duplicate serve=serve,tpu >/dev/null
job show "$work/variables.dup"
job cpu "$work/models/variables" "$work/variables.dup" "$work/models/variables.json"

# --tpu-only, and a chunked input written chunked.
m=variables
"$unbound" export-tpu "$work/models/$m" "$work/$m.tpu_only" --tpu-only >/dev/null
job show "$work/$m.tpu_only" --tpu-only
job tpu "$work/models/$m" "$work/$m.tpu_only" "$work/models/$m.json"
m=aliases
"$unbound" split "$work/models/$m" "$work/$m.cpb_in" --max-size 2000 >/dev/null
[ -f "$work/$m.cpb_in/saved_model.cpb" ] || fail "split did not write a .cpb"
"$unbound" export-tpu "$work/$m.cpb_in" "$work/$m.cpb_out" --function tpu_predict --max-size 2000 --batch "$batch" >/dev/null
[ -f "$work/$m.cpb_out/saved_model.cpb" ] || fail "export of a .cpb with --max-size 2000 did not write a .cpb"
"$unbound" export-tpu --to-cpu "$work/$m.cpb_out" "$work/$m.cpb_cpu" --max-size 2000 >/dev/null
[ -f "$work/$m.cpb_cpu/saved_model.cpb" ] || fail "--to-cpu with --max-size 2000 did not write a .cpb"
for d in cpb_out cpb_cpu; do
  if [ -n "$harness" ]; then
    mkdir "$work/$m.$d.tf"
    cp -r "$work/$m.$d/variables" "$work/$m.$d.tf/"
    "$harness" read --type tensorflow.SavedModel "$work/$m.$d/saved_model" "$work/$m.$d.tf/saved_model.pb" >/dev/null 2>"$work/harness.err" ||
      fail "TensorFlow's Merger cannot read $d/saved_model.cpb: $(tail -n 3 "$work/harness.err")"
  else
    "$unbound" merge "$work/$m.$d" "$work/$m.$d.tf" >/dev/null
  fi
done
job show "$work/$m.cpb_out.tf"
job tpu "$work/models/$m" "$work/$m.cpb_out.tf" "$work/models/$m.json"
job cpu "$work/models/$m" "$work/$m.cpb_cpu.tf" "$work/models/$m.json"

# The split layout of exports (every MetaGraphDef's graph split, not only the first one's as in
# TensorFlow's algorithm), on the export above and on a duplicated tag-set written split:
# - both graphs have chunks of their own and the root chunk holds neither graph whole
#   (`unbound inspect` for the chunk tree, TensorFlow's parse of the merged model for the sizes);
# - TensorFlow's Merger reads the .cpb into the model the same export makes unsplit (.pb);
# - the fingerprint.pb written equals TensorFlow's CreateFingerprintDef of the output.
"$unbound" export-tpu "$work/$m.cpb_in" "$work/$m.pb_out" --function tpu_predict --batch "$batch" >/dev/null
[ -f "$work/$m.pb_out/saved_model.pb" ] || fail "export at the default --max-size did not write a .pb"
"$unbound" tags "$work/models/variables" "$work/variables.dup_cpb" --duplicate serve=serve,tpu --max-size 2000 >/dev/null
"$unbound" tags "$work/models/variables" "$work/variables.dup_pb" --duplicate serve=serve,tpu >/dev/null
for pair in "$m.cpb_out:$m.pb_out" "variables.dup_cpb:variables.dup_pb"; do
  split_dir="$work/${pair%%:*}"
  whole="$work/${pair##*:}"
  [ -f "$split_dir/saved_model.cpb" ] || fail "${pair%%:*}: no saved_model.cpb"
  "$unbound" inspect --json "$split_dir/saved_model.cpb" >"$split_dir.inspect.json"
  if [ -n "$harness" ]; then
    "$harness" read --type tensorflow.SavedModel "$split_dir/saved_model" "$split_dir.merged.pb" >/dev/null 2>"$work/harness.err" ||
      fail "TensorFlow's Merger cannot read ${pair%%:*}/saved_model.cpb: $(tail -n 3 "$work/harness.err")"
    "$harness" fingerprint "$split_dir" "$split_dir.tf_fingerprint.pb" >/dev/null 2>"$work/harness.err" ||
      fail "TensorFlow cannot fingerprint ${pair%%:*}: $(tail -n 3 "$work/harness.err")"
    job fingerprint "$split_dir/fingerprint.pb" "$split_dir.tf_fingerprint.pb"
  else
    "$unbound" merge "$split_dir" "$split_dir.merged" >/dev/null
    cp "$split_dir.merged/saved_model.pb" "$split_dir.merged.pb"
  fi
  job same_model "$split_dir.merged.pb" "$whole/saved_model.pb"
  job layout "$split_dir.inspect.json" "$split_dir.merged.pb"
done
mkdir "$work/variables.dup_cpb.tf"
cp -r "$work/variables.dup_cpb/variables" "$work/variables.dup_cpb.tf/"
cp "$work/variables.dup_cpb.merged.pb" "$work/variables.dup_cpb.tf/saved_model.pb"
job cpu "$work/models/variables" "$work/variables.dup_cpb.tf" "$work/models/variables.json"
# TensorFlow 2.21 has been seen to abort at random in a process that mixes TF1 sessions and
# TF2 loading ("Mutex corrupt: both reader and writer lock held", SIGABRT); a process killed
# by a signal runs every check again, once. A check that fails exits 1 and is not retried.
set +e
"$py" "$here/check.py" jobs "$jobs" >"$work/tf.log" 2>&1
code=$?
set -e
if [ "$code" -gt 128 ]; then
  quiet <"$work/tf.log"
  echo "note: TensorFlow died of signal $((code - 128)); running its checks again"
  set +e
  "$py" "$here/check.py" jobs "$jobs" >"$work/tf.log" 2>&1
  code=$?
  set -e
fi
if [ "$code" = 0 ]; then
  grep -e '^ok ' -e '^note' "$work/tf.log" || true
else
  quiet <"$work/tf.log"
  fail "TensorFlow checks (see above)"
fi

# Refusals: exit 1, a message naming the fault, nothing written.
refuse() { # WHAT EXPECTED-TEXT ARGS...
  local what="$1" text="$2"; shift 2
  rm -rf "$work/refused"
  set +e
  "$unbound" "$@" >"$work/log" 2>&1
  local code=$?
  set -e
  [ "$code" = 1 ] || fail "$what: exit $code, expected 1: $(cat "$work/log")"
  grep -q "$text" "$work/log" || fail "$what: message lacks '$text': $(cat "$work/log")"
  [ ! -e "$work/refused" ] || fail "$what: wrote output"
  echo "ok refused: $what"
}
refuse "unknown function" 'no function alias, concrete function or signature is named "nope"' \
  export-tpu "$work/models/aliases" "$work/refused" --function nope
refuse "existing tag-set" 'a MetaGraphDef tagged {serve,tpu} already exists' \
  export-tpu "$work/aliases.plain" "$work/refused"
refuse "duplicate tag-set" 'a MetaGraphDef tagged {serve} already exists' \
  tags "$work/models/aliases" "$work/refused" --duplicate serve=serve
mkdir -p "$work/empty"
"$py" -c "
from tensorflow.core.protobuf import saved_model_pb2
m = saved_model_pb2.SavedModel(saved_model_schema_version=1)
open('$work/empty/saved_model.pb', 'wb').write(m.SerializeToString())" 2>&1 | quiet
refuse "no MetaGraphDef" 'holds no MetaGraphDef' export-tpu "$work/empty" "$work/refused"
echo "tpu: ok"

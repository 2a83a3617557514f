#!/usr/bin/env bash
# `unbound optimize` with the two example plugins built with our SDK (prune-identity,
# fold-constants) on TensorFlow-made SavedModels: the optimized models load in TensorFlow 2.21
# and give the same outputs as the originals on the same inputs, and the plugins did their
# work (fewer Identity nodes; constant Mul/AddV2/Sub folded).
#
# Both plugins register for device type CPU, and TensorFlow allows one plugin per device type,
# so they run one after the other (two `unbound optimize` calls). TF2 function bodies carry no
# device, so `--device-type CPU` makes the CPU plugins run on them.
#
# Then at scale: a graph-heavy model (make_graph_model: 20,000 nodes, 200 functions, no Identity)
# optimized with prune-identity, which changes nothing there, in and out of --isolate: every
# function is a plugin call, and the written model is the input byte for byte (an unchanged
# graph is never decoded or re-encoded); TensorFlow's C++ Merger reads it as the input.
#
# usage: interop/grappler/optimize_outputs.sh   (needs scripts/tf-venv.sh's TensorFlow)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
py="$venv/bin/python"
export TF_CPP_MIN_LOG_LEVEL=2
cargo build --quiet --release -p unbound-cli -p unbound-plugin-prune-identity -p unbound-plugin-fold-constants
cargo build --quiet --release -p unbound-savedmodel --example make_graph_model
harness="$(interop/build_harness.sh | tail -n 1)"
unbound="$root/target/release/unbound"
prune="$root/target/release/libunbound_plugin_prune_identity.so"
fold="$root/target/release/libunbound_plugin_fold_constants.so"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

failed=0
"$py" interop/grappler/optimize_outputs.py make "$work/foldable" 2>"$work/make.err" || {
  echo "FAIL making the test model: $(tail -n 3 "$work/make.err")"; exit 1; }
# A chunked model too: read from saved_model.cpb and written back split (--max-size 20000).
"$unbound" split testdata/models/tf1_large_consts "$work/tf1_chunked" --max-size 20000 >/dev/null
for model in "$work/foldable" testdata/models/tf2_multi_sig testdata/models/tf1_large_consts "$work/tf1_chunked"; do
  name="$(basename "$model")"
  size=""
  [ "$name" = tf1_chunked ] && size="--max-size 20000"
  for isolate in "" "--isolate"; do
    out="$work/$name.pruned$isolate"
    if ! "$unbound" optimize "$model" "$out" --plugin "$prune" --device-type CPU $isolate $size >"$work/log" 2>&1 ||
       ! "$unbound" optimize "$out" "$out.folded" --plugin "$fold" --device-type CPU $isolate $size >>"$work/log" 2>&1; then
      echo "FAIL unbound optimize $name $isolate: $(tail -n 3 "$work/log")"; failed=$((failed + 1)); continue
    fi
    grep -E " -> " "$work/log" | head -n 4 | sed "s|^|  $name: |"
    expect=""
    [ "$name" = foldable ] && expect="--expect-fewer Identity Mul AddV2 Sub"
    judged="$out.folded"
    if [ "$name" = tf1_chunked ]; then
      # TensorFlow's Python loader reads only .pb: TensorFlow's C++ Merger turns the optimized
      # .cpb into the .pb that TensorFlow then loads and runs.
      if [ -f "$out.folded/saved_model.cpb" ] && [ ! -f "$out.folded/saved_model.pb" ]; then
        echo "PASS $name $isolate: the optimized model is written chunked (saved_model.cpb)"
      else
        echo "FAIL $name $isolate: expected saved_model.cpb only in $out.folded"; failed=$((failed + 1))
      fi
      judged="$out.tf-merged"
      cp -r "$out.folded" "$judged" && rm "$judged/saved_model.cpb"
      "$harness" read --type tensorflow.SavedModel "$out.folded/saved_model" "$judged/saved_model.pb" \
        2>"$work/harness.err" || { echo "FAIL $name: TensorFlow's Merger: $(tail -n 1 "$work/harness.err")"; failed=$((failed + 1)); }
    fi
    original="$model"
    [ "$name" = tf1_chunked ] && original=testdata/models/tf1_large_consts
    "$py" interop/grappler/optimize_outputs.py compare "$original" "$judged" $expect 2>"$work/cmp.err" |
      sed "s|$work/||g" || { failed=$((failed + 1)); tail -n 3 "$work/cmp.err"; }
  done
done
"$root/target/release/examples/make_graph_model" "$work/many" --nodes 20000 --functions 200 >/dev/null 2>&1
"$harness" read --type tensorflow.SavedModel "$work/many/model_pb/saved_model" "$work/many.tf.pb" 2>/dev/null
for isolate in "" "--isolate"; do
  out="$work/many.optimized$isolate"
  if ! "$unbound" optimize "$work/many/model_pb" "$out" --plugin "$prune" --device-type CPU $isolate >"$work/log" 2>&1; then
    echo "FAIL unbound optimize many $isolate: $(tail -n 3 "$work/log")"; failed=$((failed + 1)); continue
  fi
  calls="$(grep -c 'unchanged (ABORTED)' "$work/log" || true)"
  if [ "$calls" != 201 ]; then
    echo "FAIL many $isolate: expected 201 unchanged calls (main graph + 200 functions), got $calls"; failed=$((failed + 1))
  elif ! cmp -s "$work/many/model_pb/saved_model.pb" "$out/saved_model.pb"; then
    echo "FAIL many $isolate: the unchanged model was not written back as read"; failed=$((failed + 1))
  elif ! "$harness" read --type tensorflow.SavedModel "$out/saved_model" "$work/many.out.tf.pb" 2>"$work/harness.err" ||
       ! cmp -s "$work/many.tf.pb" "$work/many.out.tf.pb"; then
    echo "FAIL many $isolate: TensorFlow's Merger reads it differently: $(tail -n 1 "$work/harness.err")"; failed=$((failed + 1))
  else
    echo "PASS many $isolate: 201 plugin calls, the model written back byte for byte, TensorFlow reads it as the input"
  fi
done
if [ "$failed" -ne 0 ]; then
  echo "optimize_outputs: $failed failed"
  exit 1
fi
echo "optimize_outputs: all passed"

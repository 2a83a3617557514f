#!/usr/bin/env bash
# The TensorFlow interop suite: TensorFlow 2.21's own code reads what unbound writes.
#
# - our schemas equal TensorFlow's descriptors (proto_schema_check.py);
# - every .cpb `unbound split` / `unbound proto split` writes for TensorFlow-made models, with
#   max sizes small enough to force every kind of chunk and with every compression, is read by
#   TensorFlow's C++ Merger (merger_harness) into a message equal to the original; and
#   `unbound merge` of the same file equals what TensorFlow's Merger made of it;
# - the plugin host's util API answers as TensorFlow's (grappler/probe_check.sh), its static
#   shape inference agrees with TensorFlow's GraphProperties (grappler/shapes_check.sh), an
#   SDK-built plugin hears the same answers in TensorFlow and in unbound
#   (grappler/sdk_probe_check.sh), and
#   models it optimizes give TensorFlow the same outputs (grappler/optimize_outputs.sh);
# - TensorFlow itself loads and runs the SDK's example plugins from a tensorflow-plugins
#   directory (grappler_sdk_in_tf.sh);
# - a SavedModel past 2 GiB built in Rust is read by TensorFlow's Merger, and so is what
#   `unbound optimize` makes of it with a plugin (huge_model.sh), and what `unbound export-tpu`
#   makes of a model past 2 GiB: two MetaGraphDefs past 2 GiB each (tpu/huge_export.sh), unless
#   UNBOUND_SKIP_HUGE=1;
# - DTensor on 8 logical CPU devices and `unbound layout` agree on meshes, layouts, OpShardings
#   and array components (dtensor/check.sh);
# - `unbound plan` gives every output of ~90 small programs the layout DTensor gives it, and
#   refuses where DTensor refuses (plan/check.sh);
# - DTensor checkpoints TensorFlow writes are read (every variable, random boxes) and resharded
#   by unbound, and TensorFlow restores the results into DVariables (reshard/check.sh);
# - `unbound convert`: TensorFlow checkpoints to Hugging Face's safetensors layout, read by the
#   `safetensors` package equal to TensorFlow's values, and back, read and restored by
#   TensorFlow; PyTorch DCP's Hugging Face writer layout assembled (convert/check.sh);
# - `unbound scan` finds every denylisted node TensorFlow's parser sees, and at least what
#   `saved_model_cli scan` reports (scan/check.sh);
# - `unbound export-tpu` of TensorFlow-made models loads in TensorFlow with the TF2 and TF1
#   loaders and fails only for want of TPU kernels, keeps {serve} running, and its --to-cpu
#   reverse gives the original outputs bit for bit, batched or not (tpu/check.sh);
# - the Python package is checked against TensorFlow by its pytest suite, which
#   scripts/python_check.sh runs (python_checkpoint.sh and python_splitter_check.sh run parts
#   of it on their own);
# - hostile inputs: what TensorFlow writes passes `unbound verify`, and on mutated model files
#   verify, split and merge are never looser than TensorFlow's Merger (hostile_check.sh);
# - non-canonical models (issue 29: TensorFlow-made models scrambled by scramble_model, each
#   class of non-canonical encoding alone and together): `unbound fingerprint` equals
#   TensorFlow's, `verify` accepts them, and every command that writes a model writes the
#   fingerprint.pb TensorFlow computes for its output (noncanonical_check.sh);
# - `unbound externalize` of TensorFlow-made models (TF2 with constants in nested functions,
#   TF1 frozen, TF1 with variables, Keras), from .pb and .cpb, is served by TensorFlow's C++
#   LoadSavedModel and loaded by tf.saved_model.load and the TF1 loader with outputs bit for bit
#   the original's, verifies, and has TensorFlow's fingerprint; `--inline` round-trips; the
#   README's loader table is measured (externalize/check.sh); past 2 GiB, a 2.4 GB .cpb of
#   constants becomes a .pb the C++ loader serves (externalize/huge.sh).
#
# usage: interop/run.sh     (needs scripts/tf-venv.sh's TensorFlow; builds what it needs)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
py="$venv/bin/python"
export TF_CPP_MIN_LOG_LEVEL=2
harness="$(interop/build_harness.sh | tail -n 1)"
cargo build --quiet --release -p unbound-cli
cargo build --quiet --release -p unbound-proto --example dump_descriptors
unbound="$root/target/release/unbound"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

failed=0
echo "== schema"
"$root/target/release/examples/dump_descriptors" "$work/fds.bin" >/dev/null
"$py" interop/proto_schema_check.py "$work/fds.bin" || failed=$((failed + 1))

echo "== unbound split -> TensorFlow Merger"
manifest="$work/manifest"
: >"$manifest"
tf_read() { # TYPE PREFIX OUT
  "$harness" read --type "$1" "$2" "$3" 2>"$work/harness.err" || {
    echo "FAIL harness read $2: $(tail -n 1 "$work/harness.err")"
    return 1
  }
}
# Max sizes: the default (nothing split), then smaller and smaller until every node, constant
# and function is a chunk of its own. Below 1000 bytes TensorFlow's algorithm moves small
# constants' typed values into tensor_content, so those compare by tensor value.
sizes="1073741824 100000 20000 5000 2000 800 300 50"
for model in tf1_large_consts tf2_multi_sig; do
  src="testdata/models/$model"
  tf_read tensorflow.SavedModel "$src/saved_model" "$work/$model.orig.pb" || { failed=$((failed + 1)); continue; }
  for comp in brotli zstd snappy none; do
    for max in $sizes; do
      name="$model.$comp.$max"
      out="$work/$name"
      if ! "$unbound" split "$src" "$out" --max-size "$max" --compression "$comp" >/dev/null 2>"$work/err"; then
        echo "FAIL $name: unbound split: $(tail -n 1 "$work/err")"; failed=$((failed + 1)); continue
      fi
      tf_read tensorflow.SavedModel "$out/saved_model" "$work/$name.tf.pb" || { failed=$((failed + 1)); continue; }
      "$unbound" merge "$out" "$out.merged" >/dev/null
      mode=exact; [ "$max" -lt 1000 ] && mode=tensor-values
      echo "$name.tf-vs-original tensorflow.SavedModel $mode $work/$model.orig.pb $work/$name.tf.pb" >>"$manifest"
      echo "$name.unbound-vs-tf tensorflow.SavedModel exact $work/$name.tf.pb $out.merged/saved_model.pb" >>"$manifest"
    done
  done
done
tf_read tensorflow.GraphDef testdata/models/frozen_graph "$work/frozen.orig.pb" || failed=$((failed + 1))
for max in 1000 100 10; do
  name="frozen_graph.$max"
  "$unbound" proto split --type tensorflow.GraphDef testdata/models/frozen_graph.pb "$work/$name" --max-size "$max" >/dev/null 2>&1
  tf_read tensorflow.GraphDef "$work/$name" "$work/$name.tf.pb" || { failed=$((failed + 1)); continue; }
  "$unbound" proto merge --type tensorflow.GraphDef "$work/$name" "$work/$name.ours.pb" >/dev/null
  mode=exact; [ "$max" -lt 1000 ] && mode=tensor-values
  echo "$name.tf-vs-original tensorflow.GraphDef $mode $work/frozen.orig.pb $work/$name.tf.pb" >>"$manifest"
  echo "$name.unbound-vs-tf tensorflow.GraphDef exact $work/$name.tf.pb $work/$name.ours.pb" >>"$manifest"
done
"$py" interop/compare_models.py "$manifest" | tee "$work/compare.out" | grep -v '^ok ' || true
grep -q ' 0 failed$' "$work/compare.out" || failed=$((failed + 1))

bash interop/fingerprint_check.sh || failed=$((failed + 1))
bash interop/bundle_check.sh || failed=$((failed + 1))
bash interop/show_check.sh || failed=$((failed + 1))
bash interop/hostile_check.sh || failed=$((failed + 1))
# --quick: seed 1, the two TensorFlow-made models (the full run, with the many-node model
# and a second seed, takes three times as long: run it by hand).
bash interop/noncanonical_check.sh --quick || failed=$((failed + 1))
echo "== graph-optimizer plugins"
bash interop/grappler/probe_check.sh || failed=$((failed + 1))
bash interop/grappler/shapes_check.sh || failed=$((failed + 1))
bash interop/grappler/sdk_probe_check.sh || failed=$((failed + 1))
bash interop/grappler/optimize_outputs.sh || failed=$((failed + 1))
bash interop/grappler_sdk_in_tf.sh || failed=$((failed + 1))
echo "== DTensor: TensorFlow's Mesh, Layout, OpSharding, unpack/relayout/pack vs unbound layout"
bash interop/dtensor/check.sh || failed=$((failed + 1))
echo "== DTensor's layout propagation: unbound plan gives each output the layout DTensor does"
bash interop/plan/check.sh || failed=$((failed + 1))
bash interop/reshard/check.sh || failed=$((failed + 1))
bash interop/convert/check.sh || failed=$((failed + 1))
bash interop/scan/check.sh || failed=$((failed + 1))
echo "== TPU export: {serve,tpu} loads in TensorFlow, needs only TPU kernels; --to-cpu runs bit for bit"
if bash interop/tpu/check.sh "$unbound" "$py" "$harness" >"$work/tpu.out" 2>&1; then
  grep -v '^ok ' "$work/tpu.out" || true
else
  cat "$work/tpu.out"; failed=$((failed + 1))
fi
echo "== externalize: stock TensorFlow loaders (C++ LoadSavedModel, TF2, TF1) serve the output bit for bit"
if bash interop/externalize/check.sh >"$work/externalize.out" 2>&1; then
  grep -v '^ok ' "$work/externalize.out" || true
else
  cat "$work/externalize.out"; failed=$((failed + 1))
fi
if [ "${UNBOUND_SKIP_HUGE:-0}" != 1 ] && [ -x interop/huge_model.sh ]; then
  echo "== past 2 GiB"
  interop/huge_model.sh || failed=$((failed + 1))
  bash interop/tpu/huge_export.sh "$unbound" "$py" "$harness" 2>&1 | grep -e '^ok ' -e '^SKIPPED' -e FAIL ||
    failed=$((failed + 1))
  # The comparison with unbound.tensorflow's load of the 2.4 GB original (12 GB, minutes) is
  # left to a run of huge.sh on its own; here the outputs are checked against the values.
  UNBOUND_EXTERNALIZE_SKIP_UNBOUND_TF=1 bash interop/externalize/huge.sh || failed=$((failed + 1))
fi

passed=$(grep -c '^ok ' "$work/compare.out" || true)
echo "interop: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

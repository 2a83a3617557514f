#!/usr/bin/env bash
# The grappler plugin host against TensorFlow 2.21: one probe plugin (probe_plugin.c, built
# against TensorFlow's own grappler.h and linked to TensorFlow's libraries) is loaded by
# TensorFlow itself and by `unbound optimize`; what each host tells it (preserve and fetch
# lists, AddN's static properties, the OpDef of Add, util call statuses) must agree, and the
# rewrite it makes (removing Identity id1) must show up in both and keep the model's output.
# Prints PASS/FAIL lines; exit 1 on any failure.
#
# usage: interop/grappler/probe_check.sh     (needs scripts/tf-venv.sh's TensorFlow, gcc)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
py="$venv/bin/python"
tf="$("$py" -c 'import os, sysconfig; print(os.path.join(sysconfig.get_paths()["purelib"], "tensorflow"))')"
cargo build --quiet --release -p unbound-cli
unbound="${CARGO_TARGET_DIR:-$root/target}/release/unbound"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export TF_CPP_MIN_LOG_LEVEL=2
source interop/grappler/quiet.sh

echo "== grappler plugin probe: TensorFlow vs unbound optimize"
# TensorFlow loads every shared object in <sys.path entry containing "site-packages">/tensorflow-plugins.
plugins="$work/site-packages/tensorflow-plugins"
mkdir -p "$plugins"
probe="$plugins/probe.so"
gcc -Wall -Wextra -O1 -shared -fPIC -I"$tf/include" -I"$root/crates/cli/tests/plugins" \
  interop/grappler/probe_plugin.c -o "$probe" \
  -L"$tf" -l:libtensorflow_framework.so.2 -l:libtensorflow_cc.so.2 -Wl,-rpath,"$tf"

"$py" interop/grappler/make_addn_model.py "$work/model" 2> >(quiet)

# (i) TensorFlow runs the probe inside a Session over the model's signature.
PYTHONPATH="$work/site-packages" UNBOUND_PROBE_DUMP="$work/tf.jsonl" UNBOUND_PROBE_REMOVE=id1 \
  "$py" interop/grappler/probe_check.py tf-run "$work/model" "$work/tf_result.json" 2> >(quiet)

# (ii) unbound runs the same binary.
failed=0
if ! UNBOUND_PROBE_DUMP="$work/ours.jsonl" UNBOUND_PROBE_REMOVE=id1 \
  "$unbound" optimize "$work/model" "$work/optimized" --plugin "$probe" >"$work/optimize.out" 2>&1; then
  echo "FAIL unbound optimize --plugin probe.so:"
  sed 's/^/    /' "$work/optimize.out"
  failed=1
else
  sed 's/^/  unbound: /' "$work/optimize.out"
fi

# (ii') and again with --isolate: in the worker process the util functions read the graph
# from its serialization (parsed on the first properties call) instead of the host's copy.
if ! UNBOUND_PROBE_DUMP="$work/ours_isolated.jsonl" UNBOUND_PROBE_REMOVE=id1 \
  "$unbound" optimize "$work/model" "$work/optimized_isolated" --plugin "$probe" --isolate \
  >"$work/optimize_isolated.out" 2>&1; then
  echo "FAIL unbound optimize --plugin probe.so --isolate:"
  sed 's/^/    /' "$work/optimize_isolated.out"
  failed=1
fi

# (iii) + (iv), without the probe on the path, for both runs.
for run in "" _isolated; do
  echo "-- unbound optimize${run:+ --isolate}"
  [ -f "$work/ours$run.jsonl" ] || : >"$work/ours$run.jsonl"
  "$py" interop/grappler/probe_check.py compare "$work/tf.jsonl" "$work/ours$run.jsonl" "$work/model" \
    "$work/optimized$run" "$work/tf_result.json" id1 2> >(quiet) || failed=1
done
[ "$failed" -eq 0 ]

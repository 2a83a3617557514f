#!/usr/bin/env bash
# One SDK-built plugin, two hosts: the sdk_probe example (crates/grappler-sdk/examples) reports
# what the util functions answer through the SDK's safe API (preserve and fetch lists, every
# node's input and output properties, the OpDef of Add, an unknown op). TensorFlow 2.21 runs it
# from a tensorflow-plugins directory in a Session over the AddN model of probe_check.sh;
# `unbound optimize` runs the same .so, in process and with --isolate. The answers must agree.
# Prints PASS/FAIL lines; exit 1 on any failure.
#
# usage: interop/grappler/sdk_probe_check.sh     (needs scripts/tf-venv.sh's TensorFlow)
#        KEEP=1 keeps the work directory (dumps, models) and prints its path.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
py="$venv/bin/python"
cargo build --quiet --release -p unbound-cli
cargo build --quiet --release -p unbound-grappler-sdk --example sdk_probe
release="${CARGO_TARGET_DIR:-$root/target}/release"
work="$(mktemp -d)"; [ -n "${KEEP:-}" ] && echo "work: $work"
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
export TF_CPP_MIN_LOG_LEVEL=2
source interop/grappler/quiet.sh

echo "== the SDK probe plugin: TensorFlow vs unbound optimize"
site="$work/site-packages"
mkdir -p "$site/tensorflow-plugins"
cp "$release/examples/libsdk_probe.so" "$site/tensorflow-plugins/"
"$py" interop/grappler/make_addn_model.py "$work/model" 2> >(quiet)

PYTHONPATH="$site" UNBOUND_SDK_PROBE_DUMP="$work/tf.jsonl" \
  "$py" interop/grappler/probe_check.py tf-run "$work/model" "$work/tf_result.json" 2> >(quiet)
failed=0
for isolate in "" --isolate; do
  dump="$work/ours$isolate.jsonl"
  if ! UNBOUND_SDK_PROBE_DUMP="$dump" "$release/unbound" optimize "$work/model" \
    "$work/optimized$isolate" --plugin "$release/examples/libsdk_probe.so" $isolate \
    >"$work/optimize.out" 2>&1; then
    echo "FAIL unbound optimize $isolate: $(tail -n 3 "$work/optimize.out")"
    failed=1
    continue
  fi
  echo "-- unbound optimize $isolate"
  "$py" interop/grappler/sdk_probe_check.py "$work/tf.jsonl" "$dump" 2> >(quiet) || failed=1
done
[ "$failed" -eq 0 ]

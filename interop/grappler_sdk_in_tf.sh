#!/usr/bin/env bash
# TensorFlow 2.21 itself loads and runs the unbound-grappler-sdk example plugins.
#
# Each plugin (release build) is put in `$work/<name>/site-packages/tensorflow-plugins/`, and
# `$work/<name>/site-packages` on PYTHONPATH: TensorFlow's __init__ loads every shared object
# in `<dir>/tensorflow-plugins` for each sys.path entry containing "site-packages"
# (load_library, then load_pluggable_device_library -> TF_InitGraph). The cached venv is not
# touched. The two plugins both register device type CPU, and a second registration for one
# device type is fatal in TensorFlow, so each runs in its own process.
# grappler_sdk_in_tf.py checks the optimized graph TensorFlow reports (partition graphs) with
# plugin optimizers on and off; this script also checks TensorFlow's log and that the plugins
# leave no TF_* symbol undefined; and (modes local/none) that the SDK finds TensorFlow's
# functions when its libraries are loaded RTLD_LOCAL, and registers nothing without them. Prints PASS/FAIL lines; exit 1 on any failure.
#
# usage: interop/grappler_sdk_in_tf.sh     (needs scripts/tf-venv.sh's TensorFlow)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
cargo build --quiet --release -p unbound-plugin-prune-identity -p unbound-plugin-fold-constants
release="${CARGO_TARGET_DIR:-$root/target}/release"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== TensorFlow runs the SDK's example plugins"
failed=0
check() { # OK WHAT
  if [ "$1" = 1 ]; then echo "PASS $2"; else echo "FAIL $2"; failed=$((failed + 1)); fi
}
for case in prune:unbound_plugin_prune_identity fold:unbound_plugin_fold_constants; do
  name="${case%%:*}"
  so="$release/lib${case#*:}.so"
  site="$work/$name/site-packages"
  mkdir -p "$site/tensorflow-plugins"
  cp "$so" "$site/tensorflow-plugins/"
  undefined="$(nm -D --undefined-only "$so" | grep -c ' TF_' || true)"
  check "$([ "$undefined" = 0 ] && echo 1)" "$name: no undefined TF_* symbols in $(basename "$so")"
  echo "-- $name"
  rc=0
  # The init message is a VLOG(1) of pluggable_device_plugin_init.cc.
  PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" TF_CPP_MIN_LOG_LEVEL=0 \
    TF_CPP_VMODULE=pluggable_device_plugin_init=1 \
    "$venv/bin/python" interop/grappler_sdk_in_tf.py "$name" 2>"$work/$name.err" || rc=$?
  logged() { grep -q "$1" "$work/$name.err" && echo 1 || true; }
  check "$(logged 'Successfully initialized Graph module')" \
    "$name: TensorFlow logged 'Successfully initialized Graph module.' (TF_InitGraph)"
  check "$(logged 'Plugin optimizer for device_type CPU is enabled')" \
    "$name: TensorFlow logged 'Plugin optimizer for device_type CPU is enabled.'"
  if grep -q 'PluggableGraphOptimizer failed' "$work/$name.err"; then
    check 0 "$name: $(grep -m1 'PluggableGraphOptimizer failed' "$work/$name.err")"
  fi
  if [ "$rc" != 0 ]; then
    failed=$((failed + 1))
    echo "FAIL $name: grappler_sdk_in_tf.py exited $rc; its stderr ends:"
    grep -v -e 'oneDNN custom operations' "$work/$name.err" | tail -n 5
  fi
done
echo "-- how the SDK finds TensorFlow's functions"
prune_so="$release/libunbound_plugin_prune_identity.so"
for mode in local none; do
  TF_CPP_MIN_LOG_LEVEL=3 "$venv/bin/python" interop/grappler_sdk_in_tf.py "$mode" "$prune_so" \
    2>"$work/$mode.err" || { failed=$((failed + 1)); tail -n 3 "$work/$mode.err"; }
done
echo "grappler sdk in tf: $failed failed"
[ "$failed" -eq 0 ]

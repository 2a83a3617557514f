#!/usr/bin/env bash
# Fingerprints against TensorFlow 2.21's C++ CreateFingerprintDef (merger_harness fingerprint):
#
# - `unbound fingerprint --json` on each TensorFlow-made test model (.pb), on `unbound split`s
#   of it at small max sizes and with two compressions (.cpb; every kind of chunk), and on
#   `unbound merge`s of those splits: every hash field and the producer equal TensorFlow's
#   (the uuid is random);
# - the fingerprint.pb that `unbound split` / `unbound merge` wrote equals what TensorFlow
#   computes for that output directory, and tf2_multi_sig's own fingerprint.pb (written by
#   TensorFlow's Python save) equals what both compute;
# - a graph-heavy model of many small nodes and functions (make_graph_model; the shape of
#   issue 15, where most messages take the encoder's already-canonical fast path; its graph is
#   past 16 MiB, so the check is split between two threads), .pb and .cpb, fingerprints as in
#   TensorFlow; with TensorFlow's fingerprint as its fingerprint.pb, `unbound verify` of the
#   .cpb (whose fingerprint shares the chunks its check and merge decode) finds it equal;
# - our deterministic serialization equals protobuf C++'s byte for byte, and hand-built models
#   full of wire-format and regularization corner cases fingerprint as in TensorFlow
#   (crates/savedmodel/tests/fingerprint_{deterministic,synthetic}.rs, given the harness).
#
# usage: interop/fingerprint_check.sh    (prints "fingerprint check: N passed, M failed")
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
py="$venv/bin/python"
export TF_CPP_MIN_LOG_LEVEL=2
harness="$(interop/build_harness.sh | tail -n 1)"
cargo build --quiet --release -p unbound-cli
cargo build --quiet --release -p unbound-savedmodel --example make_graph_model
cargo build --quiet --release -p unbound-savedmodel --example make_bench_model
unbound="${CARGO_TARGET_DIR:-$root/target}/release/unbound"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== fingerprints against TensorFlow's CreateFingerprintDef"
manifest="$work/manifest"
: >"$manifest"
failed=0
# NAME DIR [WRITTEN_FINGERPRINT_PB]
check_dir() {
  if ! "$unbound" fingerprint --json "$2" >"$work/$1.ours.json" 2>"$work/err"; then
    echo "FAIL $1: unbound fingerprint: $(tail -n 1 "$work/err")"; failed=$((failed + 1)); return
  fi
  if ! "$harness" fingerprint "$2" >"$work/$1.tf.json" 2>"$work/err"; then
    echo "FAIL $1: harness fingerprint: $(tail -n 1 "$work/err")"; failed=$((failed + 1)); return
  fi
  echo "$1 $work/$1.ours.json $work/$1.tf.json ${3:-}" >>"$manifest"
}

for model in tf2_multi_sig tf1_large_consts; do
  src="testdata/models/$model"
  stored=""
  [ -f "$src/fingerprint.pb" ] && stored="$src/fingerprint.pb"
  check_dir "$model.pb" "$src" $stored
  for comp in zstd brotli; do
    for max in 20000 2000 300; do
      name="$model.$comp.$max"
      out="$work/$name"
      if ! "$unbound" split "$src" "$out" --max-size "$max" --compression "$comp" >/dev/null 2>"$work/err"; then
        echo "FAIL $name: unbound split: $(tail -n 1 "$work/err")"; failed=$((failed + 1)); continue
      fi
      check_dir "$name.cpb" "$out" "$out/fingerprint.pb"
      if ! "$unbound" merge "$out" "$out.merged" >/dev/null 2>"$work/err"; then
        echo "FAIL $name: unbound merge: $(tail -n 1 "$work/err")"; failed=$((failed + 1)); continue
      fi
      check_dir "$name.merged" "$out.merged" "$out.merged/fingerprint.pb"
    done
  done
done

# Many small nodes: 120,000 graph nodes and 300 functions of 50 nodes, split at 4 MB; the
# fingerprint.pb that merge (computed from the model in memory while it writes) and split write
# for it, too.
"${CARGO_TARGET_DIR:-$root/target}/release/examples/make_graph_model" "$work/nodes" \
  --nodes 120000 --functions 300 --function-nodes 50 --max-size 4000000 >/dev/null 2>&1
check_dir "many_nodes.pb" "$work/nodes/model_pb"
check_dir "many_nodes.cpb" "$work/nodes/model_cpb"
if "$unbound" merge "$work/nodes/model_cpb" "$work/nodes/merged" >/dev/null 2>"$work/err"; then
  check_dir "many_nodes.merged" "$work/nodes/merged" "$work/nodes/merged/fingerprint.pb"
else
  echo "FAIL many_nodes: unbound merge: $(tail -n 1 "$work/err")"; failed=$((failed + 1))
fi
if "$unbound" split "$work/nodes/model_pb" "$work/nodes/split" --max-size 4000000 >/dev/null 2>"$work/err"; then
  check_dir "many_nodes.split" "$work/nodes/split" "$work/nodes/split/fingerprint.pb"
else
  echo "FAIL many_nodes: unbound split: $(tail -n 1 "$work/err")"; failed=$((failed + 1))
fi

# Big constants in a TensorFlow-style .cpb (make_bench_model: every chunk its own Brotli
# record, each constant's tensor_content a BYTES chunk): merge keeps every chunk decoded and its
# lazy tensors read them from the shared cache, so the check, both fingerprints and the write
# share one decode; the fingerprints (of the .cpb, and the fingerprint.pb merge writes) must
# still be TensorFlow's, and the merged .pb the original's bytes.
"${CARGO_TARGET_DIR:-$root/target}/release/examples/make_bench_model" "$work/consts" \
  --consts 3 --mib 2 --max-size 1000000 >/dev/null 2>&1
check_dir "brotli_consts.cpb" "$work/consts/model_cpb"
if "$unbound" merge "$work/consts/model_cpb" "$work/consts/merged" >/dev/null 2>"$work/err"; then
  check_dir "brotli_consts.merged" "$work/consts/merged" "$work/consts/merged/fingerprint.pb"
  if ! cmp -s "$work/consts/merged/saved_model.pb" "$work/consts/model_pb/saved_model.pb"; then
    echo "FAIL brotli_consts: the merged .pb differs from the original"; failed=$((failed + 1))
  fi
else
  echo "FAIL brotli_consts: unbound merge: $(tail -n 1 "$work/err")"; failed=$((failed + 1))
fi

"$py" - "$manifest" >"$work/compare.out" <<'EOF' || true
import sys

sys.path.insert(0, "interop")
from fingerprint_fields import diff, fingerprint_pb, ours_json, tf_json

passed = failed = 0
for line in open(sys.argv[1]):
    name, ours_path, tf_path, *written = line.split()
    ours = ours_json(ours_path)
    tf = tf_json(tf_path)
    faults = [f"unbound vs TensorFlow: {d}" for d in diff(ours, tf)]
    if not (ours["uuid"].isdigit() and len(ours["uuid"]) >= 20):
        faults.append(f"uuid {ours['uuid']!r} is not 20+ digits")
    if written:
        stored = fingerprint_pb(written[0])
        faults += [f"{written[0]} vs TensorFlow: {d}" for d in diff(stored, tf)]
    if faults:
        failed += 1
        print(f"FAIL {name}: " + "; ".join(faults))
    else:
        passed += 1
        print(f"ok {name}" + (" (and its fingerprint.pb)" if written else ""))
print(f"compared: {passed} passed, {failed} failed")
EOF
cat "$work/compare.out"
passed=$(grep -c '^ok ' "$work/compare.out" || true)
failed=$((failed + $(grep -c '^FAIL ' "$work/compare.out" || true)))
grep -q '^compared: ' "$work/compare.out" || { echo "FAIL comparison script"; failed=$((failed + 1)); }

echo "== verify's fingerprint of a .cpb (chunks decoded once, shared with its merge) against TensorFlow's"
# TensorFlow's fingerprint written as the model's fingerprint.pb: verify, which computes the
# fingerprint through the chunks its own check and merge decode (SharedCpb, issue 15), must
# find every hash equal. many_nodes.cpb has one record per Riegeli chunk, as TensorFlow
# writes a .cpb, so its message chunks are shared.
"$py" - "$work/many_nodes.cpb.tf.json" "$work/nodes/model_cpb/fingerprint.pb" <<'EOF'
import json, sys

def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)

tf = json.load(open(sys.argv[1]))
fields = ["saved_model_checksum", "graph_def_program_hash", "signature_def_hash",
          "saved_object_graph_hash", "checkpoint_hash"]
pb = b"".join(varint((n << 3) | 0) + varint(int(tf[k])) for n, k in enumerate(fields, 1))
version = varint(8) + varint(int(tf["version_producer"]))
pb += varint((6 << 3) | 2) + varint(len(version)) + version
open(sys.argv[2], "wb").write(pb)
EOF
if "$unbound" verify "$work/nodes/model_cpb" >"$work/verify.out" 2>&1 \
  && grep -q "fingerprint.pb matches" "$work/verify.out"; then
  echo "ok many_nodes.cpb: verify's shared fingerprint equals TensorFlow's"
  passed=$((passed + 1))
else
  tail -n 5 "$work/verify.out"
  echo "FAIL many_nodes.cpb: verify's fingerprint differs from TensorFlow's"
  failed=$((failed + 1))
fi

echo "== deterministic serialization against protobuf C++; hand-built corner cases"
for t in fingerprint_deterministic fingerprint_synthetic; do
  if UNBOUND_MERGER_HARNESS="$harness" cargo test --quiet --release -p unbound-savedmodel \
    --test "$t" -- --nocapture >"$work/$t.out" 2>&1; then
    grep -E '^(deterministic serialization|synthetic models):' "$work/$t.out" || true
    echo "ok $t"
    passed=$((passed + 1))
  else
    tail -n 20 "$work/$t.out"
    echo "FAIL $t"
    failed=$((failed + 1))
  fi
done

echo "fingerprint check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/usr/bin/env bash
# DTensor against TensorFlow 2.21 itself: re-records the vectors with live TensorFlow on 8
# logical CPU devices (make_vectors.py), reports any change from the committed ones in
# testdata/dtensor/, and checks that `unbound layout ...` prints, converts, unpacks,
# relayouts and packs exactly as TensorFlow did (check_cli.py).
#
# usage: interop/dtensor/check.sh     (prints "dtensor check: N passed, M failed")
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
py="$venv/bin/python"
export TF_CPP_MIN_LOG_LEVEL=3
cargo build --quiet --release -p unbound-cli
unbound="${CARGO_TARGET_DIR:-$root/target}/release/unbound"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== recording TensorFlow's answers"
"$py" interop/dtensor/make_vectors.py "$work/vectors" 2>"$work/record.log" || {
  tail -20 "$work/record.log"
  exit 1
}
for f in meshes layouts op_sharding data; do
  if ! "$py" -c "import json,sys; a=json.load(open(sys.argv[1]))['cases']; b=json.load(open(sys.argv[2]))['cases']; sys.exit(a!=b)" \
    "$work/vectors/$f.json" "testdata/dtensor/$f.json"; then
    echo "note: TensorFlow's $f.json differs from testdata/dtensor/$f.json (re-record with make_vectors.py)"
  fi
done
echo "== unbound layout against TensorFlow"
"$py" interop/dtensor/check_cli.py "$work/vectors" "$unbound"

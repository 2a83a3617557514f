#!/usr/bin/env bash
# `unbound externalize` against TensorFlow 2.21's own loaders (issue 33):
#
# - TensorFlow-made models (make_models.py: TF2 with constants inside functions the signatures
#   call, nested; a TF1 frozen graph with no variables; a TF1 graph with a variable; a Keras
#   model exported for serving; testdata's tf1_large_consts, a TF1 graph calling a function
#   that holds a constant), externalized from their .pb and from a .cpb `unbound split`
#   made of them, are served by a C++ program built against the wheel that calls
#   LoadSavedModel and runs every signature, as TensorFlow Serving does (serve_harness.cc),
#   with outputs bit for bit the original's;
# - so do `tf.saved_model.load` and the TF1 loader (loaders_check.py);
# - `unbound verify` passes on every output, and its fingerprint.pb equals TensorFlow's
#   CreateFingerprintDef of the output (merger_harness fingerprint);
# - `--dry-run --json` lists the constants the real run moves, and writes nothing;
# - `--inline` of each externalized model (its variables read by the signatures turned back
#   into constants) serves, and loads in Python, with the original's outputs bit for bit;
# - unknown fields (a newer TensorFlow's: scramble_model puts them in messages at every depth,
#   with its other classes: fields out of order, split messages, wrong wire types, padded
#   varints) are kept by externalize and by --inline, but those inside the attributes of
#   the nodes they replace (unknown_fields.py walks the parsed model), and the output serves
#   with outputs bit for bit the original's;
# - the README's table of which loaders read which format, measured (loader_table.py).
#
# Outputs are compared with oneDNN off (TF_ENABLE_ONEDNN_OPTS=0): with it on, TensorFlow picks
# other kernels for a MatMul whose weights are a constant than for one whose weights are a
# variable read, and the two round differently in the last bits (the original model itself
# answers differently with oneDNN on and off).
#
# usage: interop/externalize/check.sh   (prints "externalize check: N passed, M failed")
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
venv="$(scripts/tf-venv.sh | tail -n 1)"
py="$venv/bin/python"
export TF_CPP_MIN_LOG_LEVEL=2 TF_ENABLE_ONEDNN_OPTS=0
harness="$(interop/build_harness.sh | tail -n 1)"
target="${CARGO_TARGET_DIR:-$root/target}"
cargo build --quiet --release -p unbound-cli
unbound="$target/release/unbound"

# The serving harness: LoadSavedModel lives in libtensorflow_cc.so.2; --no-as-needed keeps the
# framework library linked so its session factory registers.
tf_dir="$(echo "$venv"/lib/python3*/site-packages/tensorflow)"
serve="$target/interop/serve_harness"
src="interop/externalize/serve_harness.cc"
if [[ ! -x "$serve" || "$src" -nt "$serve" || "$0" -nt "$serve" ]]; then
  mkdir -p "$(dirname "$serve")"
  "${CXX:-g++}" -std=c++17 -O1 -D_GLIBCXX_USE_CXX11_ABI=1 -DEIGEN_MAX_ALIGN_BYTES=64 \
    -isystem "$tf_dir/include" "$src" -o "$serve.tmp.$$" \
    -Wl,--no-as-needed -L"$tf_dir" -l:libtensorflow_framework.so.2 -l:libtensorflow_cc.so.2 \
    -Wl,-rpath,"$tf_dir"
  mv -f "$serve.tmp.$$" "$serve"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$py" interop/externalize/make_models.py "$work/models" >/dev/null 2>"$work/err" || {
  echo "FAIL make_models.py: $(tail -n 3 "$work/err")"; echo "externalize check: 0 passed, 1 failed"; exit 1; }

passed=0
failed=0
pass() { echo "ok $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; failed=$((failed + 1)); }
pairs=()
min=1000

cp -r testdata/models/tf1_large_consts "$work/models/"
for model in tf2_func_consts tf1_frozen tf1_vars keras tf1_large_consts; do
  orig="$work/models/$model"
  if ! "$serve" "$orig" >"$work/$model.orig.out" 2>"$work/err"; then
    fail "$model: the original does not serve: $(tail -n 1 "$work/err")"; continue
  fi
  # From the .pb, and from a .cpb of it.
  "$unbound" split "$orig" "$work/$model.cpb" --max-size 2000 >/dev/null 2>&1
  [[ -f "$work/$model.cpb/saved_model.cpb" ]] || fail "$model: split wrote no .cpb"
  for from in pb cpb; do
    in="$orig"; [[ "$from" == cpb ]] && in="$work/$model.cpb"
    name="$model ($from)"
    out="$work/$model.$from.ext"
    if ! "$unbound" externalize "$in" "$out.dry" --min-size "$min" --dry-run --json >"$work/dry.json" 2>"$work/err"; then
      fail "$name: externalize --dry-run: $(tail -n 1 "$work/err")"; continue
    fi
    if ! "$unbound" externalize "$in" "$out" --min-size "$min" --json >"$work/real.json" 2>"$work/err"; then
      fail "$name: externalize: $(tail -n 1 "$work/err")"; continue
    fi
    "$py" - "$work/dry.json" "$work/real.json" "$out.dry" "$out" <<'PY' >"$work/cmp" 2>&1 || { fail "$name: dry run: $(tail -n 1 "$work/cmp")"; continue; }
import json, os, sys
dry, real = (json.load(open(p)) for p in sys.argv[1:3])
assert not os.path.exists(sys.argv[3]), "the dry run wrote its output"
assert not dry["written"] and real["written"], "written flags"
assert dry["moved"] == real["moved"] and dry["moved"], "the dry run lists other moves"
assert dry["model_bytes_after"] == real["model_bytes_after"]
size = os.path.getsize(os.path.join(sys.argv[4], "saved_model.pb"))
assert abs(size - real["model_bytes_after"]) <= 64, f"saved_model.pb is {size} bytes, reported {real['model_bytes_after']}"
assert real["model_bytes_after"] < real["model_bytes_before"]
PY
    pass "$name: --dry-run lists the $("$py" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["moved"]))' "$work/real.json") constants moved, writes nothing"
    if "$unbound" verify "$out" >/dev/null 2>"$work/err"; then pass "$name: unbound verify"; else fail "$name: verify: $(tail -n 1 "$work/err")"; fi
    if "$harness" fingerprint "$out" >"$work/fp.json" 2>"$work/err"; then
      d="$("$py" -c '
import sys; sys.path.insert(0, "interop")
from fingerprint_fields import diff, fingerprint_pb, tf_json
print("; ".join(diff(fingerprint_pb(sys.argv[1]), tf_json(sys.argv[2]))))' "$out/fingerprint.pb" "$work/fp.json")"
      if [[ -z "$d" ]]; then pass "$name: fingerprint.pb equals TensorFlow's CreateFingerprintDef"; else fail "$name: fingerprint.pb: $d"; fi
    else
      fail "$name: harness fingerprint: $(tail -n 1 "$work/err")"
    fi
    if ! "$serve" "$out" >"$work/$model.$from.out" 2>"$work/err"; then
      fail "$name: C++ LoadSavedModel: $(grep -v '^[IW]0000' "$work/err" | tail -n 1)"
    elif cmp -s "$work/$model.orig.out" "$work/$model.$from.out"; then
      pass "$name: C++ LoadSavedModel serves it, $(tail -n 1 "$work/$model.$from.out"), outputs bit for bit the original's"
    else
      fail "$name: C++ LoadSavedModel: outputs differ from the original's"
    fi
    pairs+=("$orig" "$out")
    # The reverse: --inline of the externalized model serves as the original.
    if [[ "$from" == pb ]]; then
      back="$work/$model.inlined"
      if ! "$unbound" externalize --inline "$out" "$back" >/dev/null 2>"$work/err"; then
        fail "$name: externalize --inline: $(tail -n 1 "$work/err")"
      elif ! "$unbound" verify "$back" >/dev/null 2>"$work/err"; then
        fail "$name: verify of --inline's output: $(tail -n 1 "$work/err")"
      elif ! "$serve" "$back" >"$work/$model.inlined.out" 2>"$work/err"; then
        fail "$name: C++ LoadSavedModel of --inline's output: $(grep -v '^[IW]0000' "$work/err" | tail -n 1)"
      elif cmp -s "$work/$model.orig.out" "$work/$model.inlined.out"; then
        pass "$name: externalize then --inline: C++ LoadSavedModel outputs bit for bit the original's"
        pairs+=("$orig" "$back")
      else
        fail "$name: externalize then --inline: outputs differ from the original's"
      fi
    fi
  done
done

echo "== unknown fields (a newer TensorFlow's) kept"
cargo build --quiet --release -p unbound-savedmodel --example scramble_model
scramble="$target/release/examples/scramble_model"
for model in tf2_func_consts tf1_vars; do
  orig="$work/models/$model"
  name="$model with unknown fields"
  src="$work/$model.unknown"
  if ! "$scramble" "$orig" "$src" --classes all --no-entry-unknowns --seed 33 >/dev/null 2>"$work/err"; then
    fail "$name: scramble_model: $(tail -n 1 "$work/err")"; continue
  fi
  out="$src.ext"
  if ! "$unbound" externalize "$src" "$out" --min-size "$min" --json >"$work/unknown.json" 2>"$work/err"; then
    fail "$name: externalize: $(tail -n 1 "$work/err")"; continue
  fi
  if "$py" interop/externalize/unknown_fields.py --kept "$src" "$out" >"$work/kept" 2>"$work/err"; then
    pass "$name: externalize: $(tail -n 1 "$work/kept")"
  else
    fail "$name: externalize: $(tail -n 1 "$work/kept") $(tail -n 1 "$work/err")"
  fi
  if ! "$serve" "$out" >"$work/$model.unknown.out" 2>"$work/err"; then
    fail "$name: C++ LoadSavedModel: $(grep -v '^[IW]0000' "$work/err" | tail -n 1)"
  elif cmp -s "$work/$model.orig.out" "$work/$model.unknown.out"; then
    pass "$name: C++ LoadSavedModel serves the externalized model, outputs bit for bit the original's"
  else
    fail "$name: C++ LoadSavedModel: outputs differ from the original's"
  fi
  back="$out.inlined"
  if ! "$unbound" externalize --inline "$out" "$back" >/dev/null 2>"$work/err"; then
    fail "$name: --inline: $(tail -n 1 "$work/err")"
  elif "$py" interop/externalize/unknown_fields.py --kept "$out" "$back" >"$work/kept" 2>"$work/err"; then
    pass "$name: --inline: $(tail -n 1 "$work/kept")"
  else
    fail "$name: --inline: $(tail -n 1 "$work/kept") $(tail -n 1 "$work/err")"
  fi
done

echo "== tf.saved_model.load and the TF1 loader"
"$py" interop/externalize/loaders_check.py "${pairs[@]}" >"$work/loaders" 2>"$work/err" || true
grep -E '^(PASS|FAIL)' "$work/loaders" | sed 's/^PASS/ok/' || true
passed=$((passed + $(grep -c '^PASS' "$work/loaders" || true)))
failed=$((failed + $(grep -c '^FAIL' "$work/loaders" || true)))
expected=$(( ${#pairs[@]} ))   # two loaders per pair: ${#pairs[@]} / 2 * 2
got=$(grep -cE '^(PASS|FAIL)' "$work/loaders" || true)
if [[ "$got" -ne "$expected" ]]; then
  fail "loaders_check.py ran $got of $expected checks: $(tail -n 2 "$work/err")"
fi

echo "== which loaders read which format (the README's table)"
"$unbound" split "$work/models/keras" "$work/keras.table.cpb" --max-size 100000 >/dev/null 2>&1
"$py" interop/externalize/loader_table.py "$work/models/keras" "$work/keras.table.cpb" \
  "$work/keras.pb.ext" "$serve" "$venv/bin/saved_model_cli" 2>/dev/null || fail "loader_table.py"

echo "externalize check: $passed passed, $failed failed"
[[ "$failed" -eq 0 ]]

#!/usr/bin/env bash
# `unbound reshard` under MPI (cargo feature `mpi`): installs Open MPI and libclang from the
# distribution when missing (apt-get; bindgen needs libclang), builds the binary with the
# feature into target/mpi, and checks that `mpirun -n 2` and `mpirun -n 4` write the same files,
# byte for byte, as one process, and that a damaged source fails every rank with exit 1 and no
# output.
#
# usage: scripts/mpi_check.sh     (prints "mpi check: N passed, M failed")
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if ! command -v mpirun >/dev/null || ! command -v mpicc >/dev/null || ! ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1; then
  echo "== installing Open MPI and libclang (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq libopenmpi-dev openmpi-bin libclang-dev >/dev/null
fi
target="$root/target/mpi"
cargo build --quiet -p unbound-cli --features mpi --target-dir "$target"
cargo build --quiet -p unbound-reshard --example make_bench_checkpoint --target-dir "$target"
unbound="$target/debug/unbound"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
passed=0
failed=0
check() { # NAME CONDITION-EXIT-CODE
  if [ "$2" = 0 ]; then passed=$((passed + 1)); echo "ok $1"; else failed=$((failed + 1)); echo "FAIL $1"; fi
}
"$target/debug/examples/make_bench_checkpoint" "$work/src/ckpt" 5 256
touch "$work/src/checkpoint"
job=(reshard "$work/src/ckpt" --mesh x=4,y=2 --default y,unsharded --jobs 2)
"$unbound" "${job[@]:0:2}" "$work/one/ckpt" "${job[@]:2}" >/dev/null
for n in 2 4; do
  out="$work/n$n"
  if "${mpirun[@]}" -n "$n" "$unbound" "${job[@]:0:2}" "$out/ckpt" "${job[@]:2}" >"$work/log" 2>&1; then
    diff -r "$work/one" "$out" >/dev/null && same=0 || same=1
    check "mpirun -n $n equals one process" "$same"
  else
    cat "$work/log"
    check "mpirun -n $n" 1
  fi
done
# A truncated source shard: every rank fails, nothing is written.
cp -r "$work/src" "$work/bad"
truncate -s -100 "$work/bad/ckpt.data-00003-of-00009"
if "${mpirun[@]}" -n 2 "$unbound" reshard "$work/bad/ckpt" "$work/badout/ckpt" --mesh x=4,y=2 --default y,unsharded >"$work/log" 2>&1; then
  check "truncated source fails" 1
else
  grep -q "truncated" "$work/log" && [ -z "$(ls -A "$work/badout" 2>/dev/null)" ] && ok=0 || ok=1
  check "truncated source fails every rank, no output" "$ok"
fi
echo "mpi check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

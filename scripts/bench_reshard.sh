#!/usr/bin/env bash
# The reshard benchmark (issue 12): a 4 GiB float32 checkpoint of 16 variables [8192, 8192]
# stored with layout x,y on a 2x4 mesh (written by the make_bench_checkpoint example, the
# object graph included), resharded to y,unsharded on a 4x2 mesh:
#   - `cp` of its data files (the floor: the same bytes read and written once),
#   - `unbound reshard` with --jobs 1 and --jobs 2 (wall time and peak RSS),
#   - the same under `mpirun -n 2` when the MPI build exists (peak RSS: of one rank),
#   - TensorFlow's own restore-into-DVariables-then-save of the same job (bench_reshard_tf.py),
# each run under /usr/bin/time -f '%e %M' in one run of this script, page cache warm (the
# source is read once before the first timing). Every output is deleted after it is timed
# and the checkpoint at the end (disk is limited).
#
# usage: scripts/bench_reshard.sh [WORKDIR=/tmp/unbound-bench-reshard] [VARS=16] [DIM=8192]
#        [--no-tf]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
work="${1:-/tmp/unbound-bench-reshard}"
vars="${2:-16}"
dim="${3:-8192}"
no_tf=0
[ "${4:-}" = "--no-tf" ] && no_tf=1
source "$root/scripts/bench/build.sh"
bench_build unbound-reshard:make_bench_checkpoint
target="$bench_release"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
"$target/examples/make_bench_checkpoint" "$work/src/ckpt" "$vars" "$dim"
bytes=$(cat "$work"/src/ckpt.data-* | wc -c)
echo "checkpoint: $vars variables [$dim, $dim] float32, $bytes data bytes in $(ls "$work"/src/ckpt.data-* | wc -l) shards"
timed() { # LABEL CMD... -> "LABEL: S s, peak RSS M MB"
  local label="$1"
  shift
  /usr/bin/time -f '%e %M' -o "$work/time" "$@" >"$work/out" 2>"$work/err" || {
    cat "$work/err" >&2
    exit 1
  }
  read -r secs kb <"$work/time"
  echo "$label: $secs s, peak RSS $((kb / 1024)) MB"
}
# Warm the page cache for every contender alike.
cat "$work"/src/ckpt.data-* >/dev/null
mkdir -p "$work/cp"
timed "cp data files" sh -c "cp $work/src/ckpt.data-* $work/cp/ && sync -f $work/cp"
rm -rf "$work/cp"
for jobs in 1 2; do
  timed "unbound reshard --jobs $jobs" sh -c "$target/unbound reshard $work/src/ckpt $work/out$jobs/ckpt --mesh x=4,y=2 --default y,unsharded --jobs $jobs && sync -f $work/out$jobs"
  tail -n 1 "$work/out"
  rm -rf "$work/out$jobs"
done
# The same job under mpirun -n 2 (one worker each), when scripts/mpi_check.sh's MPI build
# exists in release form (cargo build --release -p unbound-cli --features mpi --target-dir
# target/mpi).
mpi_unbound="$root/target/mpi/release/unbound"
if [ -x "$mpi_unbound" ] && command -v mpirun >/dev/null; then
  root_flag=""
  [ "$(id -u)" = 0 ] && root_flag="--allow-run-as-root"
  timed "mpirun -n 2 unbound reshard --jobs 1" sh -c "mpirun $root_flag --oversubscribe -n 2 $mpi_unbound reshard $work/src/ckpt $work/outmpi/ckpt --mesh x=4,y=2 --default y,unsharded --jobs 1 && sync -f $work/outmpi"
  tail -n 1 "$work/out"
  rm -rf "$work/outmpi"
fi
if [ "$no_tf" = 0 ]; then
  venv="$(scripts/tf-venv.sh | tail -n 1)"
  export TF_CPP_MIN_LOG_LEVEL=3
  timed "TensorFlow restore + save" "$venv/bin/python" scripts/bench_reshard_tf.py "$work/src/ckpt" "$work/tf/ckpt" "$vars" "$dim"
  grep '^tf ' "$work/out"
  rm -rf "$work/tf"
fi

#!/usr/bin/env bash
# Asks TensorFlow's own Merger (through merger_harness) to read chunked files
# and compares the result with the expected message.
#
# usage: interop/check_cpb.sh [--type T] [--descriptor-set FDS] [--harness BIN] FILE.cpb...
#
# For every X.cpb there must be an X.expected.pb next to it (the unsplit
# message). Both are read with `merger_harness read` (X.cpb through the
# chunked path, X.expected.pb through the plain .pb path), each re-serialized
# deterministically by TensorFlow's protobuf, and the outputs compared bytewise.
# Prints one line per file: "ok NAME", "DIFF NAME" or "FAIL NAME: message".
# Exit status: 0 if every file is ok, 1 otherwise. --type defaults to
# tensorflow.GraphDef.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
type="tensorflow.GraphDef"
harness=""
extra=()
files=()
while (( $# > 0 )); do
  case "$1" in
    --type) type="$2"; shift 2 ;;
    --descriptor-set) extra+=(--descriptor-set "$2"); shift 2 ;;
    --harness) harness="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) files+=("$1"); shift ;;
  esac
done
(( ${#files[@]} > 0 )) || { echo "check_cpb.sh: no files" >&2; exit 2; }
if [[ -z "$harness" ]]; then
  harness="$("$here/build_harness.sh" | tail -n 1)" || exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"

# The last useful stderr line of a failed harness run: its own error line, or
# for an abort inside TensorFlow (CHECK failure, exit 134) the problem line.
why() {
  local rc="$1" err="$2" line
  line="$(grep -E '^merger_harness|Problem|^F[0-9]{4} ' <<<"$err" | tail -n 1)"
  echo "${line:-exit $rc}$( (( rc > 128 )) && echo " [crashed, exit $rc]")"
}

status=0
for f in "${files[@]}"; do
  name="$(basename "$f" .cpb)"
  prefix="${f%.cpb}"
  if [[ ! -f "$prefix.expected.pb" ]]; then
    echo "FAIL $name: no $prefix.expected.pb"; status=1; continue
  fi
  err="$("$harness" read --type "$type" "${extra[@]}" "$prefix" "$work/got.pb" 2>&1 >/dev/null)"
  rc=$?
  if (( rc != 0 )); then echo "FAIL $name: $(why $rc "$err")"; status=1; continue; fi
  err="$("$harness" read --type "$type" "${extra[@]}" "$prefix.expected" "$work/want.pb" 2>&1 >/dev/null)"
  rc=$?
  if (( rc != 0 )); then echo "FAIL $name (expected): $(why $rc "$err")"; status=1; continue; fi
  if cmp -s "$work/got.pb" "$work/want.pb"; then
    echo "ok $name"
  else
    echo "DIFF $name"; status=1
  fi
done
exit $status

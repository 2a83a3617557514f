#!/usr/bin/env bash
# Runs a command and reports the peak of its resident memory split by kind, sampled from
# /proc/PID/status every ~20 ms: RssAnon (private memory the process allocated) and RssFile
# (file pages it maps, e.g. a memory-mapped input: page cache, shared and reclaimable).
# /usr/bin/time's "maximum resident set size" counts both.
#
# usage: scripts/bench/peak_rss.sh CMD [ARGS...]
# Prints on stderr: "peak_rss: VmHWM <KB> RssAnon <KB> RssFile <KB>" (maxima over the samples;
# VmHWM is the kernel's own high-water mark of the total, read at the last sample). The
# command's stdout and stderr pass through; the exit status is the command's.
set -uo pipefail
(( $# > 0 )) || { echo "usage: peak_rss.sh CMD [ARGS...]" >&2; exit 2; }

"$@" &
pid=$!
anon=0 file=0 hwm=0
exec 3<> <(:)  # a file descriptor that never has input: `read -t` on it is a builtin sleep
while kill -0 "$pid" 2>/dev/null; do
  if [[ -r /proc/$pid/status ]]; then
    while read -r key value _; do
      case "$key" in
        VmHWM:) (( value > hwm )) && hwm=$value ;;
        RssAnon:) (( value > anon )) && anon=$value ;;
        RssFile:) (( value > file )) && file=$value ;;
      esac
    done </proc/$pid/status 2>/dev/null
  fi
  read -r -t 0.02 -u 3 _ || :
done
wait "$pid"
status=$?
echo "peak_rss: VmHWM $hwm RssAnon $anon RssFile $file" >&2
exit $status

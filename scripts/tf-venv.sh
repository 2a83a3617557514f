#!/usr/bin/env bash
# Creates (if missing) the TensorFlow 2.21 virtual environment that unbound
# uses as its compatibility oracle, and prints its path as the last line of
# stdout. Everything else goes to stderr.
#
#   venv:    ${UNBOUND_TF_VENV:-$HOME/.cache/unbound/tf-2.21.0}
#   python:  ${PYTHON:-python3} (3.10..3.13, with the venv module)
#   pins:    tensorflow-cpu==2.21.0, numpy
#
# Idempotent and fast when already done: a marker file inside the venv
# records the pins once `import tensorflow` reported 2.21.0; with the marker
# present nothing is run. Concurrent callers are serialized with flock.
# Set UNBOUND_TF_VENV_RECHECK=1 to re-verify the import even with a marker.
set -euo pipefail

TF_PIN="tensorflow-cpu==2.21.0"
TF_VERSION="2.21.0"
venv="${UNBOUND_TF_VENV:-$HOME/.cache/unbound/tf-2.21.0}"
marker="$venv/.unbound-tf-venv-ok"
want="$TF_PIN numpy"

log() { echo "tf-venv.sh: $*" >&2; }

done_already() {
  [[ -x "$venv/bin/python" && -f "$marker" && "$(cat "$marker")" == "$want" ]]
}

verify_import() {
  # TensorFlow prints its own startup noise on stderr; keep it quiet.
  TF_CPP_MIN_LOG_LEVEL=3 "$venv/bin/python" -c "
import sys, numpy, tensorflow as tf
sys.exit(0 if tf.__version__ == '$TF_VERSION' else 1)" >/dev/null 2>&1
}

if done_already && [[ "${UNBOUND_TF_VENV_RECHECK:-0}" != 1 ]]; then
  echo "$venv"
  exit 0
fi

mkdir -p "$(dirname "$venv")"
lock="$venv.lock"
exec 9>"$lock"
if command -v flock >/dev/null 2>&1; then
  flock 9
fi

# Another caller may have finished while we waited for the lock.
if done_already && verify_import; then
  echo "$venv"
  exit 0
fi

if [[ ! -x "$venv/bin/python" ]]; then
  py="${PYTHON:-python3}"
  command -v "$py" >/dev/null 2>&1 || { log "$py not found"; exit 1; }
  log "creating venv at $venv with $("$py" --version 2>&1)"
  if ! "$py" -m venv "$venv" >&2; then
    log "'$py -m venv' failed; on Debian/Ubuntu install python3-venv"
    rm -rf "$venv"
    exit 1
  fi
fi

rm -f "$marker"
if ! verify_import; then
  log "installing $want into $venv (this downloads about 300 MB once)"
  "$venv/bin/python" -m pip install --disable-pip-version-check --quiet \
    --upgrade pip >&2 || log "pip self-upgrade failed; continuing"
  "$venv/bin/python" -m pip install --disable-pip-version-check \
    "$TF_PIN" numpy >&2
  if ! verify_import; then
    log "tensorflow $TF_VERSION does not import from $venv"
    exit 1
  fi
fi
echo "$want" >"$marker"
log "ready: $venv"
echo "$venv"

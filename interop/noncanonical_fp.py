"""Compares fingerprints for interop/noncanonical_check.sh (no TensorFlow import: fast to start).

usage:
  noncanonical_fp.py json OURS.json TF.json       unbound fingerprint --json vs the harness's
  noncanonical_fp.py pb FINGERPRINT.pb TF.json    a written fingerprint.pb vs the harness's
  noncanonical_fp.py same A.json B.json [FIELD..] two harness fingerprints (default: all hashes)

Prints the fields that differ ("signature_def_hash: 1 != 2; ..."), nothing when all are equal;
TF.json is `merger_harness fingerprint DIR`'s output. The uuid is random and never compared.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fingerprint_fields import diff, fingerprint_pb, ours_json, tf_json  # noqa: E402


def main():
    mode, a_path, b_path, *fields = sys.argv[1:]
    if mode == "json":
        a = ours_json(a_path)
    elif mode == "pb":
        a = fingerprint_pb(a_path)
    elif mode == "same":
        a = tf_json(a_path)
    else:
        raise SystemExit(f"unknown mode {mode}")
    print("; ".join(diff(a, tf_json(b_path), fields)))


if __name__ == "__main__":
    main()

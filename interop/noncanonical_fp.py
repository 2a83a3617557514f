"""Compares fingerprints for interop/noncanonical_check.sh (no TensorFlow import: fast to start).

usage:
  noncanonical_fp.py json OURS.json TF.json       unbound fingerprint --json vs the harness's
  noncanonical_fp.py pb FINGERPRINT.pb TF.json    a written fingerprint.pb vs the harness's
  noncanonical_fp.py same A.json B.json [FIELD..] two harness fingerprints (default: all hashes)

Prints the fields that differ ("signature_def_hash: 1 != 2; ..."), nothing when all are equal;
TF.json is `merger_harness fingerprint DIR`'s output. The uuid is random and never compared.
"""

import json
import sys

FIELDS = [
    "saved_model_checksum",
    "graph_def_program_hash",
    "signature_def_hash",
    "saved_object_graph_hash",
    "checkpoint_hash",
]


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def fingerprint_pb(path):
    """FingerprintDef fields 1-5 (uint64) and 6 (VersionDef.producer)."""
    b = open(path, "rb").read()
    out, i = {"version_producer": 0}, 0
    while i < len(b):
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
            if 1 <= num <= 5:
                out[FIELDS[num - 1]] = v
        elif wt == 2:
            n, i = varint(b, i)
            body, i = b[i : i + n], i + n
            if num == 6:
                j = 0
                while j < len(body):
                    k, j = varint(body, j)
                    v, j = varint(body, j)
                    if k == 8:
                        out["version_producer"] = v
        else:
            raise ValueError(f"{path}: unexpected wire type {wt}")
    return out


def tf_json(path):
    tf = json.load(open(path))
    return {**{k: int(tf[k]) for k in FIELDS}, "version_producer": tf["version_producer"]}


def main():
    mode, a_path, b_path, *fields = sys.argv[1:]
    if mode == "json":
        ours = json.load(open(a_path))
        a = {**{k: ours[k] for k in FIELDS}, "version_producer": ours["version"]["producer"]}
    elif mode == "pb":
        a = fingerprint_pb(a_path)
    elif mode == "same":
        a = tf_json(a_path)
    else:
        raise SystemExit(f"unknown mode {mode}")
    b = tf_json(b_path)
    keys = fields or FIELDS + ["version_producer"]
    print("; ".join(f"{k}: {a.get(k, 0)} != {b.get(k, 0)}" for k in keys if a.get(k, 0) != b.get(k, 0)))


if __name__ == "__main__":
    main()

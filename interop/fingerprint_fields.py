"""Reading fingerprints for the interop checks, without protobuf or TensorFlow (fast to start):
a `fingerprint.pb` at the wire level, `unbound fingerprint --json`'s output and
`merger_harness fingerprint`'s, each as one dict of the hash fields (FIELDS) and
`version_producer`.
"""

import json

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
    """FingerprintDef fields 1-5 (uint64), 6 (VersionDef.producer) and 7 (uuid)."""
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
            elif num == 7:
                out["uuid"] = body.decode()
        else:
            raise ValueError(f"{path}: unexpected wire type {wt}")
    return out


def ours_json(path):
    """`unbound fingerprint --json`'s output (uuid included)."""
    ours = json.load(open(path))
    return {
        **{k: ours[k] for k in FIELDS},
        "version_producer": ours["version"]["producer"],
        "uuid": ours["uuid"],
    }


def tf_json(path):
    """`merger_harness fingerprint DIR`'s output (its uuid is not kept)."""
    tf = json.load(open(path))
    return {**{k: int(tf[k]) for k in FIELDS}, "version_producer": tf["version_producer"]}


def diff(a, b, keys=None):
    """`key: a != b` for each of `keys` (default: the hashes and the producer) that differ."""
    keys = keys or FIELDS + ["version_producer"]
    return [f"{k}: {a.get(k, 0)} != {b.get(k, 0)}" for k in keys if a.get(k, 0) != b.get(k, 0)]

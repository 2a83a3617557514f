"""Checks a scrambled saved_model.pb (crates/savedmodel/examples/scramble_model.rs) with
TensorFlow's Python protobuf: it parses; without unknown fields it equals the original; and the
unknown fields it holds, counted at every depth, are exactly those the scrambler says a parser
keeps (`unknown_kept` of its JSON statistics: 0 for the classes that add none), so no known
field was turned into an unknown one or lost, and none of the added ones was read as known.

Variants made with --no-entry-unknowns only: upb moves a map entry holding an unknown field
into its parent's unknown fields, where protobuf C++ drops the unknown field and keeps the entry.

usage: python noncanonical_parse_check.py MANIFEST
  MANIFEST: lines "NAME ORIGINAL.pb SCRAMBLED.pb STATS.json". Prints one line per variant
  ("ok NAME: ..." or "FAIL NAME: ...") and exits 1 if any failed.
"""

import json
import sys

from google.protobuf import unknown_fields
from tensorflow.core.protobuf import saved_model_pb2


def count_unknown(msg):
    """Unknown fields of `msg` and of every message inside it (map values included)."""
    n = len(unknown_fields.UnknownFieldSet(msg))
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        if fd.message_type.GetOptions().map_entry:
            value_fd = fd.message_type.fields_by_name["value"]
            if value_fd.message_type is not None:
                n += sum(count_unknown(v) for v in value.values())
        elif fd.is_repeated:
            n += sum(count_unknown(v) for v in value)
        else:
            n += count_unknown(value)
    return n


def check(name, original_path, scrambled_path, stats_path):
    """Checks one variant; prints its line and returns whether it passed."""
    stats = json.load(open(stats_path))
    original = saved_model_pb2.SavedModel.FromString(open(original_path, "rb").read())
    raw = open(scrambled_path, "rb").read()
    try:
        scrambled = saved_model_pb2.SavedModel.FromString(raw)
    except Exception as e:  # noqa: BLE001 - any parse error is the finding
        print(f"FAIL {name}: Python protobuf does not parse it: {e}")
        return False
    faults = []
    if raw == original.SerializeToString(deterministic=True):
        faults.append("the scrambled bytes are canonical (nothing was scrambled)")
    base_unknown = count_unknown(original)
    kept = count_unknown(scrambled) - base_unknown
    if kept != stats["unknown_kept"]:
        faults.append(f"{kept} unknown fields kept, the scrambler added {stats['unknown_kept']}")
    original.DiscardUnknownFields()
    scrambled.DiscardUnknownFields()
    if scrambled != original:
        faults.append("differs from the original once unknown fields are discarded")
    elif scrambled.SerializeToString(deterministic=True) != original.SerializeToString(
        deterministic=True
    ):
        faults.append("deterministic serializations differ")
    if faults:
        print(f"FAIL {name}: " + "; ".join(faults))
        return False
    print(f"ok {name}: parses to the original ({kept} unknown fields kept, as added)")
    return True


def main():
    results = [check(*line.split()) for line in open(sys.argv[1]) if line.strip()]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())

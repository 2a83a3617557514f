"""The unknown fields of a SavedModel's saved_model.pb, at every depth, by a raw walk of the
parsed message (protobuf keeps the fields its schema does not know as unknown fields): one line
each, `PATH NUMBER WIRE_TYPE DATA_HEX`, PATH naming the message (graph nodes and functions by
name, map values by key, other repeated fields by position).

usage: python unknown_fields.py DIR            (prints the lines, sorted)
       python unknown_fields.py --kept IN OUT REPORT_JSON
         checks that every unknown field of IN is in OUT but those inside the attributes of the
         constants `unbound externalize` moved (REPORT_JSON: its --json report), which it
         replaces; prints one line and exits 1 when any is lost.
"""
import json
import os
import sys

from google.protobuf import unknown_fields as uf
from tensorflow.core.protobuf import saved_model_pb2


def key_of(field, i, value):
    """How element `i` (`value`) of a repeated field is named in a path."""
    if field.message_type.full_name in ("tensorflow.NodeDef", "tensorflow.OpDef.ArgDef"):
        return value.name
    if field.message_type.full_name == "tensorflow.FunctionDef":
        return value.signature.name
    return str(i)


def repeated(field):
    """Whether `field` is repeated (protobuf 6 has `is_repeated`; older ones `label`)."""
    if hasattr(field, "is_repeated"):
        return field.is_repeated
    return field.label == field.LABEL_REPEATED


def walk(message, path, out):
    for f in uf.UnknownFieldSet(message):
        data = f.data
        if isinstance(data, (bytes, bytearray)):
            data = bytes(data).hex()
        out.append(f"{path} {f.field_number} {f.wire_type} {data}")
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        if field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.type == value_field.TYPE_MESSAGE:
                for k in sorted(value):
                    walk(value[k], f"{path}.{field.name}[{k}]", out)
        elif repeated(field):
            for i, v in enumerate(value):
                walk(v, f"{path}.{field.name}[{key_of(field, i, v)}]", out)
        else:
            walk(value, f"{path}.{field.name}", out)


def unknowns(d):
    model = saved_model_pb2.SavedModel()
    with open(os.path.join(d, "saved_model.pb"), "rb") as fh:
        model.ParseFromString(fh.read())
    out = []
    walk(model, "SavedModel", out)
    return sorted(out)


if sys.argv[1] == "--kept":
    src, dst, report = sys.argv[2:5]
    moved = json.load(open(report))["moved"]
    replaced = []
    for m in moved:
        graph = f"SavedModel.meta_graphs[{m['meta_graph']}].graph_def"
        if m["function"] is None:
            replaced.append(f"{graph}.node[{m['node']}].attr[")
        else:
            replaced.append(f"{graph}.library.function[{m['function']}].node_def[{m['node']}].attr[")
    before, after = unknowns(src), set(unknowns(dst))
    lost = [
        line for line in before
        if line not in after and not any(line.startswith(r) for r in replaced)
    ]
    if len(before) < 10:
        print(f"only {len(before)} unknown fields in {src}")
        sys.exit(1)
    if lost:
        print(f"{len(lost)} of {len(before)} unknown fields lost, e.g. {lost[0][:200]}")
        sys.exit(1)
    print(f"all {len(before)} unknown fields kept (but those of the constants moved)")
else:
    print("\n".join(unknowns(sys.argv[1])))

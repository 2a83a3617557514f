"""The unknown fields of a SavedModel's saved_model.pb, at every depth, by a raw walk of the
parsed message (protobuf keeps the fields its schema does not know as unknown fields): one line
each, `PATH NUMBER WIRE_TYPE DATA_HEX`, PATH naming the message (graph nodes and functions by
name, map values by key, other repeated fields by position).

usage: python unknown_fields.py DIR            (prints the lines, sorted)
       python unknown_fields.py --kept IN OUT
         checks that every unknown field of IN is in OUT but those inside the attributes of the
         nodes the rewrite replaced (a node whose op OUT changes: a constant `externalize` moves
         becomes an Identity, a read `--inline` inlines becomes a Const, each with its own
         attributes); prints one line and exits 1 when any is lost.
"""
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


def load(d):
    model = saved_model_pb2.SavedModel()
    with open(os.path.join(d, "saved_model.pb"), "rb") as fh:
        model.ParseFromString(fh.read())
    return model


def unknowns(d):
    out = []
    walk(load(d), "SavedModel", out)
    return sorted(out)


def node_ops(model):
    """Path prefix of each node (graph and functions) -> its op."""
    ops = {}
    for m, meta in enumerate(model.meta_graphs):
        graph = f"SavedModel.meta_graphs[{m}].graph_def"
        for n in meta.graph_def.node:
            ops[f"{graph}.node[{n.name}]"] = n.op
        for f in meta.graph_def.library.function:
            for n in f.node_def:
                ops[f"{graph}.library.function[{f.signature.name}].node_def[{n.name}]"] = n.op
    return ops


if sys.argv[1] == "--kept":
    src, dst = sys.argv[2:4]
    ops_before, ops_after = node_ops(load(src)), node_ops(load(dst))
    replaced = [
        f"{path}.attr["
        for path, op in ops_before.items()
        if ops_after.get(path, op) != op
    ]
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
    print(f"all {len(before)} unknown fields kept (but those in the attributes of the {len(replaced)} nodes replaced)")
else:
    print("\n".join(unknowns(sys.argv[1])))

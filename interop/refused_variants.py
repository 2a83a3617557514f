"""Writes a copy of a saved_model.pb with a fault that protobuf C++ refuses to parse but that
the canonical form of the model leaves out (issue 29), or with a control that it parses.

usage: refused_variants.py FAULT IN_PB OUT_PB

The fault is a second MetaGraphDef appended to the model (a SavedModel's `meta_graphs` is
repeated, so appended bytes add one; the first meta graph, which loaders and the fingerprint
use, is untouched), whose graph holds one node carrying it:

- utf8-overridden: the node's `name` (a string) first not UTF-8, then overridden by a valid one;
- utf8-oneof: an attribute value whose oneof member `placeholder` (a string) is not UTF-8,
  then replaced by member `i`;
- utf8-map-entry: an attribute entry whose value holds such a `placeholder`, then replaced by
  a later entry of the same key;
- utf8-map-value: a function's `ret` entry (a map of strings) whose value is first not UTF-8,
  then a valid one;
- deep-entries-101: attribute values nested through `func.attr` (and `list.func.attr`) so that
  the deepest message is at nesting 101 when each map entry counts as a level (protobuf C++
  parses an entry as a message of its own), at 68 when entries do not count;
- deep-entries-100 (a control, parsed): the same nesting at 100, protobuf C++'s limit.

The canonical form keeps only the last occurrence of a singular field, the member of a oneof
set last and the last entry of a key: an encoder that checks only what it writes accepts every
utf8-* model; one that counts nesting without map entries accepts deep-entries-101.
"""

import sys


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def ld(number, payload):
    """A length-delimited field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def vi(number, value):
    """A varint field."""
    return varint(number << 3) + varint(value)


BAD = b"\xff\xfe"  # not UTF-8


def attr_entry(key, value):
    # NodeDef.attr / NameAttrList.attr: map<string, AttrValue>; entry key 1, value 2.
    return ld(1, key) + ld(2, value)


def nested_attr(through_func, through_list):
    """An AttrValue holding `through_func` levels of func (10) -> NameAttrList.attr (2) ->
    AttrValue (3 levels each, the entry counted) and `through_list` levels of list (1) ->
    ListAttrValue.func (9) -> NameAttrList.attr -> AttrValue (4 levels each)."""
    value = vi(3, 1)  # AttrValue.i
    for _ in range(through_func):
        value = ld(10, ld(1, b"f") + ld(2, attr_entry(b"a", value)))
    for _ in range(through_list):
        value = ld(1, ld(9, ld(1, b"f") + ld(2, attr_entry(b"a", value))))
    return value


def node(fields):
    return ld(1, fields)  # GraphDef.node


def fault_graph(fault):
    named = ld(1, b"refused") + ld(2, b"NoOp")  # NodeDef.name, op
    if fault == "utf8-overridden":
        return node(ld(1, BAD) + ld(1, b"refused") + ld(2, b"NoOp"))
    if fault == "utf8-oneof":
        value = ld(9, BAD) + vi(3, 1)  # AttrValue.placeholder, then i
        return node(named + ld(5, attr_entry(b"x", value)))
    if fault == "utf8-map-entry":
        first = attr_entry(b"x", ld(9, BAD))
        second = attr_entry(b"x", vi(3, 1))
        return node(named + ld(5, first) + ld(5, second))
    if fault == "utf8-map-value":
        # GraphDef.library (2) -> FunctionDefLibrary.function (1) -> FunctionDef.ret (4):
        # map<string, string>, the entry's value sent twice.
        ret = ld(1, b"out") + ld(2, BAD) + ld(2, b"ok")
        return ld(2, ld(1, ld(4, ret)))
    if fault.startswith("deep-entries-"):
        deepest = int(fault.rsplit("-", 1)[1])
        # SavedModel 0, MetaGraphDef 1, GraphDef 2, NodeDef 3; the node's attr entry 4 and its
        # value 5; then 3 levels per func.attr, 4 per list.func.attr.
        through_list = next(b for b in range(4) if (deepest - 5 - 4 * b) % 3 == 0)
        through_func = (deepest - 5 - 4 * through_list) // 3
        value = nested_attr(through_func, through_list)
        return node(named + ld(5, attr_entry(b"x", value)))
    raise SystemExit(f"unknown fault {fault}")


def main():
    fault, src, dst = sys.argv[1:4]
    with open(src, "rb") as f:
        model = f.read()
    meta_graph = ld(2, fault_graph(fault))  # MetaGraphDef.graph_def
    with open(dst, "wb") as f:
        f.write(model + ld(2, meta_graph))  # SavedModel.meta_graphs


if __name__ == "__main__":
    main()

"""Compares what the sdk_probe plugin heard from TensorFlow and from unbound.

usage: sdk_probe_check.py TF_DUMP UNBOUND_DUMP

Each dump has one JSON line per graph the plugin saw. TensorFlow's meta optimizer may call it
more than once; the first line whose graph has the AddN node "sum" is compared with unbound's.
Node sets may differ (TensorFlow's session graph has its own feed and fetch nodes), so
properties are compared for the model's own nodes; unbound must also report the properties of
every node it has. Exit 1 on any failure.
"""
import sys

from tensorflow.core.grappler.costs import op_performance_data_pb2

from probe_check import Checker, load_dump, node_names

MODEL_NODES = ["a", "b", "sum", "id1", "id2", "out"]


def first_with_sum(path):
    return next((r for r in load_dump(path) if "sum" in r["nodes"]), None)


def describe(hexes):
    out = []
    for h in hexes:
        p = op_performance_data_pb2.OpInfo.TensorProperties()
        p.ParseFromString(bytes.fromhex(h))
        dims = None if p.shape.unknown_rank else [d.size for d in p.shape.dim]
        out.append((p.dtype, dims))
    return out


def main(tf_path, ours_path):
    tf, ours = first_with_sum(tf_path), first_with_sum(ours_path)
    checker = Checker()
    check = checker.check
    if not check(tf is not None, "TensorFlow ran the SDK probe on the AddN graph"):
        return 1
    if not check(ours is not None, "unbound ran the SDK probe on the AddN graph"):
        return 1
    check(node_names(tf["preserve"]) == node_names(ours["preserve"]), "preserve lists agree",
          f"TF {tf['preserve']} | unbound {ours['preserve']}")
    check(tf["fetch"] == ours["fetch"], "fetch lists agree",
          f"TF {tf['fetch']} | unbound {ours['fetch']}")
    for node in MODEL_NODES:
        for side in ("inputs", "outputs"):
            theirs = tf["props"].get(node, {}).get(side)
            mine = ours["props"].get(node, {}).get(side)
            check(theirs == mine, f"{node} {side} properties are byte-identical",
                  f"TF {describe(theirs or [])} | unbound {describe(mine or [])}")
    check(set(ours["props"]) == set(ours["nodes"]), "unbound reports properties for every node")
    check(tf["op_def_add"] is not None and tf["op_def_add"] == ours["op_def_add"],
          "OpDef(Add) through the SDK is byte-identical")
    check(tf["missing_op_is_none"] and ours["missing_op_is_none"],
          "an unknown op is None through the SDK under both")
    print(f"sdk probe: {checker.failed} failed")
    return 1 if checker.failed else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))

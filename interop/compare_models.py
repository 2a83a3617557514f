"""Compares two binary protos with TensorFlow's own Python protobuf classes.

usage: compare_models.py MANIFEST

Each line of MANIFEST is `NAME TYPE MODE A.pb B.pb`, TYPE tensorflow.SavedModel or
tensorflow.GraphDef, MODE `exact` or `tensor-values`. One process compares them all (importing
TensorFlow once). Prints `ok NAME` or `FAIL NAME: first difference` per line and a closing
`compare: N passed, M failed`; exit 0 when all are equal.

Exact mode (default): the two messages must be equal as protobuf messages.
--tensor-values: Const tensors may differ in representation but not in value. TensorFlow's
splitter moves a Const's typed values (float_val, ...) into tensor_content when the node is
above the maximum chunk size; this mode compares every tensor attr by dtype, shape and
tf.make_ndarray value, and everything else exactly.
"""
import sys

import numpy as np
from tensorflow.core.framework import graph_pb2
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import tensor_util


def load(type_name, path):
    cls = {"tensorflow.SavedModel": saved_model_pb2.SavedModel,
           "tensorflow.GraphDef": graph_pb2.GraphDef}[type_name]
    msg = cls()
    with open(path, "rb") as f:
        msg.ParseFromString(f.read())
    return msg


def graphs(msg):
    if isinstance(msg, graph_pb2.GraphDef):
        return [msg]
    return [mg.graph_def for mg in msg.meta_graphs]


def nodes(graph):
    yield from graph.node
    for fn in graph.library.function:
        yield from fn.node_def


def normalize_tensors(msg):
    """Replaces every tensor attr with a canonical tensor_content form; returns the values."""
    values = []
    for g in graphs(msg):
        for node in nodes(g):
            for key in sorted(node.attr):
                attr = node.attr[key]
                if attr.WhichOneof("value") != "tensor":
                    continue
                t = attr.tensor
                if t.dtype == 7:  # DT_STRING values are never moved
                    continue
                arr = tensor_util.MakeNdarray(t)
                values.append((node.name, key, arr))
                keep = (t.dtype, t.tensor_shape.SerializeToString(), t.version_number)
                t.Clear()
                t.dtype = keep[0]
                t.tensor_shape.ParseFromString(keep[1])
                t.version_number = keep[2]
    return values


def compare(type_name, mode, path_a, path_b):
    """Returns None when equal, else the first difference."""
    a, b = load(type_name, path_a), load(type_name, path_b)
    if mode == "tensor-values":
        va, vb = normalize_tensors(a), normalize_tensors(b)
        if len(va) != len(vb):
            return f"different number of tensors: {len(va)} vs {len(vb)}"
        for (na, ka, xa), (nb, kb, xb) in zip(va, vb):
            if (na, ka) != (nb, kb) or xa.dtype != xb.dtype or xa.shape != xb.shape \
                    or xa.tobytes() != xb.tobytes():
                return f"tensor {na}.{ka} differs from {nb}.{kb}"
    elif mode != "exact":
        return f"unknown mode {mode}"
    if a == b:
        return None
    for i, (ga, gb) in enumerate(zip(graphs(a), graphs(b))):
        if len(ga.node) != len(gb.node):
            return f"graph {i}: {len(ga.node)} vs {len(gb.node)} nodes"
        for na, nb in zip(ga.node, gb.node):
            if na != nb:
                return f"graph {i}: node {na.name!r} differs"
    return "messages differ"


def main():
    passed = failed = 0
    with open(sys.argv[1]) as manifest:
        for line in manifest:
            if not line.strip():
                continue
            name, type_name, mode, path_a, path_b = line.split()
            try:
                fault = compare(type_name, mode, path_a, path_b)
            except Exception as e:  # a file that does not parse is a failure, not a crash
                fault = f"{type(e).__name__}: {e}"
            if fault is None:
                passed += 1
                print(f"ok {name}")
            else:
                failed += 1
                print(f"FAIL {name}: {fault}")
    print(f"compare: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

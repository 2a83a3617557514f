"""Writes a SavedModel whose signature calls one function of about N nodes, for timing
`unbound plan` (BENCHMARKS.md).

    python interop/plan/big_model.py OUTDIR [N]

Built from TensorFlow's protos directly (tracing N ops with tf.function would take minutes):
a chain of blocks MatMul (a [64,64] constant weight) -> AddV2 (a [64] constant) -> Relu ->
Softmax, each node with the `_output_shapes` TensorFlow records, called through
StatefulPartitionedCall as `tf.saved_model.save` does.
"""

import os
import sys

from tensorflow.core.framework import attr_value_pb2, function_pb2, graph_pb2, node_def_pb2, types_pb2
from tensorflow.core.framework import tensor_shape_pb2, op_def_pb2
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2
from tensorflow.python.framework import tensor_util


def shape_attr(*shapes):
    lst = attr_value_pb2.AttrValue.ListValue()
    for s in shapes:
        lst.shape.append(tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in s]))
    return attr_value_pb2.AttrValue(list=lst)


def node(name, op, inputs, out_shape, **attrs):
    n = node_def_pb2.NodeDef(name=name, op=op, input=inputs)
    n.attr["_output_shapes"].CopyFrom(shape_attr(out_shape))
    for k, v in attrs.items():
        n.attr[k].CopyFrom(v)
    return n


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 300_000
    B, D = 32, 64
    T = attr_value_pb2.AttrValue(type=types_pb2.DT_FLOAT)
    fdef = function_pb2.FunctionDef()
    fdef.signature.name = "__inference_big_1"
    fdef.signature.input_arg.add(name="x", type=types_pb2.DT_FLOAT)
    fdef.signature.output_arg.add(name="identity", type=types_pb2.DT_FLOAT)
    # Splat constants (one value, TensorFlow repeats it): the model stays small.
    w = attr_value_pb2.AttrValue(tensor=tensor_util.make_tensor_proto(1.0, types_pb2.DT_FLOAT, [D, D]))
    b = attr_value_pb2.AttrValue(tensor=tensor_util.make_tensor_proto(1.0, types_pb2.DT_FLOAT, [D]))
    prev = "x"
    blocks = max(1, n // 6)
    for i in range(blocks):
        fdef.node_def.extend([
            node(f"w{i}", "Const", [], (D, D), dtype=T, value=w),
            node(f"m{i}", "MatMul", [prev, f"w{i}:output:0"], (B, D), T=T),
            node(f"b{i}", "Const", [], (D,), dtype=T, value=b),
            node(f"a{i}", "AddV2", [f"m{i}:product:0", f"b{i}:output:0"], (B, D), T=T),
            node(f"r{i}", "Relu", [f"a{i}:z:0"], (B, D), T=T),
            node(f"s{i}", "Softmax", [f"r{i}:activations:0"], (B, D), T=T),
        ])
        prev = f"s{i}:softmax:0"
    fdef.node_def.append(node("Identity", "Identity", [prev], (B, D), T=T))
    fdef.ret["identity"] = "Identity:output:0"

    g = graph_pb2.GraphDef()
    g.versions.producer = 1882
    g.library.function.append(fdef)
    g.node.append(node("serving_default_x", "Placeholder", [], (-1, D), dtype=T,
                       shape=attr_value_pb2.AttrValue(shape=tensor_shape_pb2.TensorShapeProto(
                           dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=-1), tensor_shape_pb2.TensorShapeProto.Dim(size=D)]))))
    call = node("StatefulPartitionedCall", "StatefulPartitionedCall", ["serving_default_x"], (-1, D),
                Tin=attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue(type=[types_pb2.DT_FLOAT])),
                Tout=attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue(type=[types_pb2.DT_FLOAT])),
                f=attr_value_pb2.AttrValue(func=attr_value_pb2.NameAttrList(name=fdef.signature.name)))
    g.node.append(call)

    mg = meta_graph_pb2.MetaGraphDef()
    mg.meta_info_def.tags.append("serve")
    mg.graph_def.CopyFrom(g)
    sig = mg.signature_def["serving_default"]
    sig.method_name = "tensorflow/serving/predict"
    sig.inputs["x"].name = "serving_default_x:0"
    sig.inputs["x"].dtype = types_pb2.DT_FLOAT
    sig.inputs["x"].tensor_shape.dim.add(size=-1)
    sig.inputs["x"].tensor_shape.dim.add(size=D)
    sig.outputs["y"].name = "StatefulPartitionedCall:0"
    sig.outputs["y"].dtype = types_pb2.DT_FLOAT
    sm = saved_model_pb2.SavedModel(saved_model_schema_version=1)
    sm.meta_graphs.append(mg)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "saved_model.pb"), "wb") as f:
        f.write(sm.SerializeToString())
    print(f"{out}: {len(fdef.node_def) + len(g.node)} nodes")


if __name__ == "__main__":
    main()

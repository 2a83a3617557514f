"""Writes the TF1-style SavedModel the grappler probe runs on (interop/grappler/probe_check.sh).

    a, b: Placeholder float [10,1]
    sum = AddN(a, b, a)
    id1 = Identity(sum); id2 = Identity(id1); out = Identity(id2)

Signature "serving_default": inputs a, b; output out. Every node is pinned to /device:CPU:0:
both TensorFlow and unbound run a plugin only for the device types found in NodeDef.device.

usage: make_addn_model.py OUT_DIR
"""

import sys

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

tf1 = tf.compat.v1
CPU = "/device:CPU:0"


def main(out_dir):
    graph = tf.Graph()
    with graph.as_default(), graph.device(CPU):
        a = tf1.placeholder(tf.float32, [10, 1], name="a")
        b = tf1.placeholder(tf.float32, [10, 1], name="b")
        total = tf.math.add_n([a, b, a], name="sum")
        id1 = tf.identity(total, name="id1")
        id2 = tf.identity(id1, name="id2")
        out = tf.identity(id2, name="out")
        with tf1.Session(graph=graph) as sess:
            builder = tf1.saved_model.Builder(out_dir)
            signature = tf1.saved_model.predict_signature_def({"a": a, "b": b}, {"out": out})
            builder.add_meta_graph_and_variables(
                sess, ["serve"], signature_def_map={"serving_default": signature}
            )
            builder.save()

    # Nodes the builder adds itself (if any) get no device scope; pin them too.
    path = f"{out_dir}/saved_model.pb"
    model = saved_model_pb2.SavedModel()
    with open(path, "rb") as f:
        model.ParseFromString(f.read())
    for node in model.meta_graphs[0].graph_def.node:
        node.device = CPU
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


if __name__ == "__main__":
    main(sys.argv[1])

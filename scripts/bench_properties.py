"""Static shape inference on a large graph: unbound's (the engine behind TF_InferStatically in
`unbound optimize`) against TensorFlow 2.21's GraphProperties::InferStatically.

usage: python scripts/bench_properties.py INFER_SHAPES_BINARY WORK_DIR [BLOCKS]

Builds a graph of BLOCKS (default 20,000) blocks of 6 nodes each (MatMul, a scalar Const, AddV2,
Relu, a shape Const, Reshape) on a [64, 64] variable, writes its MetaGraphDef, then times
TensorFlow's inference through the grappler Item (best of 3, in process, after import) and the
`infer_shapes` example (best of 3, whole process: read, parse, infer, print), and prints both
and their ratio.
"""
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.grappler import item as gitem  # noqa: E402

v1 = tf.compat.v1


def build(blocks):
    g = tf.Graph()
    with g.as_default():
        y = tf.raw_ops.VariableV2(shape=[64, 64], dtype=tf.float32, name="x")
        w = tf.constant(np.ones([64, 64], np.float32))
        for i in range(blocks):
            y = tf.matmul(y, w)
            y = tf.nn.relu(y + tf.constant(float(i)))
            y = tf.reshape(y, [64, 64])
        v1.add_to_collection("train_op", y)
        meta = v1.train.export_meta_graph(graph=g)
    for n in meta.graph_def.node:
        n.attr.pop("_output_shapes", None)
    return meta


def best(runs, f):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    binary, work = sys.argv[1], sys.argv[2]
    blocks = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    meta = build(blocks)
    path = os.path.join(work, "bench_meta_graph.pb")
    with open(path, "wb") as f:
        f.write(meta.SerializeToString())
    nodes = len(meta.graph_def.node)
    item = gitem.Item(meta)
    tf_time = best(3, item.GetOpProperties)
    ours = best(3, lambda: subprocess.run([binary, path], check=True, stdout=subprocess.DEVNULL))
    print(f"graph: {nodes} nodes")
    print(f"TensorFlow GraphProperties (in process): {tf_time:.3f} s")
    print(f"unbound infer_shapes (whole process, output printed): {ours:.3f} s")
    print(f"ratio TensorFlow / unbound: {tf_time / ours:.1f}x")


if __name__ == "__main__":
    sys.exit(main())

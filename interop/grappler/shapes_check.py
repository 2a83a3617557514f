"""Static shape inference, unbound against TensorFlow 2.21 on the same graph.

usage: python shapes_check.py INFER_SHAPES_BINARY WORK_DIR

Builds a TF1-style graph of the common ops of inference graphs (convolutions, pooling, matrix
products, reshapes, concatenation, slicing, padding, tiling, gathers, splits, one-hot, ranges,
reductions, shape arithmetic), with inputs of fully and partly known shapes, and exports its
MetaGraphDef. TensorFlow's answer is GraphProperties::InferStatically through the grappler Item
(tensorflow.python.grappler.item, the same inference TF_InferStatically runs); unbound's is the
`infer_shapes` example. For every output of every node, the dtypes must be equal and the shapes
must agree: equal ranks, and equal dims wherever both know them (TensorFlow's negative symbolic
dims count as unknown). unbound must never claim what TensorFlow does not know; where TensorFlow
knows more, the output is a "gap", listed, and also a failure (every op in the graph is one
unbound claims to cover) unless it is one of the KNOWN_GAPS, each with its reason.
"""
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.grappler import item as gitem  # noqa: E402

v1 = tf.compat.v1


def build():
    g = tf.Graph()
    with g.as_default():
        # Inputs are VariableV2 nodes, not placeholders: TensorFlow's grappler Item treats
        # every placeholder as fed and, inferring without assume_valid_feeds, forgets their
        # shapes; a variable's shape attr is what both sides start from.
        def source(name, dtype, shape):
            return tf.raw_ops.VariableV2(shape=tf.TensorShape(shape), dtype=dtype, name=name)

        x = source("x", tf.float32, [2, 8, 8, 3])
        v = source("v", tf.float32, [None, 5])
        idx = source("idx", tf.int32, [4])
        any_rank = source("any_rank", tf.float32, None)
        outs = []
        f = tf.constant(np.ones([3, 3, 3, 4], np.float32), name="filter")
        conv = tf.nn.conv2d(x, f, strides=1, padding="SAME", name="conv_same")
        outs.append(tf.nn.conv2d(x, f, strides=2, padding="VALID", name="conv_valid"))
        b = tf.nn.bias_add(conv, tf.constant(np.zeros(4, np.float32)), name="bias")
        r = tf.nn.relu(b, name="relu")
        outs.append(tf.nn.max_pool2d(r, 2, 2, "VALID", name="maxpool"))
        outs.append(tf.nn.avg_pool2d(r, 3, 1, "SAME", name="avgpool"))
        outs.append(tf.reshape(conv, [2, -1], name="reshape_infer"))
        outs.append(tf.reshape(v, [-1], name="reshape_flat"))
        shp = tf.shape(v, name="shape_v")
        outs.append(tf.reshape(v, tf.stack([shp[0], 5, 1]), name="reshape_dynamic"))
        w = tf.constant(np.ones([5, 7], np.float32), name="w")
        outs.append(tf.matmul(v, w, name="matmul"))
        outs.append(tf.matmul(w, v, transpose_a=True, transpose_b=True, name="matmul_tt"))
        outs.append(tf.concat([v, v], axis=1, name="concat1"))
        outs.append(tf.concat([x, x], axis=0, name="concat0"))
        outs.append(tf.transpose(x, [0, 3, 1, 2], name="transpose"))
        outs.append(tf.pad(x, [[0, 0], [1, 1], [2, 2], [0, 0]], name="pad"))
        outs.append(tf.pad(x, [[0, 0], [1, 1], [2, 2], [0, 0]], constant_values=1.0, name="pad_v2"))
        outs.append(tf.pad(x, [[0, 0], [1, 1], [2, 2], [0, 0]], mode="REFLECT", name="mirror_pad"))
        outs.append(tf.pad(v, [[1, 2], [0, 3]], name="pad_partial"))
        outs.append(tf.slice(x, [0, 1, 1, 0], [2, -1, 3, -1], name="slice"))
        outs.append(tf.slice(v, [0, 0], [1, 2], name="slice_v"))
        outs.append(tf.slice(v, [1, 1], [-1, -1], name="slice_rest"))
        outs.append(tf.tile(x, [1, 2, 1, 3], name="tile"))
        outs.append(tf.tile(v, [2, 1], name="tile_v"))
        params = tf.constant(np.ones([10, 4], np.float32), name="params")
        outs.append(tf.gather(params, idx, name="gather"))
        outs.append(tf.gather(x, idx, axis=3, name="gather_axis3"))
        outs.append(tf.gather(x, idx, axis=-2, name="gather_neg"))
        bparams = tf.constant(np.ones([2, 5, 6], np.float32), name="bparams")
        bidx = tf.constant(np.zeros([2, 3], np.int32), name="bidx")
        outs.append(tf.gather(bparams, bidx, axis=1, batch_dims=1, name="gather_batch"))
        outs.append(tf.raw_ops.Gather(params=params, indices=idx, name="gather_v1"))
        outs.extend(tf.split(x, 2, axis=0, name="split"))
        outs.extend(tf.split(x, [3, -1], axis=1, name="splitv"))
        outs.extend(tf.split(v, [2, 3], axis=1, name="splitv_cols"))
        outs.extend(tf.split(v, 2, axis=0, name="split_unknown_dim"))
        outs.append(tf.one_hot(idx, 10, name="one_hot"))
        outs.append(tf.one_hot(idx, 10, axis=0, name="one_hot_axis0"))
        outs.append(tf.range(0, 10, 3, name="range"))
        outs.append(tf.range(10, 0, -4, name="range_down"))
        outs.append(tf.range(tf.shape(v)[0], name="range_dynamic"))
        outs.append(tf.squeeze(tf.expand_dims(x, 0, name="expand"), [0], name="squeeze"))
        outs.append(tf.reduce_mean(x, [1, 2], name="mean"))
        outs.append(tf.reduce_sum(x, [1, 2], keepdims=True, name="sum_keep"))
        outs.append(tf.argmax(x, axis=3, name="argmax"))
        outs.append(tf.fill([3, 2], 1.5, name="fill"))
        outs.append(tf.stack([v, v], axis=1, name="stack"))
        outs.append(tf.cast(v, tf.int64, name="cast"))
        outs.append(tf.nn.softmax(v, name="softmax"))
        outs.append(tf.add_n([v, v, v], name="add_n"))
        outs.append(tf.matmul(x, tf.constant(np.ones([2, 8, 3, 6], np.float32)), name="batch_matmul"))
        outs.append(tf.where(v > 0, v, tf.zeros_like(v), name="select"))
        outs.append(tf.add(v, tf.constant(np.ones([3, 1, 5], np.float32)), name="broadcast"))
        outs.append(tf.identity(any_rank * 2.0, name="unknown_rank"))
        outs.append(tf.tile(any_rank, [2, 2], name="tile_unknown_input"))
        outs.append(tf.slice(x, [0, 0, 0, 0], tf.shape(x), name="slice_by_shape"))
        outs.append(tf.slice(v, [0, 1], tf.shape(v) - [0, 1], name="slice_by_partial_shape"))
        outs.append(tf.shape(x)[1:3] * 2)
        for o in outs:
            v1.add_to_collection("train_op", o)
        return v1.train.export_meta_graph(graph=g)


# Outputs where TensorFlow knows more, and why. Everything else must agree.
KNOWN_GAPS = {
    # TensorFlow refines a producer's shape from what its consumers require (Tile's
    # multiples give any_rank rank 2); unbound infers forward only.
    "any_rank:0": "refined backwards from a consumer",
}


def shape_of(tp):
    if tp.shape.unknown_rank:
        return None
    return [d.size if d.size >= 0 else -1 for d in tp.shape.dim]


def main():
    binary, work = sys.argv[1], sys.argv[2]
    meta = build()
    path = os.path.join(work, "shapes_meta_graph.pb")
    with open(path, "wb") as f:
        f.write(meta.SerializeToString())
    theirs = {}
    for node, props in gitem.Item(meta).GetOpProperties().items():
        for port, tp in enumerate(props):
            theirs[(node, port)] = (tp.dtype, shape_of(tp))
    run = subprocess.run([binary, path], capture_output=True, text=True)
    if run.returncode != 0:
        print(f"FAIL infer_shapes exited {run.returncode}: {run.stderr.strip()}")
        return 1
    ours = {}
    for line in run.stdout.splitlines():
        node, port, dtype, dims = line.split("\t")
        shape = None if dims == "?" else [int(d) for d in dims.split(",") if d]
        ours[(node, int(port))] = (int(dtype), shape)
    failed, gaps, agreed, known = 0, [], 0, 0
    for key in sorted(theirs):
        if key not in ours:
            continue
        (tdt, ts), (odt, os_) = theirs[key], ours[key]
        name = f"{key[0]}:{key[1]}"
        if tdt != odt:
            print(f"FAIL {name}: dtype TF {tdt}, unbound {odt}")
            failed += 1
            continue
        if ts is not None and any(d >= 0 for d in ts):
            known += 1
        if os_ is None:
            if ts is not None:
                gaps.append(f"{name}: TF {ts}, unbound unknown rank")
            else:
                agreed += 1
            continue
        if ts is None or len(ts) != len(os_):
            print(f"FAIL {name}: TF {ts}, unbound {os_}")
            failed += 1
            continue
        if any(o >= 0 and o != t for o, t in zip(os_, ts)):
            print(f"FAIL {name}: TF {ts}, unbound {os_}")
            failed += 1
        elif any(t >= 0 and o < 0 for o, t in zip(os_, ts)):
            gaps.append(f"{name}: TF {ts}, unbound {os_}")
        else:
            agreed += 1
    compared = sum(1 for k in theirs if k in ours)
    missing = [f"{n}:{p}" for (n, p) in theirs if (n, p) not in ours]
    known_gaps = [g for g in gaps if g.split(": ")[0] in KNOWN_GAPS]
    gaps = [g for g in gaps if g not in known_gaps]
    for g in known_gaps:
        print(f"KNOWN gap {g} ({KNOWN_GAPS[g.split(': ')[0]]})")
    for g in gaps:
        print(f"FAIL gap {g}")
    for m in missing:
        print(f"FAIL {m}: TF reports it, unbound does not")
    failed += len(gaps) + len(missing)
    print(f"shapes: {compared} outputs compared ({known} with known dims in TF), {agreed} agree, "
          f"{len(gaps)} gaps, {len(known_gaps)} known gaps, {failed} failed")
    return 1 if failed or compared < 100 else 0


if __name__ == "__main__":
    sys.exit(main())

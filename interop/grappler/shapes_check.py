"""Static shape inference, unbound against TensorFlow 2.21 on the same graph.

usage: python shapes_check.py INFER_SHAPES_BINARY WORK_DIR

Builds a TF1-style graph of the common ops of inference graphs (convolutions, pooling, matrix
products, reshapes, concatenation, slicing, padding, tiling, gathers, splits, one-hot, ranges,
reductions, shape arithmetic), with inputs of fully and partly known shapes, and exports its
MetaGraphDef. TensorFlow's answer is GraphProperties::InferStatically through the grappler Item
(tensorflow.python.grappler.item, the same inference TF_InferStatically runs); unbound's is the
`infer_shapes` example. For every output of every node, the dtypes must be equal and the shapes
must agree: equal ranks, and equal dims wherever both know them (TensorFlow's negative symbolic
dims count as unknown). Where unbound knows a dim TensorFlow's static inference does not, TensorFlow
runs the graph and the actual shape must match. Where TensorFlow knows more, the output is a
"gap", listed, and a failure (every op in the graph is one unbound claims to cover) unless it is
one of the KNOWN_GAPS, each with its reason.
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
        img = source("img", tf.float32, [1, 6, 6, 4])
        outs.append(tf.compat.v1.image.resize_bilinear(img, [12, 9], name="resize_bilinear"))
        outs.append(tf.compat.v1.image.resize_nearest_neighbor(img, [3, 3], name="resize_nearest"))
        outs.extend(tf.math.top_k(v, 3, name="top_k"))
        outs.append(tf.math.cumsum(v, axis=1, name="cumsum"))
        outs.append(tf.reverse(x, [1], name="reverse"))
        outs.extend(tf.unstack(x, axis=1, name="unstack"))
        outs.append(tf.broadcast_to(v, [3, 4, 5], name="broadcast_to"))
        outs.append(tf.zeros_like(x, name="zeros_like"))
        outs.append(tf.ones_like(v, name="ones_like"))
        outs.append(tf.math.maximum(v, 0.0, name="maximum"))
        outs.append(tf.math.less(v, 0.0, name="less"))
        outs.append(tf.logical_and(v > 0, v < 1, name="logical_and"))
        outs.append(tf.nn.relu6(x, name="relu6"))
        outs.append(tf.math.rsqrt(v, name="rsqrt"))
        outs.append(tf.nn.log_softmax(v, name="log_softmax"))
        outs.append(tf.math.square(v, name="square"))
        scale = tf.constant(np.ones(3, np.float32))
        bn = tf.compat.v1.nn.fused_batch_norm(x, scale, scale, scale, scale, is_training=False,
                                              name="fused_bn")
        outs.append(bn[0])
        outs.append(tf.nn.depthwise_conv2d(x, tf.constant(np.ones([3, 3, 3, 2], np.float32)),
                                           [1, 1, 1, 1], "SAME", name="depthwise"))
        outs.append(tf.nn.conv2d(x, f, strides=1, padding="SAME", dilations=2, name="conv_dilated"))
        outs.append(tf.einsum("bij,jk->bik", tf.reshape(x, [2, 64, 3]), tf.constant(np.ones([3, 7], np.float32)),
                              name="einsum"))
        m3 = tf.reshape(x, [2, 64, 3], name="m3")
        outs.append(tf.einsum("...ij,...jk->...ik", m3, tf.constant(np.ones([1, 3, 4], np.float32)),
                              name="einsum_ellipsis"))
        outs.append(tf.einsum("ij,jk", v, w, name="einsum_implicit"))
        outs.append(tf.einsum("bij->jib", m3, name="einsum_transpose"))
        outs.append(tf.einsum("bij,bij->b", m3, m3, name="einsum_reduce"))
        outs.extend(tf.unstack(v, axis=-1, name="unstack_last"))
        outs.append(tf.image.resize(img, tf.shape(img)[1:3] * 2, method="bicubic", name="resize_dynamic"))
        outs.append(tf.math.l2_normalize(v, axis=1, name="l2_normalize"))
        outs.append(tf.clip_by_value(v, 0.0, 1.0, name="clip"))
        outs.append(tf.where(tf.constant([[True, False]]), name="where_indices"))
        outs.append(tf.math.reduce_prod(x, axis=None, name="prod_all"))
        outs.append(tf.size(v, name="size_v"))
        outs.append(tf.rank(v, name="rank_v"))
        outs.append(tf.expand_dims(tf.reduce_max(v, axis=-1), -1, name="expand_max"))
        outs.append(tf.squeeze(tf.slice(x, [0, 0, 0, 0], [1, 8, 8, 1]), name="squeeze_all"))
        outs.append(tf.concat([v, tf.zeros([3, 5])], axis=0, name="concat_mixed"))
        outs.append(tf.reshape(x, [-1, 8 * 3], name="reshape_neg"))
        outs.append(tf.linalg.matmul(tf.reshape(x, [2, 64, 3]), tf.constant(np.ones([3, 4], np.float32)),
                                     name="matmul_bcast"))
        outs.append(tf.nn.conv1d(tf.reshape(x, [2, 64, 3]), tf.constant(np.ones([3, 3, 5], np.float32)),
                                 stride=2, padding="SAME", name="conv1d"))
        outs.append(tf.raw_ops.StopGradient(input=v, name="stop_gradient"))
        outs.append(tf.raw_ops.Selu(features=v, name="selu"))
        outs.append(tf.math.floordiv(idx, 2, name="floordiv"))
        outs.append(tf.math.argmin(v, axis=0, output_type=tf.int32, name="argmin"))
        @tf.function
        def scale_rows(a, b):
            return tf.matmul(a, b) * 2.0, tf.reduce_sum(a, axis=1)

        outs.extend(scale_rows(tf.identity(v), w))

        @tf.function
        def flatten_then_scale(a):
            flat = tf.reshape(a, [tf.shape(a)[0], -1])
            return scale_rows(flat, tf.ones([tf.shape(flat)[1], 7]))[0]

        outs.append(flatten_then_scale(tf.identity(x)))
        for o in outs:
            v1.add_to_collection("train_op", o)
        meta = v1.train.export_meta_graph(graph=g)
        feeds = {
            x: np.ones([2, 8, 8, 3], np.float32),
            v: np.arange(15, dtype=np.float32).reshape(3, 5) - 7,
            idx: np.array([1, 0, 2, 1], np.int32),
            img: np.ones([1, 6, 6, 4], np.float32),
            any_rank: np.ones([2, 2], np.float32),
        }
    # export_meta_graph records Python's shapes as `_output_shapes` on every node, which both
    # sides would fall back to: without them, what is compared is the shape functions.
    for n in meta.graph_def.node:
        if "_output_shapes" in n.attr:
            del n.attr["_output_shapes"]
    return g, feeds, meta


# Outputs where TensorFlow knows more, and why. Everything else must agree.
KNOWN_GAPS = {
    # TensorFlow refines a producer's shape from what its consumers require (Tile's
    # multiples give any_rank rank 2); unbound infers forward only.
    "any_rank:0": "refined backwards from a consumer",
}


def runtime_shapes(graph, feeds, keys):
    """The shapes the outputs `keys` have when TensorFlow runs the graph on `feeds`."""
    with v1.Session(graph=graph) as sess:
        values = sess.run([graph.get_tensor_by_name(f"{n}:{p}") for n, p in keys], feed_dict=feeds)
    return {k: list(np.shape(val)) for k, val in zip(keys, values)}


def shape_of(tp):
    if tp.shape.unknown_rank:
        return None
    return [d.size if d.size >= 0 else -1 for d in tp.shape.dim]


def main():
    binary, work = sys.argv[1], sys.argv[2]
    graph, feeds, meta = build()
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

    failed, gaps, beyond, agreed = [], [], [], 0
    compared = [k for k in sorted(theirs) if k in ours]
    for key in compared:
        (tdt, ts), (odt, os_) = theirs[key], ours[key]
        name = f"{key[0]}:{key[1]}"
        if tdt != odt:
            failed.append(f"{name}: dtype TF {tdt}, unbound {odt}")
        elif os_ is None and ts is None:
            agreed += 1
        elif os_ is None:
            gaps.append(f"{name}: TF {ts}, unbound unknown rank")
        elif ts is None:
            beyond.append(key)
        elif len(ts) != len(os_) or any(o >= 0 and t >= 0 and o != t for o, t in zip(os_, ts)):
            failed.append(f"{name}: TF {ts}, unbound {os_}")
        elif any(o >= 0 > t for o, t in zip(os_, ts)):
            beyond.append(key)
        elif any(t >= 0 > o for o, t in zip(os_, ts)):
            gaps.append(f"{name}: TF {ts}, unbound {os_}")
        else:
            agreed += 1
    # Where unbound knows more than TensorFlow's static inference, the graph's run decides.
    confirmed = 0
    for key, actual in runtime_shapes(graph, feeds, beyond).items():
        claimed = ours[key][1]
        name = f"{key[0]}:{key[1]}"
        if len(actual) == len(claimed) and all(c < 0 or c == a for c, a in zip(claimed, actual)):
            print(f"BEYOND {name}: TF {theirs[key][1]}, unbound {claimed}, at run time {actual}")
            confirmed += 1
        else:
            failed.append(f"{name}: unbound {claimed}, but at run time {actual}")
    known_gaps = [g for g in gaps if g.split(": ")[0] in KNOWN_GAPS]
    gaps = [g for g in gaps if g not in known_gaps]
    for g in known_gaps:
        print(f"KNOWN gap {g} ({KNOWN_GAPS[g.split(': ')[0]]})")
    failed += [f"gap {g}" for g in gaps]
    failed += [f"{n}:{p}: TF reports it, unbound does not" for (n, p) in theirs if (n, p) not in ours]
    for f in failed:
        print(f"FAIL {f}")
    known = sum(1 for k in compared if theirs[k][1] and any(d >= 0 for d in theirs[k][1]))
    print(f"shapes: {len(compared)} outputs compared ({known} with known dims in TF): {agreed} agree, "
          f"{confirmed} known beyond TF and confirmed at run time, {len(gaps)} gaps, "
          f"{len(known_gaps)} known gaps, {len(failed)} failed")
    return 1 if failed or len(compared) < 100 else 0


if __name__ == "__main__":
    sys.exit(main())

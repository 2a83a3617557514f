"""TensorFlow 2.21 runs an unbound-grappler-sdk plugin (prune-identity or fold-constants).

usage: grappler_sdk_in_tf.py prune|fold
       grappler_sdk_in_tf.py local|none PLUGIN.so


Run with a `tensorflow-plugins` directory holding the plugin under a `site-packages`
directory of sys.path (PYTHONPATH): TensorFlow's __init__ loads it. Builds a tf.compat.v1
graph pinned to /device:CPU:0 (plugins only run for device types in NodeDef.device), runs it in
a Session whose built-in passes that would do the same job are off, with
output_partition_graphs, once with plugin optimizers on and once with them off, in this
process, and checks the optimized graph TensorFlow reports and the fetched value.

`local` and `none` check how the SDK finds TensorFlow's functions, without importing
tensorflow: `local` loads libtensorflow_framework.so.2 and libtensorflow_cc.so.2 RTLD_LOCAL
(their TF_* symbols are then not in the global scope) and calls the plugin's TF_InitGraph as
TensorFlow does: the SDK finds TF_SetStatus through dlopen(soname, RTLD_NOLOAD) and registers.
`none` loads no TensorFlow: TF_InitGraph cannot report an error, so it leaves device_type unset
(TensorFlow would refuse the plugin with "'device_type' field ... must be set.").
Prints PASS/FAIL lines; exits 1 on any FAIL.
"""

import ctypes
import importlib.util
import os
import sys

failures = 0


def check(ok, what):
    global failures
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        failures += 1


def session_config(plugins_on):
    from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2

    # Every built-in pass that could remove Identity nodes or fold constants is off (model pruning
    # too). shape_optimization stays on: with every pass MetaOptimizerEnabled checks off,
    # TensorFlow reports "Meta Optimizer disabled" and skips Grappler, plugins included (plugins
    # do not count there); it only rewrites Shape/Size arithmetic, none here.
    off = rewriter_config_pb2.RewriterConfig.OFF
    rw = rewriter_config_pb2.RewriterConfig(
        disable_model_pruning=True,
        constant_folding=off,
        arithmetic_optimization=off,
        dependency_optimization=off,
        remapping=off,
        layout_optimizer=off,
        loop_optimization=off,
        function_optimization=off,
        common_subgraph_elimination=off,
        debug_stripper=off,
        pin_to_host_optimization=off,
        auto_mixed_precision=off,
        memory_optimization=rewriter_config_pb2.RewriterConfig.NO_MEM_OPT,
        min_graph_nodes=-1,
        use_plugin_optimizers=(
            rewriter_config_pb2.RewriterConfig.ON
            if plugins_on
            else rewriter_config_pb2.RewriterConfig.OFF
        ),
    )
    # The classic graph optimizer folds constants too (nodes named ".../_0__cf__0"): L0.
    classic = config_pb2.OptimizerOptions(
        opt_level=config_pb2.OptimizerOptions.L0, do_constant_folding=False
    )
    return config_pb2.ConfigProto(
        graph_options=config_pb2.GraphOptions(rewrite_options=rw, optimizer_options=classic)
    )


def run(graph, fetch, feed, plugins_on):
    """The fetched value and the partition graphs' nodes {name: op}."""
    import tensorflow as tf
    from tensorflow.core.protobuf import config_pb2
    with tf.compat.v1.Session(graph=graph, config=session_config(plugins_on)) as sess:
        md = config_pb2.RunMetadata()
        value = sess.run(
            fetch,
            feed_dict=feed,
            options=config_pb2.RunOptions(output_partition_graphs=True),
            run_metadata=md,
        )
    nodes = {}
    for pg in md.partition_graphs:
        for n in pg.node:
            nodes[n.name] = n.op
    return value, nodes


def prune_case():
    import numpy as np
    import tensorflow as tf

    g = tf.Graph()
    with g.as_default(), tf.device("/device:CPU:0"):
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        c1 = tf.identity(x, name="chain1")
        c2 = tf.identity(c1, name="chain2")
        c3 = tf.identity(c2, name="chain3")
        y = tf.math.multiply(c3, tf.constant(2.0, name="two"), name="y")
        out = tf.identity(y, name="out")
    feed = {x: np.array([1.0, 2.0, 3.0], np.float32)}
    with_plugin, nodes_on = run(g, out, feed, True)
    without, nodes_off = run(g, out, feed, False)
    chain = ["chain1", "chain2", "chain3"]
    print("  with plugin:    " + ", ".join(f"{k}:{v}" for k, v in sorted(nodes_on.items())))
    print("  plugins off:    " + ", ".join(f"{k}:{v}" for k, v in sorted(nodes_off.items())))
    check(all(nodes_off.get(c) == "Identity" for c in chain),
          "plugins off: the Identity chain is in TensorFlow's optimized graph")
    check(not any(c in nodes_on for c in chain),
          "plugin on: the Identity chain is gone from TensorFlow's optimized graph")
    check(nodes_on.get("out") == "Identity" and nodes_on.get("y") == "Mul",
          "plugin on: the fetched (preserved) Identity and the Mul are kept")
    check(np.array_equal(with_plugin, without) and np.array_equal(with_plugin, [2.0, 4.0, 6.0]),
          f"same fetched value with and without the plugin ({with_plugin} / {without})")


def fold_case():
    import numpy as np
    import tensorflow as tf

    g = tf.Graph()
    with g.as_default(), tf.device("/device:CPU:0"):
        a = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], name="a")
        b = tf.constant([10.0, 20.0, 30.5], name="b")
        s = tf.add(a, b, name="sum")  # AddV2 with broadcasting
        n = tf.negative(s, name="neg")
        i = tf.add(tf.constant(2147483647, name="imax"), tf.constant(1, name="ione"), name="iwrap")
        x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
        out = tf.identity(tf.math.multiply(n, x, name="scaled"), name="out")
        iout = tf.identity(i, name="iout")
        # NaN and signed zeros through Maximum/Minimum, RealDiv by zero, Sqrt, Square, Sub.
        p = tf.constant([np.nan, 1.0, 2.0, -0.0, 0.0, 9.0], name="p")
        q = tf.constant([1.0, np.nan, 3.0, 0.0, -0.0, 0.0], name="q")
        mix = tf.stack([
            tf.maximum(p, q, name="hi"), tf.minimum(p, q, name="lo"),
            tf.math.truediv(p, q, name="div"), tf.sqrt(p, name="root"),
            tf.square(tf.subtract(p, q, name="diff"), name="sq"),
        ], name="mix")
        mout = tf.identity(mix, name="mout")
    feed = {x: np.ones((2, 3), np.float32)}
    with_plugin, nodes_on = run(g, [out, iout, mout], feed, True)
    without, nodes_off = run(g, [out, iout, mout], feed, False)
    print("  with plugin:    " + ", ".join(f"{k}:{v}" for k, v in sorted(nodes_on.items())))
    print("  plugins off:    " + ", ".join(f"{k}:{v}" for k, v in sorted(nodes_off.items())))
    check(nodes_off.get("sum") == "AddV2" and nodes_off.get("neg") == "Neg"
          and nodes_off.get("iwrap") == "AddV2",
          "plugins off: the arithmetic on constants is in TensorFlow's optimized graph")
    # "sum" became a Const that nothing reads any more: TensorFlow drops it after Grappler.
    check(nodes_on.get("neg") == "Const" and nodes_on.get("iwrap") == "Const"
          and nodes_on.get("sum", "Const") == "Const"
          and not {"AddV2", "Neg"} & set(nodes_on.values()),
          "plugin on: the arithmetic on constants became Const nodes of the same names")
    check(nodes_on.get("scaled") == "Mul" and nodes_on.get("out") == "Identity",
          "plugin on: the op reading a placeholder and the fetched Identity are kept")
    check(all(nodes_on.get(k) == "Const" for k in ["hi", "lo", "div", "root", "sq"])
          and all(nodes_off.get(k) != "Const" for k in ["hi", "lo", "div", "root", "sq"]),
          "plugin on: Maximum/Minimum/RealDiv/Sqrt/Square/Sub on constants folded")
    # Bit for bit (NaN, -0.0 and inf included).
    same = all(
        p.dtype == q.dtype and p.shape == q.shape and p.tobytes() == q.tobytes()
        for p, q in zip(with_plugin, without)
    )
    check(same and with_plugin[1] == -2147483648,
          f"same fetched values, bit for bit, with and without the plugin; int32 add wraps "
          f"({with_plugin[1]})")


class Params(ctypes.Structure):
    """TP_OptimizerRegistrationParams."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("ext", ctypes.c_void_p),
        ("major_version", ctypes.c_int32),
        ("minor_version", ctypes.c_int32),
        ("patch_version", ctypes.c_int32),
        ("device_type", ctypes.c_char_p),
        ("optimizer_configs", ctypes.c_void_p),
        ("optimizer", ctypes.c_void_p),
    ]


def init_graph(plugin, status):
    """Calls TF_InitGraph as TensorFlow does; returns the params."""
    configs = (ctypes.c_uint8 * 96)()
    optimizer = (ctypes.c_uint8 * 40)()
    ctypes.c_size_t.from_buffer(configs).value = 92
    ctypes.c_size_t.from_buffer(optimizer).value = 40
    params = Params(56, None, 0, 0, 1, None, ctypes.addressof(configs), ctypes.addressof(optimizer))
    ctypes.CDLL(plugin).TF_InitGraph(ctypes.byref(params), ctypes.c_void_p(status))
    return params


def resolve_case(mode, plugin):
    if mode == "none":
        params = init_graph(plugin, None)
        check(params.device_type is None,
              "no TensorFlow in the process: TF_InitGraph registers nothing (device_type unset)")
        return
    tf_dir = os.path.dirname(importlib.util.find_spec("tensorflow").origin)
    framework = ctypes.CDLL(os.path.join(tf_dir, "libtensorflow_framework.so.2"))  # RTLD_LOCAL
    ctypes.CDLL(os.path.join(tf_dir, "libtensorflow_cc.so.2"))
    check(not hasattr(ctypes.CDLL(None), "TF_SetStatus"),
          "TensorFlow loaded RTLD_LOCAL: TF_SetStatus is not in the global scope")
    framework.TF_NewStatus.restype = ctypes.c_void_p
    framework.TF_GetCode.argtypes = [ctypes.c_void_p]
    status = framework.TF_NewStatus()
    params = init_graph(plugin, status)
    check(framework.TF_GetCode(status) == 0 and params.device_type == b"CPU",
          "TensorFlow loaded RTLD_LOCAL: the SDK finds it (RTLD_NOLOAD) and registers for CPU")


if __name__ == "__main__":
    if sys.argv[1] in ("local", "none"):
        resolve_case(sys.argv[1], sys.argv[2])
    else:
        {"prune": prune_case, "fold": fold_case}[sys.argv[1]]()
    sys.exit(1 if failures else 0)

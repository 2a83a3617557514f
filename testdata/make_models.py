#!/usr/bin/env python3
"""Generates the TensorFlow-made golden models under testdata/models/.

Run with the TensorFlow 2.21 venv (scripts/tf-venv.sh):

    "$(scripts/tf-venv.sh | tail -n 1)/bin/python" testdata/make_models.py

Writes (replacing what is there):

  models/tf2_multi_sig/        TF2 tf.Module, tf.saved_model.save, 5 signatures,
                               variables of 9 dtypes (incl. half, bfloat16, string)
  models/tf1_large_consts/     TF1 SavedModelBuilder; Consts with tensor_content
                               of 1 KB .. 200 KB, inline float_val/int_val Consts,
                               a string Const, a function library, one variable
  models/frozen_graph.pb       a frozen GraphDef (variables folded into Consts)
  models/<name>.expected.json  what TensorFlow itself reports about each model
                               (see testdata/README.md for the fields)

Deterministic where TensorFlow allows: all values come from fixed seeds and
the script builds everything in one fresh process in a fixed order. What is
NOT reproducible between runs: fingerprint.pb's uuid (random by design) and
therefore fingerprint.pb's bytes.
"""

import json
import os
import shutil
import struct
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.framework import attr_value_pb2  # noqa: E402
from tensorflow.core.framework import graph_pb2  # noqa: E402
from tensorflow.core.framework import tensor_pb2  # noqa: E402
from tensorflow.core.framework import tensor_shape_pb2  # noqa: E402
from tensorflow.core.framework import types_pb2  # noqa: E402
from tensorflow.core.protobuf import fingerprint_pb2  # noqa: E402
from tensorflow.core.protobuf import saved_model_pb2  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "models")
TF_VERSION = "2.21.0"

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3


def fnv1a64(data, h=FNV_OFFSET):
    """FNV-1a 64 (same definition as interop/merger_harness.cc)."""
    for b in data:
        h ^= b
        h = (h * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


# --------------------------------------------------------------- (a) TF2 ----


class MultiSig(tf.Module):
    """Several signatures over variables of many dtypes."""

    def __init__(self):
        super().__init__(name="multi_sig")
        rng = np.random.default_rng(20240601)
        self.w_f32 = tf.Variable(
            rng.standard_normal((4, 3)).astype(np.float32), name="w_f32")
        self.b_f64 = tf.Variable(
            rng.standard_normal(3).astype(np.float64), name="b_f64")
        self.count_i32 = tf.Variable(np.arange(5, dtype=np.int32), name="count_i32")
        self.big_i64 = tf.Variable(
            np.array([[1, 2**40], [-3, 2**62]], dtype=np.int64), name="big_i64")
        self.mask_bool = tf.Variable([True, False, True], name="mask_bool")
        self.vocab_str = tf.Variable(
            [b"alpha", b"beta", b"\xff\x00binary"], dtype=tf.string, name="vocab_str")
        self.h_f16 = tf.Variable(
            np.array([0.5, -1.25, 2.0, 65504.0], dtype=np.float16), name="h_f16")
        self.w_bf16 = tf.Variable(
            tf.constant([1.0, -2.0, 3.5], dtype=tf.bfloat16), name="w_bf16")
        self.step = tf.Variable(
            np.int64(0), dtype=tf.int64, trainable=False, name="step")

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def predict(self, x):
        return {"y": tf.matmul(x, self.w_f32) + tf.cast(self.b_f64, tf.float32)}

    @tf.function(input_signature=[
        tf.TensorSpec([None], tf.int32, name="a"),
        tf.TensorSpec([None], tf.int64, name="b"),
    ])
    def add_ints(self, a, b):
        return {
            "sum": tf.cast(a, tf.int64) + b,
            "count_total": tf.reduce_sum(self.count_i32),
            "big_max": tf.reduce_max(self.big_i64),
        }

    @tf.function(input_signature=[tf.TensorSpec([], tf.string, name="prefix")])
    def greet(self, prefix):
        return {"greeting": tf.strings.join([prefix, self.vocab_str[0]], separator=" ")}

    @tf.function(input_signature=[tf.TensorSpec([3], tf.bool, name="flags")])
    def logic(self, flags):
        return {
            "and": tf.logical_and(flags, self.mask_bool),
            "half": tf.cast(self.h_f16, tf.float32),
            "bf16": tf.cast(self.w_bf16, tf.float32),
        }

    @tf.function(input_signature=[])
    def increment(self):
        self.step.assign_add(1)
        return {"step": self.step.read_value()}


def make_tf2_multi_sig(path):
    m = MultiSig()
    signatures = {
        "serving_default": m.predict,
        "add_ints": m.add_ints,
        "greet": m.greet,
        "logic": m.logic,
        "increment": m.increment,
    }
    tf.saved_model.save(m, path, signatures=signatures)


# --------------------------------------------------------------- (b) TF1 ----


def _const_from_proto(graph, name, tensor_proto):
    """Adds a Const node whose TensorProto is exactly `tensor_proto`."""
    return graph.create_op(
        "Const", [], [tensor_proto.dtype],
        attrs={
            "value": attr_value_pb2.AttrValue(tensor=tensor_proto),
            "dtype": attr_value_pb2.AttrValue(type=tensor_proto.dtype),
        },
        name=name).outputs[0]


def _shape(*dims):
    return tensor_shape_pb2.TensorShapeProto(
        dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in dims])


def make_tf1_large_consts(path):
    rng = np.random.default_rng(1234)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 16], name="x")
        # tensor_content Consts of increasing size (bytes = elements * 4 or 8).
        c1k = tf.constant(rng.standard_normal(256).astype(np.float32), name="const_1k")
        c10k = tf.constant(
            rng.standard_normal((40, 64)).astype(np.float32), name="const_10k")
        c50k = tf.constant(
            rng.standard_normal(6400).astype(np.float64), name="const_50k_f64")
        c64k_i32 = tf.constant(
            rng.integers(-1000, 1000, size=(128, 128), dtype=np.int32),
            name="const_64k_i32")
        c200k = tf.constant(
            rng.standard_normal((16, 3200)).astype(np.float32), name="const_200k")
        # Values given inline (float_val / int_val), not tensor_content.
        inline_f = _const_from_proto(g, "inline_float_val", tensor_pb2.TensorProto(
            dtype=types_pb2.DT_FLOAT, tensor_shape=_shape(4),
            float_val=[1.0, 2.5, -3.0, 4.25]))
        inline_i = _const_from_proto(g, "inline_int_val", tensor_pb2.TensorProto(
            dtype=types_pb2.DT_INT32, tensor_shape=_shape(3), int_val=[7, -8, 9]))
        # A fill: one float_val broadcast over a [16, 16] shape.
        fill = tf.constant(0.5, shape=[16, 16], dtype=tf.float32, name="inline_fill")
        strings = tf.constant([b"hello", b"world", b"\x00\xffbytes"], name="const_strings")

        w = tf.compat.v1.get_variable(
            "dense/kernel", initializer=rng.standard_normal((16, 16)).astype(np.float32),
            use_resource=True)

        # A function in the graph's library, itself holding a tensor_content Const.
        scale_values = rng.standard_normal(16).astype(np.float32)

        @tf.function(input_signature=[tf.TensorSpec([None, 16], tf.float32)])
        def scale_and_shift(t):
            k = tf.constant(np.tile(scale_values, 64).reshape(64, 16), name="fn_const_4k")
            return t * tf.reduce_mean(k, axis=0) + tf.reduce_sum(inline_f)

        h = tf.matmul(x, w) + tf.matmul(x, fill)
        h = scale_and_shift(h)
        y = tf.identity(
            h + tf.reduce_sum(c1k) + tf.reduce_sum(c10k)
            + tf.cast(tf.reduce_sum(c50k), tf.float32)
            + tf.cast(tf.reduce_sum(c64k_i32) + tf.reduce_sum(inline_i), tf.float32)
            + tf.reduce_sum(c200k),
            name="y")
        n = tf.strings.length(strings, name="string_lengths")

        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            builder = tf.compat.v1.saved_model.Builder(path)
            sig = tf.compat.v1.saved_model.predict_signature_def(
                inputs={"x": x}, outputs={"y": y, "string_lengths": n})
            builder.add_meta_graph_and_variables(
                sess, [tf.saved_model.SERVING],
                signature_def_map={"serving_default": sig},
                strip_default_attrs=True)
            builder.save()


# ------------------------------------------------------------ (c) frozen ----


def make_frozen_graph(path):
    rng = np.random.default_rng(99)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 8], name="input")
        w1 = tf.compat.v1.get_variable(
            "w1", initializer=rng.standard_normal((8, 32)).astype(np.float32))
        b1 = tf.constant(rng.standard_normal(32).astype(np.float32), name="b1")
        w2 = tf.compat.v1.get_variable(
            "w2", initializer=rng.standard_normal((32, 4)).astype(np.float32))
        offset = tf.constant(2.0, name="offset")
        h = tf.nn.relu(tf.matmul(x, w1) + b1)
        tf.identity(tf.matmul(h, w2) * offset, name="output")
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            frozen = tf.compat.v1.graph_util.convert_variables_to_constants(
                sess, g.as_graph_def(), ["output"])
    with open(path, "wb") as f:
        f.write(frozen.SerializeToString(deterministic=True))


# ---------------------------------------------------------- expectations ----


def _shape_list(shape_proto):
    if shape_proto.unknown_rank:
        return None
    return [d.size for d in shape_proto.dim]


def _tensor_info(ti):
    return {
        "name": ti.name,
        "dtype": types_pb2.DataType.Name(ti.dtype),
        "shape": _shape_list(ti.tensor_shape),
    }


def _value_source(t):
    if t.tensor_content:
        return "tensor_content"
    for field in ("float_val", "double_val", "int_val", "int64_val", "string_val",
                  "bool_val", "half_val", "uint32_val", "uint64_val"):
        if len(getattr(t, field)):
            return field
    return "empty"


def _tensor_entries(nodes, function=None):
    out = []
    for n in nodes:
        if "value" not in n.attr or not n.attr["value"].HasField("tensor"):
            continue
        t = n.attr["value"].tensor
        e = {}
        if function is not None:
            e["function"] = function
        e.update({
            "name": n.name,
            "op": n.op,
            "dtype": types_pb2.DataType.Name(t.dtype),
            "shape": _shape_list(t.tensor_shape),
            "value_source": _value_source(t),
            "tensor_content_bytes": len(t.tensor_content),
            "tensor_content_fnv1a64": "%016x" % fnv1a64(t.tensor_content),
        })
        out.append(e)
    return out


def graph_expectations(gd):
    running = FNV_OFFSET
    total = 0
    for n in gd.node:
        if "value" in n.attr and n.attr["value"].HasField("tensor"):
            c = n.attr["value"].tensor.tensor_content
            running = fnv1a64(c, running)
            total += len(c)
    for f in gd.library.function:
        for n in f.node_def:
            if "value" in n.attr and n.attr["value"].HasField("tensor"):
                c = n.attr["value"].tensor.tensor_content
                running = fnv1a64(c, running)
                total += len(c)
    return {
        "nodes": len(gd.node),
        "node_names": [n.name for n in gd.node],
        "functions": sorted(f.signature.name for f in gd.library.function),
        "function_nodes": sum(len(f.node_def) for f in gd.library.function),
        "producer": gd.versions.producer,
        "node_tensors": _tensor_entries(gd.node),
        "function_tensors": [
            e for f in gd.library.function
            for e in _tensor_entries(f.node_def, f.signature.name)],
        "tensor_content_total_bytes": total,
        "tensor_content_fnv1a64": "%016x" % running,
    }


def saved_model_expectations(path):
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        data = f.read()
    sm = saved_model_pb2.SavedModel()
    sm.ParseFromString(data)
    mg = sm.meta_graphs[0]
    sigs = {}
    for key in sorted(mg.signature_def):
        s = mg.signature_def[key]
        sigs[key] = {
            "method_name": s.method_name,
            "inputs": {k: _tensor_info(s.inputs[k]) for k in sorted(s.inputs)},
            "outputs": {k: _tensor_info(s.outputs[k]) for k in sorted(s.outputs)},
        }
    reader = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
    dtypes = reader.get_variable_to_dtype_map()
    shapes = reader.get_variable_to_shape_map()
    variables = {
        k: {"dtype": dtypes[k].name, "shape": list(shapes[k])} for k in sorted(shapes)
    }
    fp = None
    if os.path.exists(os.path.join(path, "fingerprint.pb")):
        fp = fingerprint_pb2.FingerprintDef()
        with open(os.path.join(path, "fingerprint.pb"), "rb") as f:
            fp.ParseFromString(f.read())
    files = sorted(
        os.path.relpath(os.path.join(d, f), path)
        for d, _, fs in os.walk(path) for f in fs)
    return {
        "files": files,
        "saved_model_pb_bytes": len(data),
        "saved_model_version": sm.saved_model_schema_version,
        "meta_graphs": len(sm.meta_graphs),
        "tags": list(mg.meta_info_def.tags),
        "tensorflow_version": mg.meta_info_def.tensorflow_version,
        "signatures": sigs,
        "object_graph_nodes": len(mg.object_graph_def.nodes),
        "concrete_functions": sorted(mg.object_graph_def.concrete_functions),
        "variables": variables,
        # fingerprint.pb as TensorFlow wrote it at save time (null when TF
        # wrote none: SavedModelBuilder does not). The uuid is random per save;
        # uint64 values are decimal strings.
        "fingerprint": None if fp is None else {
            "saved_model_checksum": str(fp.saved_model_checksum),
            "graph_def_program_hash": str(fp.graph_def_program_hash),
            "signature_def_hash": str(fp.signature_def_hash),
            "saved_object_graph_hash": str(fp.saved_object_graph_hash),
            "checkpoint_hash": str(fp.checkpoint_hash),
            "version_producer": fp.version.producer,
        },
        "graph": graph_expectations(mg.graph_def),
    }


def frozen_expectations(path):
    gd = graph_pb2.GraphDef()
    with open(path, "rb") as f:
        data = f.read()
    gd.ParseFromString(data)
    return {"graph_def_bytes": len(data), "graph": graph_expectations(gd)}


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")


def main():
    if tf.__version__ != TF_VERSION:
        sys.exit(f"make_models.py: needs TensorFlow {TF_VERSION}, found {tf.__version__}")
    tf.get_logger().setLevel("ERROR")
    np.random.seed(0)
    tf.random.set_seed(0)
    os.makedirs(OUT, exist_ok=True)
    for name in ("tf2_multi_sig", "tf1_large_consts"):
        shutil.rmtree(os.path.join(OUT, name), ignore_errors=True)

    make_tf2_multi_sig(os.path.join(OUT, "tf2_multi_sig"))
    make_tf1_large_consts(os.path.join(OUT, "tf1_large_consts"))
    make_frozen_graph(os.path.join(OUT, "frozen_graph.pb"))

    for name in ("tf2_multi_sig", "tf1_large_consts"):
        exp = saved_model_expectations(os.path.join(OUT, name))
        exp["generator"] = "testdata/make_models.py"
        exp["tf_version"] = tf.__version__
        write_json(os.path.join(OUT, name + ".expected.json"), exp)
    exp = frozen_expectations(os.path.join(OUT, "frozen_graph.pb"))
    exp["generator"] = "testdata/make_models.py"
    exp["tf_version"] = tf.__version__
    write_json(os.path.join(OUT, "frozen_graph.expected.json"), exp)

    total = sum(os.path.getsize(os.path.join(d, f))
                for d, _, fs in os.walk(OUT) for f in fs)
    print(f"wrote {OUT} ({total} bytes)")


if __name__ == "__main__":
    main()

"""Records what TensorFlow 2.21's DTensor does with small programs, for `unbound plan` to match.

    python interop/plan/record.py OUTDIR

For every case below (each op family `unbound plan` has a rule for, on meshes 2x4 and 8, with
inputs sharded on each axis, operands laid out differently, contracting and reduced axes
sharded, and programs DTensor refuses), it

- saves the case's tf.function as a SavedModel, OUTDIR/<case>/ (plain variables; signature
  `serving_default`, outputs `out0`, `out1`, ...);
- runs the same function under DTensor on 8 logical CPU devices, the inputs and variables laid
  out as the case says, and records `dtensor.fetch_layout` of every output, or DTensor's
  refusal (the first line of its error);

and writes OUTDIR/expected.json: one entry per case with the mesh, the layouts given (the
variables by object path, `vars/NAME`), the static shapes and what DTensor gave. `check.py` plans each model with `unbound plan` and
compares.

The collectives: TensorFlow dumps the graphs it runs when TF_DUMP_GRAPH_PREFIX is set. After
DTensor's SPMD expansion and lowering, device CPU:0's partition of the case's function holds
one `Collective*V2` op per collective DTensor emitted (an all-gather lowers to an all-reduce
of a zero-padded buffer on CPU); their number, by op type, is recorded as `collectives`.
"""

import glob
import json
import os
import re
import shutil
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
DUMP = os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", ".graph_dump")
os.environ["TF_DUMP_GRAPH_PREFIX"] = DUMP
os.environ["TF_DUMP_GRAPH_NAME_FILTER"] = "*"
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.experimental import dtensor  # noqa: E402

U = "unsharded"
MESHES = {"2x4": [("x", 2), ("y", 4)], "8": [("x", 8)]}


def case(name, mesh, inputs, body, variables=None):
    """inputs: [(name, shape, dtype, specs)]; variables: [(name, shape, specs)]."""
    return dict(name=name, mesh=mesh, inputs=inputs, body=body, variables=variables or [])


def f32(name, shape, specs):
    return (name, shape, tf.float32, specs)


def i32(name, shape, specs):
    return (name, shape, tf.int32, specs)


def cases():
    c = []
    # MatMul: every combination of row / contracting / column sharding on 2x4.
    for a in ([U, U], ["x", U], [U, "x"], ["y", U], [U, "y"], ["x", "y"]):
        for b in ([U, U], [U, "y"], ["y", U], ["x", U], [U, "x"]):
            c.append(case(f"matmul_{'_'.join(a)}__{'_'.join(b)}", "2x4",
                          [f32("a", [8, 16], a), f32("b", [16, 8], b)],
                          lambda v, a, b: [tf.matmul(a, b)]))
    c.append(case("matmul_transpose_b", "2x4", [f32("a", [8, 16], ["x", "y"]), f32("b", [8, 16], [U, "y"])],
                  lambda v, a, b: [tf.matmul(a, b, transpose_b=True)]))
    c.append(case("matmul_mesh8_contract", "8", [f32("a", [8, 16], [U, "x"]), f32("b", [16, 8], ["x", U])],
                  lambda v, a, b: [tf.matmul(a, b)]))
    c.append(case("batch_matmul", "2x4", [f32("a", [4, 8, 16], ["x", U, "y"]), f32("b", [4, 16, 8], [U, "y", U])],
                  lambda v, a, b: [tf.linalg.matmul(a, b)]))
    c.append(case("batch_matmul_batch", "2x4", [f32("a", [4, 8, 16], ["x", "y", U]), f32("b", [4, 16, 8], ["x", U, U])],
                  lambda v, a, b: [tf.linalg.matmul(a, b)]))
    # Einsum.
    c.append(case("einsum_bsd_df", "2x4", [f32("a", [4, 8, 16], ["x", U, "y"]), f32("b", [16, 8], ["y", U])],
                  lambda v, a, b: [tf.einsum("bsd,df->bsf", a, b)]))
    c.append(case("einsum_out_sharded", "2x4", [f32("a", [4, 8, 16], ["x", U, U]), f32("b", [16, 8], [U, "y"])],
                  lambda v, a, b: [tf.einsum("bsd,df->bsf", a, b)]))
    c.append(case("einsum_conflict", "2x4", [f32("a", [8, 16], [U, "x"]), f32("b", [16, 8], ["y", U])],
                  lambda v, a, b: [tf.einsum("ij,jk->ik", a, b)]))
    # Elementwise and broadcasting.
    c.append(case("add_same", "2x4", [f32("a", [8, 8], ["x", U]), f32("b", [8, 8], ["x", U])], lambda v, a, b: [a + b]))
    c.append(case("add_mismatch", "2x4", [f32("a", [8, 8], ["x", U]), f32("b", [8, 8], [U, "y"])], lambda v, a, b: [a + b]))
    c.append(case("add_clash", "2x4", [f32("a", [8, 8], ["x", U]), f32("b", [8, 8], [U, "x"])], lambda v, a, b: [a * b]))
    c.append(case("add_broadcast_vector", "2x4", [f32("a", [8, 8], ["x", U]), f32("b", [8], ["y"])], lambda v, a, b: [a + b]))
    c.append(case("add_broadcast_ones", "2x4", [f32("a", [8, 8], [U, "y"]), f32("b", [8, 1], ["x", U])], lambda v, a, b: [a - b]))
    c.append(case("unary_chain", "8", [f32("a", [8, 8], ["x", U])], lambda v, a: [tf.nn.relu(tf.exp(a) * 2.0), tf.tanh(a)]))
    c.append(case("cast", "2x4", [f32("a", [8, 8], [U, "y"])], lambda v, a: [tf.cast(a, tf.int32)]))
    c.append(case("add_const", "2x4", [f32("a", [8, 8], ["x", "y"])], lambda v, a: [a + tf.constant(np.arange(8, dtype=np.float32))]))
    c.append(case("select", "2x4", [f32("a", [8, 8], ["x", U]), f32("b", [8, 8], [U, "y"])],
                  lambda v, a, b: [tf.where(a > b, a, b)]))
    c.append(case("bias_add", "2x4", [f32("a", [8, 16], ["x", U]), f32("b", [16], ["y"])], lambda v, a, b: [tf.nn.bias_add(a, b)]))
    c.append(case("bias_add_nchw", "2x4", [f32("a", [2, 4, 8, 8], ["x", U, U, U]), f32("b", [4], ["y"])],
                  lambda v, a, b: [tf.nn.bias_add(a, b, data_format="NCHW")]))
    # Softmax.
    c.append(case("softmax_batch", "2x4", [f32("a", [8, 16], ["x", U])], lambda v, a: [tf.nn.softmax(a)]))
    c.append(case("softmax_last_sharded", "2x4", [f32("a", [8, 16], ["x", "y"])], lambda v, a: [tf.nn.softmax(a)]))
    c.append(case("log_softmax_last", "8", [f32("a", [8, 16], [U, "x"])], lambda v, a: [tf.nn.log_softmax(a)]))
    # Reductions.
    for axis in (0, 1, -1):
        c.append(case(f"sum_axis{axis % 3}", "2x4", [f32("a", [8, 16, 4], ["x", "y", U])],
                      lambda v, a, axis=axis: [tf.reduce_sum(a, axis=axis)]))
    c.append(case("mean_keepdims", "2x4", [f32("a", [8, 16], ["x", "y"])], lambda v, a: [tf.reduce_mean(a, axis=1, keepdims=True)]))
    c.append(case("max_all", "2x4", [f32("a", [8, 16], ["x", "y"])], lambda v, a: [tf.reduce_max(a)]))
    c.append(case("min_prod", "8", [f32("a", [8, 16], ["x", U])], lambda v, a: [tf.reduce_min(a, axis=0), tf.reduce_prod(a, axis=1)]))
    c.append(case("argmax_sharded_axis", "2x4", [f32("a", [8, 16], ["x", "y"])], lambda v, a: [tf.argmax(a, axis=1)]))
    c.append(case("argmin", "2x4", [f32("a", [8, 16], ["x", U])], lambda v, a: [tf.argmin(a, axis=1)]))
    # Reshape, transpose, expand/squeeze.
    c.append(case("reshape_merge", "2x4", [f32("a", [8, 4, 4], ["x", "y", U])], lambda v, a: [tf.reshape(a, [8, 16])]))
    c.append(case("reshape_split", "2x4", [f32("a", [8, 16], ["x", "y"])], lambda v, a: [tf.reshape(a, [8, 4, 4])]))
    c.append(case("reshape_flatten", "2x4", [f32("a", [4, 8], ["x", "y"])], lambda v, a: [tf.reshape(a, [32])]))
    c.append(case("transpose", "2x4", [f32("a", [8, 16, 4], ["x", "y", U])], lambda v, a: [tf.transpose(a, [2, 0, 1])]))
    c.append(case("expand_squeeze", "2x4", [f32("a", [8, 16], ["x", "y"])],
                  lambda v, a: [tf.expand_dims(a, 1), tf.squeeze(tf.expand_dims(a, -1), -1)]))
    # Concat, split, pack.
    c.append(case("concat_free_axis", "2x4", [f32("a", [8, 8], ["x", U]), f32("b", [8, 8], ["x", U])],
                  lambda v, a, b: [tf.concat([a, b], axis=1)]))
    c.append(case("concat_sharded_axis", "2x4", [f32("a", [8, 8], ["x", "y"]), f32("b", [8, 8], [U, "y"])],
                  lambda v, a, b: [tf.concat([a, b], axis=0)]))
    c.append(case("split_free_axis", "2x4", [f32("a", [8, 16], ["x", U])], lambda v, a: tf.split(a, 2, axis=1)))
    c.append(case("split_sharded_axis", "2x4", [f32("a", [8, 16], ["x", U])], lambda v, a: tf.split(a, 2, axis=0)))
    c.append(case("stack", "2x4", [f32("a", [8, 8], ["x", U]), f32("b", [8, 8], ["x", "y"])], lambda v, a, b: [tf.stack([a, b])]))
    # Slices.
    c.append(case("slice_full_rows", "2x4", [f32("a", [8, 16], ["x", "y"])], lambda v, a: [tf.slice(a, [0, 0], [8, 8])]))
    c.append(case("strided_slice_columns", "2x4", [f32("a", [8, 16], ["x", "y"])], lambda v, a: [a[:, 2:10]]))
    c.append(case("strided_slice_shrink", "2x4", [f32("a", [8, 16, 4], ["x", "y", U])], lambda v, a: [a[:, 3]]))
    c.append(case("strided_slice_shrink_last", "2x4", [f32("a", [8, 16, 4], ["x", "y", U])], lambda v, a: [a[..., 0]]))
    # Not recorded: a[1:, :, None] (a new axis before an implicit one) crashes TensorFlow 2.21's
    # DTensor (a segmentation fault, or "sharding spec (" when other ops come first); the plan
    # refuses it.
    c.append(case("strided_slice_ellipsis", "2x4", [f32("a", [8, 16, 4], [U, "y", "x"])], lambda v, a: [a[0, ...]]))
    # Gather.
    c.append(case("gather_params_rows", "2x4", [f32("p", [16, 8], ["x", U]), i32("i", [4], [U])],
                  lambda v, p, i: [tf.gather(p, i)]))
    c.append(case("gather_indices_sharded", "2x4", [f32("p", [16, 8], [U, "y"]), i32("i", [4, 2], ["x", U])],
                  lambda v, p, i: [tf.gather(p, i)]))
    c.append(case("gather_axis1", "8", [f32("p", [8, 16], ["x", U]), i32("i", [8], [U])],
                  lambda v, p, i: [tf.gather(p, i, axis=1)]))
    c.append(case("embedding_lookup", "2x4", [i32("i", [8, 4], ["x", U])],
                  lambda v, i: [tf.nn.embedding_lookup(v["table"], i)], [("table", [32, 16], [U, "y"])]))
    c.append(case("embedding_rows_sharded", "2x4", [i32("i", [8, 4], ["x", U])],
                  lambda v, i: [tf.nn.embedding_lookup(v["table"], i)], [("table", [32, 16], ["y", U])]))
    # Convolutions.
    c.append(case("conv_batch", "2x4", [f32("img", [8, 6, 6, 3], ["x", U, U, U]), f32("w", [3, 3, 3, 4], [U, U, U, U])],
                  lambda v, img, w: [tf.nn.conv2d(img, w, 1, "SAME")]))
    c.append(case("conv_filter_sharded", "2x4", [f32("img", [8, 6, 6, 3], ["x", U, U, U]), f32("w", [3, 3, 3, 4], [U, U, U, "y"])],
                  lambda v, img, w: [tf.nn.conv2d(img, w, 1, "SAME")]))
    c.append(case("conv_channel_sharded", "8", [f32("img", [8, 6, 6, 8], [U, U, U, "x"]), f32("w", [1, 1, 8, 4], [U, U, U, U])],
                  lambda v, img, w: [tf.nn.conv2d(img, w, 1, "SAME")]))
    # Pad.
    c.append(case("pad", "2x4", [f32("a", [8, 16], ["x", U])], lambda v, a: [tf.pad(a, [[0, 0], [1, 1]])]))
    # Variables: reads, matmul with a sharded kernel, writes.
    c.append(case("dense_model_parallel", "2x4", [f32("a", [8, 16], ["x", U])],
                  lambda v, a: [tf.matmul(a, v["kernel"]) + v["bias"]],
                  [("kernel", [16, 8], [U, "y"]), ("bias", [8], ["y"])]))
    c.append(case("dense_row_sharded_kernel", "2x4", [f32("a", [8, 16], ["x", U])],
                  lambda v, a: [tf.nn.relu(tf.matmul(a, v["kernel"]))],
                  [("kernel", [16, 8], ["y", U])]))
    c.append(case("variable_assign", "2x4", [f32("a", [8, 16], ["x", U])],
                  lambda v, a: [v["acc"].assign_add(tf.reduce_sum(a, axis=0)).read_value()],
                  [("acc", [16], ["y"])]))
    # Calls: a nested tf.function.
    inner = tf.function(lambda a, b: tf.matmul(a, b) * 2.0)
    c.append(case("nested_function", "2x4", [f32("a", [8, 16], ["x", "y"]), f32("b", [16, 8], ["y", U])],
                  lambda v, a, b: [tf.nn.softmax(inner(a, b))]))
    # A little MLP with a sharded contracting axis and a reduce.
    c.append(case("mlp_loss", "2x4", [f32("a", [8, 16], ["x", U])],
                  lambda v, a: [tf.reduce_mean(tf.nn.relu(tf.matmul(tf.nn.relu(tf.matmul(a, v["w1"])), v["w2"])))],
                  [("w1", [16, 32], [U, "y"]), ("w2", [32, 8], ["y", U])]))
    # A transformer block (layer norm, multi-head attention, MLP) on 2x4: data parallel on x,
    # heads and MLP columns model parallel on y; and the same block purely data parallel.
    for name, model_parallel in (("transformer_block_dp_mp", True), ("transformer_block_dp", False)):
        y = "y" if model_parallel else U
        c.append(case(name, "2x4", [f32("x", [8, 16, 32], ["x", U, U])], transformer_block, [
            ("ln_g", [32], [U]), ("ln_b", [32], [U]),
            ("wq", [32, 4, 8], [U, y, U]), ("wk", [32, 4, 8], [U, y, U]), ("wv", [32, 4, 8], [U, y, U]),
            ("wo", [4, 8, 32], [y, U, U]),
            ("w1", [32, 64], [U, y]), ("b1", [64], [y]), ("w2", [64, 32], [y, U]),
        ]))
    return c


def transformer_block(v, x):
    mu = tf.reduce_mean(x, axis=-1, keepdims=True)
    var = tf.reduce_mean(tf.square(x - mu), axis=-1, keepdims=True)
    h = (x - mu) * tf.math.rsqrt(var + 1e-6) * v["ln_g"] + v["ln_b"]
    q = tf.einsum("bsd,dhk->bshk", h, v["wq"])
    k = tf.einsum("bsd,dhk->bshk", h, v["wk"])
    val = tf.einsum("bsd,dhk->bshk", h, v["wv"])
    p = tf.nn.softmax(tf.einsum("bshk,bthk->bhst", q, k) * (8 ** -0.5))
    ctx = tf.einsum("bhst,bthk->bshk", p, val)
    x2 = x + tf.einsum("bshk,hkd->bsd", ctx, v["wo"])
    m = tf.nn.relu(tf.einsum("bsd,df->bsf", x2, v["w1"]) + v["b1"])
    return [x2 + tf.einsum("bsf,fd->bsd", m, v["w2"])]


def make_module(cs):
    variables = {name: tf.Variable(tf.random.stateless_normal(shape, seed=[1, 2]), name=name)
                 for name, shape, _ in cs["variables"]}
    sig = [tf.TensorSpec(shape, dtype, name=name) for name, shape, dtype, _ in cs["inputs"]]
    body = cs["body"]

    class M(tf.Module):
        pass

    m = M()
    m.vars = variables

    @tf.function(input_signature=sig)
    def serve(*args):
        return {f"out{i}": t for i, t in enumerate(body(m.vars, *args))}

    m.serve = serve
    return m


def run_dtensor(cs, devices):
    mesh = dtensor.create_mesh(MESHES[cs["mesh"]], devices=devices)
    rng = np.random.default_rng(0)
    args = []
    for name, shape, dtype, specs in cs["inputs"]:
        if dtype == tf.int32:
            value = rng.integers(0, min(shape[0] if name != "i" else 8, 8), size=shape).astype(np.int32)
        else:
            value = rng.standard_normal(shape).astype(np.float32)
        rep = dtensor.copy_to_mesh(tf.constant(value), dtensor.Layout.replicated(mesh, len(shape)))
        args.append(dtensor.relayout(rep, dtensor.Layout(specs, mesh)))
    variables = {}
    for name, shape, specs in cs["variables"]:
        init = dtensor.copy_to_mesh(tf.random.stateless_normal(shape, seed=[1, 2]),
                                    dtensor.Layout.replicated(mesh, len(shape)))
        variables[name] = dtensor.DVariable(dtensor.relayout(init, dtensor.Layout(specs, mesh)), name=name)
    body = cs["body"]

    @tf.function
    def run(*a):
        return body(variables, *a)

    outs = run(*args)
    return {f"out{i}": list(dtensor.fetch_layout(t).sharding_specs) for i, t in enumerate(outs)}


COLLECTIVE_OP = re.compile(r'op: "(Collective\w+V2)"')


def dumped_collectives():
    """The Collective*V2 ops in device CPU:0's partition of the function `run` (the graph
    dumped before partition passes that holds the most: the function is dumped once per
    pass and piece), then the dump cleared."""
    files = glob.glob(os.path.join(DUMP, "__inference_run_*CPU:0*before_partition_passes*"))
    found = [COLLECTIVE_OP.findall(open(f).read()) for f in files]
    ops = max(found, key=len) if found else None
    shutil.rmtree(DUMP, ignore_errors=True)
    os.makedirs(DUMP, exist_ok=True)
    return None if ops is None else sorted(ops)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 8)
    devices = [f"CPU:{i}" for i in range(8)]
    only = set(sys.argv[2:])
    expected = []
    for cs in cases():
        if only and cs["name"] not in only:
            continue
        m = make_module(cs)
        tf.saved_model.save(m, os.path.join(out, cs["name"]), signatures={"serving_default": m.serve})
        entry = {
            "name": cs["name"],
            "mesh": ",".join(f"{n}={s}" for n, s in MESHES[cs["mesh"]]),
            "inputs": {name: specs for name, _, _, specs in cs["inputs"]},
            # By object path, as `unbound plan --variable` matches them: make_module keeps
            # the variables in the dict `m.vars`, so `kernel` is `vars/kernel`.
            "variables": {f"vars/{name}": specs for name, _, specs in cs["variables"]},
        }
        dumped_collectives()
        try:
            entry["outputs"] = run_dtensor(cs, devices)
            entry["collectives"] = dumped_collectives()
        except Exception as e:  # DTensor's refusal is the expectation
            msg = str(e).strip().splitlines()
            entry["refused"] = next((l for l in msg if l.strip()), type(e).__name__)[:400]
        expected.append(entry)
        print(cs["name"], entry.get("outputs", "REFUSED: " + entry.get("refused", "")), flush=True)
    shutil.rmtree(DUMP, ignore_errors=True)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()

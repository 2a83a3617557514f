#!/usr/bin/env python3
"""Record what TensorFlow's DTensor does with meshes and layouts, as JSON test vectors.

Run with the Python of the TensorFlow 2.21 environment (scripts/tf-venv.sh):

    $TF_VENV/bin/python interop/dtensor/make_vectors.py OUTDIR

Writes into OUTDIR:

* meshes.json   Mesh.from_string / Mesh.from_proto on valid and invalid inputs: to_string,
                proto hex, every accessor, device locations, or TensorFlow's error (or
                "crash" when TensorFlow aborts the process, e.g. std::stoi on a bad number).
* layouts.json  Layout.from_string / from_proto likewise: to_string, proto hex, specs, type,
                num_shards, fully-replicated / batch-parallel / single-device, to_parted,
                offset_to_shard, local shape of a global shape; plus equality of pairs.
* op_sharding.json  for layouts on `use_xla_spmd` meshes of 8 logical CPU devices, the
                serialized xla.OpSharding TensorFlow attaches as `_XlaSharding` to the
                function's nodes (read from TF_DUMP_GRAPH_PREFIX graph dumps).
* data.json     for every dtype and pairs of layouts on 8 logical CPU devices, the global
                array and the components of dtensor.unpack(dtensor.relayout(x, L)) for
                the source and target layouts (x put on the mesh replicated, relayout to
                L1, then to L2), as little-endian bytes in hex (strings: a list of hex).

Parsing runs in a child process so that a TensorFlow abort is recorded, not fatal.
"""

from __future__ import annotations

import glob
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# Graph dumps (read once by TensorFlow at start-up): the `_XlaSharding` attributes DTensor's
# XLA SPMD integration writes are read back from them.
DUMP_DIR = ""
if "--child" not in sys.argv:
    DUMP_DIR = tempfile.mkdtemp(prefix="dtensor_dump_")
    # TensorFlow dumps every graph it builds there (about 1 GB per run): removed on exit.
    atexit.register(shutil.rmtree, DUMP_DIR, ignore_errors=True)
    os.environ["TF_DUMP_GRAPH_PREFIX"] = DUMP_DIR
    os.environ["TF_DUMP_GRAPH_NAME_FILTER"] = "*"
    os.environ["TF_DUMP_GRAPH_GROUPS"] = "main"

CPU = "/job:localhost/replica:0/task:0/device:CPU:{}"


def devs(ids):
    return ",".join(CPU.format(i) for i in ids)


def ids_csv(ids):
    return ",".join(str(i) for i in ids)


def tile(dims, gids=None, lids=None, ldevs=None, name="", gdevs=None, xla=False):
    gids = list(range(8)) if gids is None else gids
    lids = gids if lids is None else lids
    ldevs = devs(range(len(lids))) if ldevs is None else ldevs
    s = f"{name}|{dims}|{ids_csv(gids)}|{ids_csv(lids)}|{ldevs}"
    if gdevs is not None:
        s += "|" + gdevs
    if xla:
        s += "|use_xla_spmd"
    return s


M_XY = tile("x=2,y=4")
M_X8 = tile("x=8")
M_YX = tile("x=4,y=2")
M_XYZ = tile("x=2,y=2,z=2")
M_NAMED = tile("batch=2,model=4", name="mesh1")
M_GDEV = tile("x=2,y=2", gids=list(range(4)), gdevs=devs(range(4)))
M_XLA = tile("x=2,y=4", xla=True)
M_XLA7 = tile("x=2,y=2", gids=list(range(4)), gdevs=devs(range(4)), xla=True)
M_REMOTE = "|x=2,y=2|0,1,2,3|||"
M_CLIENT1 = tile("x=2,y=4", lids=[4, 5, 6, 7], ldevs=devs(range(4)))
M_OFFSET = tile("x=2", gids=[4, 5], lids=[4, 5])
M_TPU = "|x=2|0,1|0,1|/job:localhost/replica:0/task:0/device:TPU:0,/job:localhost/replica:0/task:0/device:TPU:1"
SINGLE = CPU.format(0)
SINGLE5 = "/job:localhost/task:0/device:CPU:0"
M_ONE = tile("x=1", gids=[0])
M_X1Y8 = tile("x=1,y=8")

MESH_INPUTS = [
    M_XY, M_X8, M_YX, M_XYZ, M_NAMED, M_GDEV, M_XLA, M_XLA7, M_REMOTE, M_CLIENT1, M_OFFSET,
    M_TPU, SINGLE, SINGLE5, M_ONE, M_X1Y8, "empty_mesh", "|x=2,y=2|*CPU", "name|x=4|*TPU",
    tile("x=2,y=2", gids=list(range(4)), gdevs=""),  # empty 6th part
    tile("x=2", gids=[0, 1]) + "|",  # 6 parts, last empty
    "||||",  # 5 empty parts: empty mesh
    # errors
    tile("x=2,x=4"), tile("unsharded=8"), tile("match=8"), tile("any=8"),
    tile("x=3"), tile("x=4", gids=[0, 1, 2, 3], lids=[0, 1, 2], ldevs=devs(range(3))),
    tile("x=2", gids=[0, 1], lids=[0, 1, 2], ldevs=devs(range(3))),
    tile("x=2", gids=[0, 1], lids=[0, 1], ldevs=devs(range(1))),
    "|x=2|0,1|0,1|foo,bar",
    "|x=2|0,1|0,1|" + CPU.format(0) + ",/job:localhost/replica:0/task:0/device:GPU:0",
    "|x=2|0,1|0,1|/device:CPU:0,/device:CPU:1",
    "a|b", "a|b|c|d", "a|b|c|d|e|f|g|h",
    tile("x=2", gids=[0, 1]) + "|" + devs(range(2)) + "|use_xla",
    "foo", "/job:localhost/device:CPU:0", "",
    "|x=abc|0,1|0,1|" + devs(range(2)),
    "|x=2|0,a|0,1|" + devs(range(2)),
    "|x|0|0|" + devs(range(1)),
    "|x=2,|0,1|0,1|" + devs(range(2)),
    "|x=0|0,1|0,1|" + devs(range(2)),
    "|x=-2|0,1|0,1|" + devs(range(2)),
    "|x=2 |0,1|0,1|" + devs(range(2)),
    # device names: legacy, local, wildcard, lower-case, reordered parts, other types
    "|x=2|0,1|0,1|/job:localhost/replica:0/task:0/cpu:0,/job:localhost/replica:0/task:0/cpu:1",
    "|x=2|0,1|0,1|/job:localhost/replica:0/task:0/CPU:0,/job:localhost/replica:0/task:0/device:CPU:1",
    "|x=2|0,1|0,1|CPU:0,CPU:1",
    "|x=2|0,1|0,1|/job:*/replica:0/task:0/device:CPU:0,/job:*/replica:0/task:0/device:CPU:1",
    "|x=2|0,1|0,1|/job:localhost/replica:0/task:0/device:cpu:0,/job:localhost/replica:0/task:0/device:cpu:1",
    "|x=2|0,1|0,1|/job:localhost/replica:0/task:0/device:CPU:0,/job:localhost/replica:0/task:0/device:cpu:1",
    "|x=2|0,1|0,1|/task:0/job:worker/device:GPU:0,/task:0/job:worker/device:GPU:1",
    "|x=2|0,1|0,1|/job:worker/replica:0/task:1/device:GPU:0,/job:worker/replica:0/task:1/device:GPU:1",
    "|x=2|0,1|0,1|/job:w/task:0/device:XLA_CPU:0,/job:w/task:0/device:XLA_CPU:1",
    "|x=2|0,1|0,1|/job:w/task:0/device:CPU,/job:w/task:0/device:CPU",
    "|x=2|0,1|0,1|/job:w/task:0/device:CPU:*,/job:w/task:0/device:CPU:*",
    "|x=2|0,1|0,1|/job:w/task:0/device:1CPU:0,/job:w/task:0/device:1CPU:1",
    "|x=2|0,1|0,1|/job:w/task:0/device:CPU:0/junk,/job:w/task:0/device:CPU:1",
    "|x=2|0,1|0,1|" + devs(range(2)) + "|/job:w/replica:0/task:0/device:TPU:0,/job:w/replica:0/task:0/device:TPU:1",
    "|x=2,y=2|0,1,2,3|2,3|" + devs(range(2)),
    "|x=2,y=2|4,5,6,7|4,5,6,7|" + devs(range(4)),
    "|x=2,y=2|3,2,1,0|3,2,1,0|" + devs(range(4)),
    "|x=2,y=2|0,1,2,3|0,1,2,3|" + ",".join([CPU.format(0)] * 4),
    "/job:localhost/replica:0/task:0/device:GPU:1",
    "/job:w/replica:0/task:0/device:TPU:0:extra",
]

LAYOUT_INPUTS = [
    f"sharding_specs:x,unsharded, mesh:{M_XY}",
    f"sharding_specs:unsharded,y, mesh:{M_XY}",
    f"sharding_specs:x,y, mesh:{M_XY}",
    f"sharding_specs:y,x, mesh:{M_XY}",
    f"sharding_specs:unsharded,unsharded, mesh:{M_XY}",
    f"sharding_specs:unsharded,unsharded mesh:{M_XY}",  # missing trailing comma
    f"sharding_specs:x mesh:{M_XY}",  # missing trailing comma, rank 0
    f"sharding_specs: mesh:{M_XY}",
    f"sharding_specs:scalar, mesh:{M_XY}",
    f"sharding_specs:scalar,x, mesh:{M_XY}",
    f"sharding_specs:x, mesh:{M_X8}",
    f"sharding_specs:z,x,y, mesh:{M_XYZ}",
    f"sharding_specs:y,unsharded,z, mesh:{M_XYZ}",
    f"sharding_specs:x,unsharded,unsharded, mesh:{M_XYZ}",
    f"sharding_specs:batch,unsharded, mesh:{M_NAMED}",
    f"sharding_specs:x,y, mesh:{M_GDEV}",
    f"sharding_specs:x,y, mesh:{M_XLA}",
    f"sharding_specs:unsharded,x, mesh:{M_XLA7}",
    f"sharding_specs:x,unsharded, mesh:{M_REMOTE}",
    f"sharding_specs:y,x, mesh:{M_CLIENT1}",
    f"sharding_specs:x, mesh:{M_OFFSET}",
    f"sharding_specs:x, mesh:|x=2,y=2|*CPU",
    f"sharding_specs:x, mesh:{M_ONE}",
    f"sharding_specs:unsharded,y, mesh:{M_X1Y8}",
    f"parted:x,y, mesh:{M_XY}",
    f"parted:unsharded, mesh:{M_XY}",
    f"maximal:true, mesh:{SINGLE}",
    f"maximal:false, mesh:{SINGLE}",
    f"maximal:true, mesh:{SINGLE5}",
    f"maximal:, mesh:{SINGLE}",
    "empty_layout",
    f"sharding_specs:any,any, mesh:{M_XY}",
    f"sharding_specs:match,x, mesh:{M_XY}",
    f"sharding_specs:any,x, mesh:{M_XY}",
    # errors
    f"maximal:true, mesh:{M_XY}",
    f"sharding_specs:x, mesh:{SINGLE}",
    f"parted:x, mesh:{SINGLE}",
    f"sharding_specs:x,x, mesh:{M_XY}",
    f"sharding_specs:z, mesh:{M_XY}",
    f"sharding_specs:match,match, mesh:{M_XY}",
    f"foo:x, mesh:{M_XY}",
    f"sharding_specs:x,  mesh:{M_XY}",
    f"sharding_specs:x, mesh:empty_mesh",
    f"sharding_specs:x, {M_XY}",
    f"sharding_specs:x, mesh:{tile('x=3')}",
    "sharding_specs:x,",
    "",
    f"sharding_specs:X, mesh:{M_XY}",
]

# (layout a, layout b) equality as TensorFlow defines it (whole proto).
EQUAL_PAIRS = [
    (f"sharding_specs:x,unsharded, mesh:{M_XY}", f"sharding_specs:x,unsharded, mesh:{M_XY}"),
    (f"sharding_specs:x,unsharded, mesh:{M_XY}", f"parted:x,unsharded, mesh:{M_XY}"),
    (f"sharding_specs:x, mesh:{M_NAMED.replace('batch', 'x').replace('model', 'y')}",
     f"sharding_specs:x, mesh:{M_XY}"),
    (f"sharding_specs:x,unsharded, mesh:{M_XY}", f"sharding_specs:x,unsharded, mesh:{M_CLIENT1}"),
    (f"sharding_specs:x, mesh:{M_ONE}", f"sharding_specs:unsharded, mesh:{M_ONE}"),
    (f"sharding_specs:scalar, mesh:{M_XY}", f"sharding_specs: mesh:{M_XY}"),
]

# Meshes and layouts given as protos (hex built with TensorFlow's own layout_pb2).
def proto_inputs():
    from tensorflow.dtensor.proto import layout_pb2 as L
    out = []

    def mesh(dims, gids, lids, ldevs, **kw):
        m = L.MeshProto()
        for n, s in dims:
            m.mesh_dimensions.add(name=n, size=s)
        m.global_device_ids.extend(gids)
        m.local_device_ids.extend(lids)
        m.local_devices.extend(ldevs)
        for k, v in kw.items():
            if isinstance(v, list):
                getattr(m, k).extend(v)
            else:
                setattr(m, k, v)
        return m

    good = mesh([("x", 2), ("y", 2)], range(4), range(4), [CPU.format(i) for i in range(4)])
    out.append(("mesh", good))
    out.append(("mesh", mesh([("x", 4)], range(3), range(3), [CPU.format(i) for i in range(3)])))
    out.append(("mesh", mesh([("x", 2), ("x", 2)], range(4), range(4), [CPU.format(i) for i in range(4)])))
    out.append(("mesh", mesh([], [], [], [], single_device=CPU.format(3))))
    out.append(("mesh", mesh([("x", 2)], range(2), range(2), ["a", "b"], name="n", use_xla_spmd=True)))
    out.append(("mesh", L.MeshProto()))

    def layout(specs, m, t):
        lp = L.LayoutProto(type=t)
        for s in specs:
            lp.sharding_specs.add(sharding_spec=s)
        lp.mesh_config.CopyFrom(m)
        return lp

    out.append(("layout", layout(["x", "unsharded"], good, L.LayoutProto.STATIC)))
    out.append(("layout", layout(["x", "unsharded"], good, L.LayoutProto.PARTED)))
    out.append(("layout", layout(["x", "unsharded"], good, L.LayoutProto.UNKNOWN)))
    out.append(("layout", layout(["x"], good, 7)))
    out.append(("layout", layout(["x", "x"], good, L.LayoutProto.STATIC)))
    out.append(("layout", layout([], mesh([], [], [], [], single_device=SINGLE), L.LayoutProto.SINGLE_DEVICE)))
    out.append(("layout", layout(["x"], mesh([], [], [], [], single_device=SINGLE), L.LayoutProto.SINGLE_DEVICE)))
    out.append(("layout", layout([], L.MeshProto(), L.LayoutProto.UNKNOWN)))
    out.append(("layout", layout(["scalar"], good, L.LayoutProto.STATIC)))
    out.append(("layout", layout(["y"], mesh([("x", 2), ("y", 4)], range(3), [], []), L.LayoutProto.STATIC)))
    return [(kind, p.SerializeToString(deterministic=True).hex()) for kind, p in out]


# ---------------------------------------------------------------------------------------
# Child process: parse one case per line, print one JSON result per line.

def child_main():
    import tensorflow as tf  # noqa: F401
    from tensorflow.dtensor.proto import layout_pb2 as L
    from tensorflow.experimental import dtensor

    def mesh_facts(m):
        r = {
            "to_string": m.to_string(),
            "proto_hex": m.as_proto().SerializeToString(deterministic=True).hex(),
            "dim_names": list(m.dim_names),
            "shape": list(m.shape()),
            "size": int(m.size),
            "global_device_ids": [int(i) for i in m.global_device_ids().flatten()] if m.dim_names else [],
            "local_device_ids": [int(i) for i in m.local_device_ids()],
            "local_devices": list(m.local_devices()),
            "global_devices": list(m.global_devices()),
            "use_xla_spmd": bool(m.use_xla_spmd()),
            "is_remote": bool(m.is_remote()),
            "is_single_device": bool(m.is_single_device()),
        }
        # With no device strings at all TensorFlow reads past the end of its list (a
        # crash), so ask only when there is one.
        if m.is_single_device() or list(m.local_devices()) or list(m.global_devices()):
            r["device_type"] = m.device_type()
        try:
            r["host_mesh"] = m.host_mesh().to_string()
        except Exception as e:  # noqa: BLE001
            r["host_mesh_error"] = str(e)
        locs = []
        n = 1
        for s in m.shape():
            n *= s
        if m.dim_names:
            for i in range(n):
                locs.append([int(v) for v in m.device_location(i)])
        r["device_locations"] = locs
        return r

    def layout_facts(lay):
        r = {
            "to_string": lay.to_string(),
            "proto_hex": lay.as_proto().SerializeToString(deterministic=True).hex(),
            "sharding_specs": list(lay.sharding_specs),
            "rank": int(lay.rank),
            "type": L.LayoutProto.LayoutType.Name(lay.as_proto().type),
            "is_fully_replicated": bool(lay.is_fully_replicated()),
            "is_batch_parallel": bool(lay.is_batch_parallel()),
            "is_single_device": bool(lay.is_single_device()),
            "mesh": lay.mesh.to_string(),
        }
        # `any` has no shard count (TensorFlow raises); `match` is -1 as a size_t.
        r["num_shards"] = []
        for i in range(lay.rank):
            try:
                r["num_shards"].append(int(lay.num_shards(i)))
            except Exception:  # noqa: BLE001
                r["num_shards"].append(None)
        try:
            r["parted"] = lay.to_parted().to_string()
        except Exception as e:  # noqa: BLE001
            r["parted_error"] = str(e)
        if not lay.is_single_device() and lay.mesh.dim_names and "match" not in lay.sharding_specs \
                and "any" not in lay.sharding_specs:
            r["offset_to_shard"] = [list(t) for t in lay.offset_to_shard()]
            shape = [24] * lay.rank
            r["global_shape"] = shape
            r["local_shape"] = [int(v) for v in lay.local_shape_from_global_shape(shape)]
            r["global_from_local"] = [int(v) for v in lay.global_shape_from_local_shape(r["local_shape"])]
        return r

    for line in sys.stdin:
        case = json.loads(line)
        out = {}
        try:
            if case["kind"] == "mesh":
                out = mesh_facts(dtensor.Mesh.from_string(case["input"]))
            elif case["kind"] == "layout":
                out = layout_facts(dtensor.Layout.from_string(case["input"]))
            elif case["kind"] == "mesh_proto":
                p = L.MeshProto.FromString(bytes.fromhex(case["input"]))
                out = mesh_facts(dtensor.Mesh.from_proto(p))
            elif case["kind"] == "layout_proto":
                p = L.LayoutProto.FromString(bytes.fromhex(case["input"]))
                out = layout_facts(dtensor.Layout.from_proto(p))
            elif case["kind"] == "equal":
                a, b = case["input"]
                out = {"equal": bool(dtensor.Layout.from_string(a) == dtensor.Layout.from_string(b))}
            out = {"ok": True, **out}
        except Exception as e:  # noqa: BLE001
            # Protobuf's DebugString carries a random marker word (goo.gle/debugonly,
            # /debugstr, ...): make it stable so that recordings compare.
            msg = re.sub(r"goo\.gle/debug\w*[ \t]*", "goo.gle/debug ", str(e))
            out = {"ok": False, "error": msg, "error_type": type(e).__name__}
        print(json.dumps(out), flush=True)


def run_cases(cases):
    """Runs cases in a child; a case that kills the child is recorded as a crash."""
    results = []
    i = 0
    while i < len(cases):
        proc = subprocess.Popen([sys.executable, __file__, "--child"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        crashed = False
        while i < len(cases):
            proc.stdin.write(json.dumps(cases[i]) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            if not line:
                results.append({"ok": False, "crash": True, "error": "TensorFlow aborted the process"})
                i += 1
                crashed = True
                break
            results.append(json.loads(line))
            i += 1
        if not crashed:
            proc.stdin.close()
            proc.wait()
        else:
            proc.wait()
    return results


# ---------------------------------------------------------------------------------------
# In-process work on 8 logical CPUs: OpSharding from graph dumps, and data vectors.

def setup_devices():
    import tensorflow as tf
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 8)


OPS_LAYOUTS = [
    ("x=8", ["x"]), ("x=8", ["unsharded"]), ("x=8", ["x", "unsharded"]), ("x=8", ["unsharded", "x"]),
    ("x=2,y=4", ["x", "y"]), ("x=2,y=4", ["y", "x"]), ("x=2,y=4", ["x", "unsharded"]),
    ("x=2,y=4", ["unsharded", "x"]), ("x=2,y=4", ["y", "unsharded"]), ("x=2,y=4", ["unsharded", "y"]),
    ("x=2,y=4", ["unsharded", "unsharded"]), ("x=2,y=4", ["y"]), ("x=2,y=4", ["x", "unsharded", "y"]),
    ("x=2,y=4", ["unsharded", "y", "x"]), ("x=4,y=2", ["y", "x"]), ("x=4,y=2", ["x"]),
    ("x=2,y=2,z=2", ["z", "x", "y"]), ("x=2,y=2,z=2", ["y", "unsharded", "z"]),
    ("x=2,y=2,z=2", ["x", "unsharded"]), ("x=2,y=2,z=2", ["z"]), ("x=2,y=2,z=2", ["unsharded", "y"]),
    ("x=2,y=2,z=2", ["z", "y"]), ("x=2,y=2,z=2", ["y", "x", "z", "unsharded"]),
    ("x=1,y=8", ["x", "y"]), ("x=1,y=8", ["y", "x"]), ("x=8,y=1", ["y", "unsharded"]),
    ("x=2,y=1,z=4", ["z", "x"]), ("x=2,y=4", []),
]


def graph_shardings(paths):
    """Distinct `_XlaSharding` values in the GraphDef dumps `paths`."""
    from google.protobuf import text_format
    from tensorflow.core.framework import graph_pb2
    found = set()
    for path in sorted(paths):
        g = graph_pb2.GraphDef()
        try:
            with open(path) as f:
                text_format.Parse(f.read(), g, allow_unknown_field=True)
        except Exception:  # noqa: BLE001
            continue
        nodes = list(g.node)
        for fn in g.library.function:
            nodes.extend(fn.node_def)
        for n in nodes:
            if "_XlaSharding" in n.attr:
                found.add(n.attr["_XlaSharding"].s.hex())
    return sorted(found)


def op_sharding_vectors():
    import numpy as np
    import tensorflow as tf
    from tensorflow.experimental import dtensor
    out = []
    for dims, specs in OPS_LAYOUTS:
        mesh_str = tile(dims, xla=True)
        mesh = dtensor.Mesh.from_string(mesh_str)
        lay = dtensor.Layout(specs, mesh)
        shape = [8] * len(specs)
        before = set(glob.glob(os.path.join(DUMP_DIR, "*.pbtxt")))
        rec = {"layout": lay.to_string()}
        try:
            x = dtensor.copy_to_mesh(tf.constant(np.zeros(shape, np.float32)),
                                     dtensor.Layout.replicated(mesh, len(specs)))
            x = dtensor.relayout(x, lay)

            @tf.function
            def ident(t):
                return tf.identity(t) + 1.0

            ident(x)
            added = set(glob.glob(os.path.join(DUMP_DIR, "*.pbtxt"))) - before
            rec["op_sharding_hex"] = graph_shardings(added)
        except Exception as e:  # noqa: BLE001
            rec["error"] = str(e)
        out.append(rec)
        print(f"op_sharding {dims} {specs}: {rec.get('op_sharding_hex', rec.get('error'))}",
              file=sys.stderr)
    return out


DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
          "uint8", "uint16", "uint32", "uint64", "bool", "complex64", "complex128", "string"]

DATA_CASES = [
    # (mesh dims, global shape, from specs, to specs)
    ("x=2,y=4", [8, 12], ["unsharded", "unsharded"], ["x", "y"]),
    ("x=2,y=4", [8, 12], ["x", "y"], ["y", "x"]),
    ("x=2,y=4", [8, 12], ["x", "unsharded"], ["unsharded", "x"]),
    ("x=2,y=4", [8, 12], ["unsharded", "y"], ["x", "unsharded"]),
    ("x=2,y=4", [8, 12], ["y", "unsharded"], ["unsharded", "unsharded"]),
    ("x=2,y=2,z=2", [4, 6, 8], ["x", "y", "z"], ["z", "unsharded", "x"]),
    ("x=2,y=2,z=2", [4, 6, 8], ["unsharded", "z", "unsharded"], ["y", "x", "z"]),
    ("x=8", [16], ["x"], ["unsharded"]),
    ("x=2,y=4", [], [], []),
]


def global_array(dtype, shape, rng):
    import numpy as np
    import tensorflow as tf
    n = int(np.prod(shape)) if shape else 1
    if dtype == "string":
        words = [("s%d" % i) * (i % 4) for i in range(n)]
        return np.array([w.encode() for w in words], dtype=object).reshape(shape)
    if dtype == "bool":
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    if dtype in ("complex64", "complex128"):
        v = rng.integers(-50, 50, n) + 1j * rng.integers(-50, 50, n)
        return v.astype(dtype).reshape(shape)
    if dtype == "bfloat16":
        return tf.constant(rng.integers(-100, 100, n).astype("float32") / 4, tf.bfloat16).numpy().reshape(shape)
    if dtype.startswith("float"):
        return (rng.integers(-1000, 1000, n) / 8).astype(dtype).reshape(shape)
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -(2**31)), min(info.max, 2**31 - 1)
    return rng.integers(lo, hi, n, endpoint=True).astype(dtype).reshape(shape)


def encode(arr):
    import numpy as np
    arr = np.asarray(arr)
    if arr.dtype == object:
        return [bytes(v).hex() for v in arr.flatten()]
    if arr.dtype.name == "bfloat16":
        return arr.view(np.uint16).astype("<u2").tobytes().hex()
    return arr.astype(arr.dtype.newbyteorder("<")).tobytes().hex()


def host(t, dtype):
    """A component as a NumPy array; strings as Python bytes objects (exact, rank 0 too)."""
    import numpy as np
    v = t.numpy()
    if dtype == "string":
        return np.array(v, dtype=object)
    return np.asarray(v)


def data_vectors():
    import numpy as np
    import tensorflow as tf
    from tensorflow.experimental import dtensor
    rng = np.random.default_rng(20260)
    out = []
    for dims, shape, src, dst in DATA_CASES:
        mesh = dtensor.Mesh.from_string(tile(dims))
        l_src = dtensor.Layout(src, mesh)
        l_dst = dtensor.Layout(dst, mesh)
        for dtype in DTYPES:
            g = global_array(dtype, shape, rng)
            rec = {"mesh": mesh.to_string(), "dtype": dtype, "global_shape": shape,
                   "from": l_src.to_string(), "to": l_dst.to_string(), "global": encode(g)}
            try:
                t = tf.constant(g, dtype=tf.string if dtype == "string" else getattr(tf, dtype))
                rep = dtensor.copy_to_mesh(t, dtensor.Layout.replicated(mesh, len(shape)))
                a = dtensor.relayout(rep, l_src)
                comps_a = [host(c, dtype) for c in dtensor.unpack(a)]
                rec["from_components"] = [{"shape": list(c.shape), "data": encode(c)} for c in comps_a]
                b = dtensor.relayout(a, l_dst)
                comps_b = [host(c, dtype) for c in dtensor.unpack(b)]
                rec["to_components"] = [{"shape": list(c.shape), "data": encode(c)} for c in comps_b]
                packed = dtensor.pack([tf.constant(c) for c in comps_b], l_dst)
                back = dtensor.relayout(packed, dtensor.Layout.replicated(mesh, len(shape)))
                rec["pack_roundtrip_equal"] = bool(all(
                    encode(host(c, dtype)) == rec["global"] for c in dtensor.unpack(back)))
            except Exception as e:  # noqa: BLE001
                rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            out.append(rec)
        print(f"data {dims} {src}->{dst}: done", file=sys.stderr)
    return out


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main()
        return
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    import tensorflow as tf

    protos = proto_inputs()
    cases = [{"kind": "mesh", "input": s} for s in MESH_INPUTS]
    cases += [{"kind": f"{k}_proto", "input": h} for k, h in protos if k == "mesh"]
    cases += [{"kind": "layout", "input": s} for s in LAYOUT_INPUTS]
    cases += [{"kind": f"{k}_proto", "input": h} for k, h in protos if k == "layout"]
    cases += [{"kind": "equal", "input": list(p)} for p in EQUAL_PAIRS]
    results = run_cases(cases)
    records = [{**c, **r} for c, r in zip(cases, results)]
    meta = {"tensorflow": tf.__version__, "script": "interop/dtensor/make_vectors.py"}

    def dump(name, obj):
        with open(os.path.join(out_dir, name), "w") as f:
            json.dump({"meta": meta, "cases": obj}, f, indent=1, sort_keys=True)
            f.write("\n")

    dump("meshes.json", [r for r in records if r["kind"] in ("mesh", "mesh_proto")])
    dump("layouts.json", [r for r in records if r["kind"] in ("layout", "layout_proto", "equal")])
    setup_devices()
    dump("op_sharding.json", op_sharding_vectors())
    dump("data.json", data_vectors())


if __name__ == "__main__":
    main()

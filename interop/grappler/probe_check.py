"""The grappler probe plugin run by TensorFlow 2.21 and by `unbound optimize`, compared.

    probe_check.py tf-run MODEL RESULT.json
        Loads MODEL's graph in a tf.compat.v1 Session (the probe plugin must be in a
        tensorflow-plugins dir on PYTHONPATH, UNBOUND_PROBE_DUMP / UNBOUND_PROBE_REMOVE set),
        runs the signature's output feeding a and b, and writes the value and the node names of
        the graph TensorFlow actually executed (its partition graphs) to RESULT.json.

    probe_check.py compare TF.jsonl OURS.jsonl MODEL OPTIMIZED TF_RESULT.json REMOVED
        Compares the probe's dump under TensorFlow with its dump under unbound, and checks
        OPTIMIZED (written by unbound) loads in TensorFlow, lacks REMOVED, and computes what
        MODEL computes. Run it without the probe on PYTHONPATH.

Prints PASS/FAIL lines; exit 1 on any failure.
"""

import json
import sys

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import op_def_pb2, types_pb2
from tensorflow.core.grappler.costs import op_performance_data_pb2
from tensorflow.core.protobuf import rewriter_config_pb2, saved_model_pb2

tf1 = tf.compat.v1
OFF = rewriter_config_pb2.RewriterConfig.OFF

A = np.arange(10, dtype=np.float32).reshape(10, 1)
B = np.full((10, 1), 0.5, dtype=np.float32)


def session_config():
    """Turns off the built-in passes that would remove or fold the Identity chain before the
    plugin (which TensorFlow runs last) sees it, so TensorFlow's and unbound's plugin inputs
    are the same graph."""
    config = tf1.ConfigProto()
    rewrite = config.graph_options.rewrite_options
    rewrite.disable_model_pruning = True
    for toggle in (
        "constant_folding",
        "arithmetic_optimization",
        "dependency_optimization",
        "remapping",
        "layout_optimizer",
        "shape_optimization",
        "loop_optimization",
        "common_subgraph_elimination",
        "debug_stripper",
        "implementation_selector",
        "function_optimization",
    ):
        setattr(rewrite, toggle, OFF)
    return config


def run_model(model, partition_graphs=False):
    """Runs the serving_default signature; returns (value, executed node names, feeds, fetch)."""
    with tf.Graph().as_default() as graph, tf1.Session(graph=graph, config=session_config()) as sess:
        meta = tf1.saved_model.loader.load(sess, ["serve"], model)
        sig = meta.signature_def["serving_default"]
        feeds = {sig.inputs["a"].name: A, sig.inputs["b"].name: B}
        fetch = sig.outputs["out"].name
        options = tf1.RunOptions(output_partition_graphs=partition_graphs)
        metadata = tf1.RunMetadata()
        value = sess.run(fetch, feeds, options=options, run_metadata=metadata)
        executed = sorted({n.name for g in metadata.partition_graphs for n in g.node})
        return value, executed, sorted(feeds), fetch


def tf_run(model, result_path):
    value, executed, feeds, fetch = run_model(model, partition_graphs=True)
    with open(result_path, "w") as f:
        json.dump({"value": value.tolist(), "executed": executed, "feeds": feeds, "fetch": fetch}, f)


class Checker:
    def __init__(self):
        self.failed = 0

    def check(self, ok, what, detail=""):
        print(f"{'PASS' if ok else 'FAIL'} {what}" + (f": {detail}" if detail and not ok else ""))
        if not ok:
            self.failed += 1
        return ok


def load_dump(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def node_names(names):
    """Tensor or input names ("x:0", "^x", "x") as node names."""
    return sorted({n.lstrip("^").split(":")[0] for n in names})


def decode_props(hexes):
    out = []
    for h in hexes:
        p = op_performance_data_pb2.OpInfo.TensorProperties()
        p.ParseFromString(bytes.fromhex(h))
        out.append((types_pb2.DataType.Name(p.dtype), [d.size for d in p.shape.dim]))
    return out


def graph_of(model):
    saved = saved_model_pb2.SavedModel()
    with open(f"{model}/saved_model.pb", "rb") as f:
        saved.ParseFromString(f.read())
    return saved.meta_graphs[0].graph_def


def compare(tf_dump, our_dump, model, optimized, tf_result_path, removed_name):
    c = Checker()
    theirs_all, ours_all = load_dump(tf_dump), load_dump(our_dump)
    with open(tf_result_path) as f:
        tf_result = json.load(f)
    print(f"TensorFlow called the probe {len(theirs_all)} time(s), unbound {len(ours_all)}")
    theirs = next((d for d in theirs_all if d["has_addn"]), None)
    ours = next((d for d in ours_all if d["has_addn"]), None)
    if not c.check(theirs is not None, "TensorFlow ran the probe on the AddN graph", tf_dump):
        return 1
    if not c.check(ours is not None, "unbound ran the probe on the AddN graph", our_dump):
        return 1

    print("graph seen by the probe: TF", theirs["node_names"], "| unbound", ours["node_names"])
    c.check(
        sorted(theirs["node_names"]) == sorted(ours["node_names"]),
        "both hosts hand the plugin the same nodes",
        f"TF {theirs['node_names']} vs unbound {ours['node_names']}",
    )

    # Status of every util call: same code under both hosts (messages are printed; NOT_FOUND's
    # text names TensorFlow's binary, so it is not compared).
    for call in sorted(set(theirs["status"]) | set(ours["status"])):
        t, o = theirs["status"].get(call), ours["status"].get(call)
        print(f"  status {call}: TF {t} | unbound {o}")
        c.check(t is not None and o is not None and t[0] == o[0], f"status code of {call}", f"{t} vs {o}")
    c.check(theirs["status"].get("lookup_missing", [0])[0] == 5, "a missing op is NOT_FOUND (5) under TF")

    # Properties of the AddN node.
    node = theirs["probe_node"]
    c.check(node == ours["probe_node"], "same probe node", f"{node} vs {ours['probe_node']}")
    for key, count in (("inputs", 3), ("outputs", 1)):
        t, o = theirs[key], ours[key]
        print(f"  {node} {key}: TF {decode_props(t)} | unbound {decode_props(o)}")
        print(f"    TF bytes {t}")
        c.check(t == o, f"{node} {key} properties are byte-identical", f"TF {t} vs unbound {o}")
        c.check(
            decode_props(t) == [("DT_FLOAT", [10, 1])] * count,
            f"TF's {node} {key}: {count} x DT_FLOAT [10,1]",
            str(decode_props(t)),
        )
    c.check(
        theirs["unknown_node_inputs"] == ours["unknown_node_inputs"] == 0,
        "an unknown node has 0 input properties",
        f"TF {theirs['unknown_node_inputs']} vs unbound {ours['unknown_node_inputs']}",
    )

    # OpDef of Add.
    opdef = op_def_pb2.OpDef()
    opdef.ParseFromString(bytes.fromhex(theirs["add_opdef"]))
    print(f"  TF_LookUpOpDef(Add): {len(theirs['add_opdef']) // 2} bytes, op {opdef.name!r}")
    c.check(opdef.name == "Add", "TF's OpDef is Add")
    c.check(theirs["add_opdef"] == ours["add_opdef"], "OpDef(Add) is byte-identical",
            f"TF {theirs['add_opdef']} vs unbound {ours['add_opdef']}")

    # Fetch and preserve lists. TensorFlow's session item fetches the tensors sess.run asked for
    # ("out:0") and preserves fetch + feed nodes; unbound builds its item from the signature
    # (outputs fetched, inputs and outputs preserved), so for this signature-equivalent run the
    # node-name sets must agree.
    print(f"  fetch: TF {theirs['fetch']} | unbound {ours['fetch']}")
    print(f"  preserve: TF {theirs['preserve']} | unbound {ours['preserve']}")
    print(f"  session feeds {tf_result['feeds']}, fetch {tf_result['fetch']}")
    c.check(node_names(theirs["fetch"]) == node_names([tf_result["fetch"]]),
            "TF's fetch list is the session's fetch", str(theirs["fetch"]))
    c.check(node_names(theirs["fetch"]) == node_names(ours["fetch"]), "fetch nodes agree",
            f"TF {theirs['fetch']} vs unbound {ours['fetch']}")
    c.check(node_names(theirs["preserve"]) == node_names(ours["preserve"]), "preserve nodes agree",
            f"TF {theirs['preserve']} vs unbound {ours['preserve']}")

    # The rewrite: TensorFlow executed the graph without the node, unbound saved it without.
    c.check(theirs["removed"] == 1 and ours["removed"] == 1, f"the probe removed {removed_name} under both")
    c.check(removed_name not in tf_result["executed"], f"TF executed the rewritten graph (no {removed_name})",
            str(tf_result["executed"]))
    optimized_graph = graph_of(optimized)
    names = [n.name for n in optimized_graph.node]
    c.check(removed_name not in names, f"unbound's output lacks {removed_name}", str(names))
    original = graph_of(model)
    c.check(len(names) == len(original.node) - 1, "unbound's output lost exactly one node", str(names))

    # The optimized model computes what the original does, in TensorFlow (no plugin loaded).
    expected = 2 * A + B
    value, _, _, _ = run_model(model)
    c.check(np.array_equal(value, expected), "original model computes 2a+b in TF", str(value.ravel()))
    c.check(np.array_equal(np.array(tf_result["value"], dtype=np.float32), expected),
            "original model with the probe plugin computes 2a+b in TF", str(tf_result["value"]))
    try:
        value, _, _, _ = run_model(optimized)
        c.check(np.array_equal(value, expected), "unbound's optimized model computes 2a+b in TF", str(value.ravel()))
    except Exception as e:  # noqa: BLE001 - report any load/run failure as a FAIL line
        c.check(False, "unbound's optimized model loads and runs in TF", repr(e))

    print(f"grappler probe: {c.failed} failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    if sys.argv[1] == "tf-run":
        tf_run(*sys.argv[2:4])
    elif sys.argv[1] == "compare":
        sys.exit(compare(*sys.argv[2:8]))
    else:
        sys.exit(__doc__)

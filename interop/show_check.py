"""`unbound show` against TensorFlow 2.21's own answers.

usage: show_check.py UNBOUND_BINARY MODEL_DIR...

For each TensorFlow-made SavedModel directory, and for `unbound split` copies of it at small
max sizes (.cpb), compares `unbound show --json` with:

- the MetaGraphDefs parsed by TensorFlow's loader (`loader_impl.parse_saved_model`): tags,
  signature keys, method names, every input's and output's dtype, shape and tensor name, node
  count, library function names, ops (`meta_graph.ops_used_by_graph_def`), function aliases,
  asset files, the object graph's concrete functions and bound input counts, its variables'
  dtypes and shapes;
- `tf.saved_model.load(...).signatures[k]`: `structured_input_signature` and
  `structured_outputs` (dtype and shape of every tensor spec);
- `tf.train.load_checkpoint`: every checkpoint key with its dtype and shape;
- `saved_model_cli show --all`: the signature listing and the "Concrete Functions" section of
  `unbound show`'s text output equal saved_model_cli's (ops compared as a set).

The .cpb copies are compared with TensorFlow's answers for the original .pb (TensorFlow's OSS
loader reads only .pb). Prints one line per failed check and `show check: N passed, M failed`.
"""

import json
import os
import subprocess
import sys
import tempfile

import tensorflow as tf
from tensorflow.core.framework import types_pb2
from tensorflow.python.framework import meta_graph as meta_graph_lib
from tensorflow.python.saved_model import loader_impl

passed = 0
failed = 0


def check(what, ours, theirs):
    global passed, failed
    if ours == theirs:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {what}:\n  unbound:    {ours!r}\n  tensorflow: {theirs!r}")


def dtype_name(enum):
    return types_pb2.DataType.Name(enum)


def shape_of(proto):
    if proto.unknown_rank:
        return None
    return [d.size for d in proto.dim]


def tensor_info(t):
    return {"dtype": dtype_name(t.dtype), "shape": shape_of(t.tensor_shape), "name": t.name}


def spec_of(spec):
    """A TensorSpec as (dtype name, dims with -1 unknown)."""
    dims = None if spec.shape.rank is None else [-1 if d is None else d for d in spec.shape.as_list()]
    return dtype_name(spec.dtype.as_datatype_enum), dims


def tf_meta_graph(mg):
    og = mg.object_graph_def if mg.HasField("object_graph_def") else None
    out = {
        "tags": list(mg.meta_info_def.tags),
        "tensorflow_version": mg.meta_info_def.tensorflow_version,
        "graph_nodes": len(mg.graph_def.node),
        "library_functions": [f.signature.name for f in mg.graph_def.library.function],
        "library_function_nodes": sum(len(f.node_def) for f in mg.graph_def.library.function),
        "ops": sorted(meta_graph_lib.ops_used_by_graph_def(mg.graph_def)),
        "function_aliases": dict(mg.meta_info_def.function_aliases),
        "assets": [a.filename for a in mg.asset_file_def],
        "signatures": {
            k: {
                "method_name": s.method_name,
                "inputs": {i: tensor_info(t) for i, t in s.inputs.items()},
                "outputs": {o: tensor_info(t) for o, t in s.outputs.items()},
            }
            for k, s in mg.signature_def.items()
        },
    }
    if og is not None:
        out["concrete_functions"] = sorted(
            (name, len(f.bound_inputs)) for name, f in og.concrete_functions.items()
        )
        out["variables"] = sorted(
            (n.variable.name, dtype_name(n.variable.dtype), shape_of(n.variable.shape))
            for n in og.nodes
            if n.WhichOneof("kind") == "variable"
        )
    return out


def our_meta_graph(mg):
    sig = lambda s: {  # noqa: E731
        "method_name": s["method_name"],
        "inputs": {k: {f: t[f] for f in ("dtype", "shape", "name")} for k, t in s["inputs"].items()},
        "outputs": {k: {f: t[f] for f in ("dtype", "shape", "name")} for k, t in s["outputs"].items()},
    }
    out = {
        "tags": mg["tags"],
        "tensorflow_version": mg["tensorflow_version"],
        "graph_nodes": mg["graph_nodes"],
        "library_functions": mg["library_functions"],
        "library_function_nodes": mg["library_function_nodes"],
        "ops": mg["ops"],
        "function_aliases": mg["function_aliases"],
        "assets": [a["filename"] for a in mg["assets"]],
        "signatures": {k: sig(s) for k, s in mg["signatures"].items()},
    }
    og = mg["object_graph"]
    if og is not None:
        out["concrete_functions"] = sorted(
            (f["name"], f["bound_inputs"]) for f in og["concrete_functions"]
        )
        out["variables"] = sorted((v["name"], v["dtype"], v["shape"]) for v in og["variables"])
    return out


def loaded_signatures(model_dir):
    """dtype and shape of every input and output spec of every signature of the loaded model."""
    loaded = tf.saved_model.load(model_dir)
    out = {}
    for key, fn in loaded.signatures.items():
        args, kwargs = fn.structured_input_signature
        inputs = {name: spec_of(s) for name, s in kwargs.items()}
        inputs.update({s.name: spec_of(s) for s in args})
        outputs = {name: spec_of(s) for name, s in fn.structured_outputs.items()}
        out[key] = {"inputs": inputs, "outputs": outputs}
    return out


def our_signature_specs(mg):
    side = lambda m: {k: (t["dtype"], t["shape"]) for k, t in m.items()}  # noqa: E731
    return {
        k: {"inputs": side(s["inputs"]), "outputs": side(s["outputs"])}
        for k, s in mg["signatures"].items()
        if not k.startswith("__")
    }


def checkpoint_keys(model_dir):
    prefix = os.path.join(model_dir, "variables", "variables")
    if not os.path.exists(prefix + ".index"):
        return None
    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    return sorted((k, dtype_name(dtypes[k].as_datatype_enum), list(shapes[k])) for k in shapes)


def cli_sections(text):
    """The signature listing (ops line as a set) and the Concrete Functions section."""
    lines = text.splitlines()
    out, take = [], False
    for line in lines:
        if line.startswith("MetaGraphDef with tag-set"):
            take = True
        if take and line.startswith("The MetaGraph with tag set"):
            head, _, ops = line.partition("contains the following ops: ")
            out.append(head + "ops: " + repr(sorted(x.strip(" '") for x in ops.strip("{}").split(","))))
            take = False
            continue
        if take:
            out.append(line)
    if "Concrete Functions:" in lines:
        out.extend(lines[lines.index("Concrete Functions:"):])
    while out and not out[-1].strip():
        out.pop()
    return out


def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def main():
    unbound = sys.argv[1]
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    work = tempfile.mkdtemp(prefix="show_check.")
    for model_dir in sys.argv[2:]:
        name = os.path.basename(model_dir.rstrip("/"))
        tf_mgs = [tf_meta_graph(mg) for mg in loader_impl.parse_saved_model(model_dir).meta_graphs]
        tf_mgs.sort(key=lambda m: m["tags"])
        tf_specs = loaded_signatures(model_dir)
        tf_keys = checkpoint_keys(model_dir)
        cli_text = cli_sections(run(cli, "show", "--all", "--dir", model_dir))
        variants = [(".pb", model_dir)]
        for max_size in (2000, 300):
            out = os.path.join(work, f"{name}.{max_size}")
            run(unbound, "split", model_dir, out, "--max-size", str(max_size))
            if not os.path.exists(os.path.join(out, "saved_model.cpb")):
                check(f"{name} split at {max_size} writes a .cpb", False, True)
                continue
            variants.append((f".cpb (max {max_size})", out))
        for label, d in variants:
            info = json.loads(run(unbound, "show", "--json", d))
            what = f"{name} {label}"
            check(f"{what}: format", info["format"], "pb" if label == ".pb" else "cpb")
            ours = [our_meta_graph(mg) for mg in info["meta_graphs"]]
            check(f"{what}: meta graph count", len(ours), len(tf_mgs))
            for o, t in zip(ours, tf_mgs):
                for field in t:
                    check(f"{what}: {field}", o.get(field), t[field])
            check(f"{what}: loaded signatures", our_signature_specs(info["meta_graphs"][0]), tf_specs)
            ck = info["checkpoint"]
            ours_keys = None if ck is None else sorted((k["key"], k["dtype"], k["shape"]) for k in ck["keys"])
            check(f"{what}: checkpoint keys", ours_keys, tf_keys)
            check(f"{what}: saved_model_cli text", cli_sections(run(unbound, "show", d)), cli_text)
    print(f"show check: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""`unbound scan` against TensorFlow 2.21's `saved_model_cli scan`.

SavedModels with denylisted ops in the graph, in tf.functions, in a function called only from
another, in a While body; a TF1 model of two MetaGraphDefs (one clean); default and custom
denylists, --tags. For every MetaGraphDef: the ops `saved_model_cli scan` reports are among
those `unbound scan` reports; what `unbound scan` finds is exactly every node of the graph and
of every library function running a denylisted op, as TensorFlow's own proto parser reads the
model (saved_model_cli follows only functions a node's op or a PartitionedCall's f names, so
on TF2 models, whose functions the graph does not call, it finds nothing); exit code 1
exactly when something is found.

usage: python check.py UNBOUND WORKDIR     (prints "scan check: N passed, M failed")
"""

import ast
import json
import os
import re
import subprocess
import sys

import tensorflow as tf

unbound, work = sys.argv[1], sys.argv[2]
cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok {name}")
    else:
        failed += 1
        print(f"FAIL {name} {detail}")


def tf_scan(d, *extra):
    """saved_model_cli scan: {tags tuple: set of ops found}."""
    p = subprocess.run([cli, "scan", "--dir", d, *extra], capture_output=True, text=True)
    out = {}
    for line in p.stdout.splitlines():
        m = re.match(r"MetaGraph with tag set (\[.*?\]) (contains the following|does not contain the default) denylisted ops:? (.*)$", line)
        if not m:
            continue
        tags = tuple(sorted(ast.literal_eval(m.group(1))))
        out[tags] = ast.literal_eval(m.group(3)) if m.group(2).startswith("contains") else set()
    return out


def ours(d, *extra):
    p = subprocess.run([unbound, "scan", d, "--json", *extra], capture_output=True, text=True)
    r = json.loads(p.stdout)
    return p.returncode, {tuple(sorted(m["tags"])): (set(m["ops"]), m["findings"]) for m in r["meta_graphs"]}


def truth(d, denylist, tag_set=None):
    """Every node of every MetaGraphDef's graph and library function running a denylisted op,
    read by TensorFlow's own proto parser: {tags: {(op, function, node)}}."""
    from tensorflow.python.tools import saved_model_utils

    out = {}
    for mg in saved_model_utils.read_saved_model(d).meta_graphs:
        tags = tuple(sorted(mg.meta_info_def.tags))
        if tag_set is not None and set(tags) != set(tag_set):
            continue
        found = {(n.op, None, n.name) for n in mg.graph_def.node if n.op in denylist}
        for f in mg.graph_def.library.function:
            found |= {(n.op, f.signature.name, n.name) for n in f.node_def if n.op in denylist}
        out[tags] = found
    return out


def compare(name, d, tf_args=(), our_args=(), denylist=("ReadFile", "WriteFile", "PrintV2"), tag_set=None):
    want = tf_scan(d, *tf_args)
    real = truth(d, set(denylist), tag_set)
    rc, got = ours(d, *our_args)
    check(f"{name}: same MetaGraphDefs", sorted(want) == sorted(got) == sorted(real), f"{sorted(want)} vs {sorted(got)}")
    for tags, ops in want.items():
        g, findings = got.get(tags, (set(), []))
        mine = {(f["op"], f["function"], f["node"]) for f in findings}
        check(f"{name} {list(tags)}: every node TensorFlow's parser finds, and only those", mine == real.get(tags), f"{sorted(mine)} vs {sorted(real.get(tags, ()))}")
        check(f"{name} {list(tags)}: saved_model_cli's ops {sorted(ops)} are among ours {sorted(g)}", set(ops) <= g)
        if not real.get(tags):
            check(f"{name} {list(tags)}: clean for both", not ops and not g)
    check(f"{name}: exit code", rc == (1 if any(g for g, _ in got.values()) else 0), rc)


class Reader(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([], tf.string)])
    def read(self, path):
        return tf.io.read_file(path)

    @tf.function(input_signature=[tf.TensorSpec([], tf.string), tf.TensorSpec([], tf.string)])
    def write(self, path, text):
        tf.io.write_file(path, text)
        return text

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
    def shout(self, x):
        tf.print("x is", x)
        return self.helper(x)

    @tf.function
    def helper(self, x):
        tf.print("again", x)
        return x * 2


class Clean(tf.Module):
    def __init__(self):
        super().__init__()
        self.v = tf.Variable(2.0)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def f(self, x):
        return x * self.v


class Looped(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([], tf.int32)])
    def loop(self, n):
        i = tf.constant(0)
        while i < n:
            tf.print("step", i)
            i += 1
        return i


try:
    d = os.path.join(work, "reader")
    tf.saved_model.save(Reader(), d)
    compare("functions", d)
    compare("custom denylist", d, ("--op_denylist", "ReadFile,Mul"), ("--op-denylist", "ReadFile,Mul"), denylist=("ReadFile", "Mul"))
    compare("tag set", d, ("--tag_set", "serve", "--op_denylist", "WriteFile"), ("--tags", "serve", "--op-denylist", "WriteFile"), denylist=("WriteFile",), tag_set=("serve",))
    d = os.path.join(work, "clean")
    tf.saved_model.save(Clean(), d)
    compare("clean", d)
    d = os.path.join(work, "looped")
    tf.saved_model.save(Looped(), d)
    compare("while body", d)
    rc, got = ours(d)
    check("while body: PrintV2 found in its body", any(f["op"] == "PrintV2" for _, fs in got.values() for f in fs))
    # TF1: two MetaGraphDefs, ReadFile in the graph of one.
    d = os.path.join(work, "tf1")
    b = tf.compat.v1.saved_model.Builder(d)
    g = tf.Graph()
    with g.as_default(), tf.compat.v1.Session(graph=g) as s:
        p = tf.compat.v1.placeholder(tf.string, [], name="path")
        tf.io.read_file(p, name="reader")
        b.add_meta_graph_and_variables(s, ["serve"])
    g = tf.Graph()
    with g.as_default(), tf.compat.v1.Session(graph=g) as s:
        tf.constant(1.0, name="c")
        b.add_meta_graph(["train"])
    b.save()
    compare("tf1 two meta graphs", d)
except Exception as e:  # noqa: BLE001
    check("scan", False, repr(e))

print(f"scan check: {passed} passed, {failed} failed")

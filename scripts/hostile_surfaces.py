"""Issue 30's surfaces for scripts/hostile_campaign.py: layouts, HLO text, .npy headers,
reshard on large meshes, index entries reshard cannot place, safetensors device files, and
deeply nested .pbtxt models. Each case is one command with the campaign's contract (exit 0 or
1, no signal, no panic, under the time and memory limits, every error line naming the input
or the argument) and, where the answer is known, the answer:

  pack/rank     --global-shape and --rank that would allocate gigabytes: exit 1 naming them
  hlo           HLO sharding text nested 60 to 30,000 deep: exit 1 past 64, never a crash
  npy           a .npy header from a small grammar (keys repeated, odd values): if NumPy is
                importable, what `layout unpack` writes must be what NumPy reads, or it exits 1
  mesh          reshard of a small checkpoint to a mesh of 2,048 devices: well within the limit
  nolayout      device files whose layouts leave a tensor out: exit 1 naming it
  safetensors   device files with a name given twice, overlapping data, another object graph,
                a replica's values changed, a tensor without a layout: exit 1 naming the file
  pbtxt         a saved_model.pbtxt nested 100,000 deep: show and verify exit 1

`cases(rng, n)` picks n cases (the deterministic ones first); `run_case` runs one and returns
violations. The fixtures (a checkpoint, device files) are made once with unbound itself from
safetensors files written here, so nothing but the binary and Python is needed.
"""

import json
import os
import random
import struct
import subprocess
import tempfile
from pathlib import Path

try:
    import numpy  # noqa: F401  (optional: the .npy cases compare with it when present)

    HAVE_NUMPY = True
except ImportError:
    HAVE_NUMPY = False


def safetensors_bytes(tensors, metadata=None, raw_header=None):
    """A safetensors file of float32 tensors {name: [values]}, or of raw_header text."""
    data = b""
    header = {}
    for name, values in tensors.items():
        blob = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": [len(values)], "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    if metadata:
        header["__metadata__"] = metadata
    text = (raw_header if raw_header is not None else json.dumps(header)).encode()
    return struct.pack("<Q", len(text)) + text + data


def read_safetensors(path):
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), bytearray(raw[8 + n :])


def write_safetensors(path, header, data):
    text = json.dumps(header).encode()
    Path(path).write_bytes(struct.pack("<Q", len(text)) + text + bytes(data))


class Fixtures:
    """Inputs made once: a plain checkpoint `ckpt` (w: 2048 floats, b: 3 floats) and the
    device files `st` of it on mesh x=4 (w sharded, b replicated)."""

    def __init__(self, unbound, work, run):
        self.work = Path(work)
        plain = self.work / "plain"
        plain.mkdir()
        (plain / "model.safetensors").write_bytes(
            safetensors_bytes({"w": [float(i) for i in range(2048)], "b": [50.0, 51.0, 52.0]})
        )
        self.ckpt = self.work / "ckpt" / "ckpt"
        for cmd in (
            [unbound, "reshard", "--from", "safetensors", plain, self.ckpt, "--mesh", "x=1"],
            [unbound, "reshard", self.ckpt, "--to", "safetensors", self.work / "st", "--mesh", "x=4",
             "--layout", "w=x"],
        ):
            code, _, err, _, _ = run(cmd)
            if code != 0:
                raise RuntimeError(f"fixture {cmd}: {err}")
        self.st = self.work / "st"


def npy_header_text(rng):
    """A header dict from a small grammar NumPy reads in various ways."""
    keys = [("descr", lambda: rng.choice(["'<f4'", "'<i4'", '"<f4"', "'|u1'", "[('a', '<f4')]", "'<f4' '1'"])),
            ("fortran_order", lambda: rng.choice(["False", "True", "0", "False"])),
            ("shape", lambda: rng.choice(["(4,)", "(2, 2)", "(4)", "(1, 4,)", "()", "(+4,)", "(04,)", "(2,2)",
                                          "((4),)", "[4]", "(4L,)", "(1_0,)", "(-4,)", "(4, 1)"]))]
    items = [(k, v()) for k, v in keys]
    for _ in range(rng.randint(0, 3)):
        k, v = rng.choice(keys)
        items.insert(rng.randrange(len(items) + 1), (k, v()))
    if rng.random() < 0.1:
        items.append(("extra", "'x'"))
    body = ", ".join(f"'{k}': {v}" for k, v in items)
    return "{" + body + (", }" if rng.random() < 0.5 else "}")


def npy_file(text, data):
    h = text
    while (10 + len(h) + 1) % 64:
        h += " "
    h += "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data


def cases(rng, n):
    """n cases: the deterministic ones first, then random .npy headers and HLO depths."""
    fixed = [
        ("pack", "2147483648,2"),
        ("pack", "2147483648"),
        ("rank", "1000000000"),
        ("hlo", 10_000),
        ("mesh", 2048),
        ("nolayout", None),
        ("safetensors", "twice"),
        ("safetensors", "overlap"),
        ("safetensors", "graph"),
        ("safetensors", "replica"),
        ("safetensors", "extra"),
        ("pbtxt", 100_000),
    ]
    out = fixed[:n]
    while len(out) < n:
        if rng.random() < 0.8:
            out.append(("npy", rng.randrange(1 << 30)))
        else:
            out.append(("hlo", rng.choice([63, 64, 65, 66, 1000, 30_000])))
    return out


def run_case(case, unbound, fx, run, check):
    """Runs one case; returns its violations. `check(where, cmd, inputs)` applies the
    campaign's contract to a command and returns (code, stderr, violations)."""
    kind, arg = case
    where = f"surface {kind} ({arg})"
    v = []
    with tempfile.TemporaryDirectory(dir=fx.work) as tmp:
        tmp = Path(tmp)
        if kind == "pack":
            comps = tmp / "c"
            comps.mkdir()
            (comps / "0.npy").write_bytes(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", bytes(16)))
            cmd = [unbound, "layout", "pack", "--layout", "sharding_specs:unsharded,unsharded, mesh:|x=1|*CPU",
                   "--global-shape", arg, comps, tmp / "g.npy"]
            code, err, cv = check(where, cmd, [str(comps), "--global-shape"])
            v += cv
            if code != 1:
                v.append(f"{where}: exit {code}, expected 1")
        elif kind == "rank":
            code, err, cv = check(where, [unbound, "layout", "from-op-sharding", "{replicated}", "--rank", arg], ["--rank"])
            v += cv
            if code != 1:
                v.append(f"{where}: exit {code}, expected 1")
        elif kind == "hlo":
            text = "{" * arg + "{replicated}" + "}" * arg
            code, err, cv = check(where, [unbound, "layout", "from-op-sharding", text, "--rank", "1"], ["HLO sharding"])
            v += cv
            if (code == 0) != (arg <= 64):
                v.append(f"{where}: exit {code} for depth {arg} (the limit is 64)")
        elif kind == "npy":
            v += npy_case(arg, unbound, tmp, where, check)
        elif kind == "mesh":
            cmd = [unbound, "reshard", fx.ckpt, tmp / "out" / "ckpt", "--mesh", f"x={arg}", "--layout", "w=x"]
            code, err, cv = check(where, cmd, [str(fx.ckpt)])
            v += cv
            if code != 0:
                v.append(f"{where}: exit {code}: {err[-300:]}")
        elif kind == "nolayout":
            v += nolayout_case(unbound, fx, tmp, where, check)
        elif kind == "safetensors":
            v += safetensors_case(arg, unbound, fx, tmp, where, check)
        elif kind == "pbtxt":
            d = tmp / "model"
            d.mkdir()
            (d / "saved_model.pbtxt").write_text("meta_graphs { graph_def { library { function {" + " signature {" * arg)
            for name in ("show", "verify"):
                code, err, cv = check(f"{where} {name}", [unbound, name, d], [str(d)])
                v += cv
                if code != 1:
                    v.append(f"{where} {name}: exit {code}, expected 1")
    return v


def npy_case(seed, unbound, tmp, where, check):
    rng = random.Random(seed)
    text = npy_header_text(rng)
    data = bytes(rng.randrange(256) for _ in range(16))
    src = tmp / "g.npy"
    src.write_bytes(npy_file(text, data))
    out = tmp / "out"
    cmd = [unbound, "layout", "unpack", "--layout", "sharding_specs:unsharded, mesh:|x=1|*CPU", src, out]
    code, err, v = check(f"{where} {text}", cmd, [str(src)])
    if code != 0 or not HAVE_NUMPY:
        return v
    import numpy as np

    try:
        want = np.load(src)
    except Exception as e:  # NumPy refuses what unbound read: a third reading
        return v + [f"{where} {text}: unbound reads it, NumPy refuses it ({e})"]
    got = np.load(out / "0.npy")
    if want.dtype != got.dtype or want.shape != got.shape or want.tobytes() != got.tobytes():
        v.append(f"{where} {text}: unbound read {got.dtype}{got.shape}, NumPy {want.dtype}{want.shape}")
    return v


def nolayout_case(unbound, fx, tmp, where, check):
    """Device files whose layouts metadata no longer names the replicated `b`: refused
    naming it, never dropped. (A slice key no tensor lists needs a bundle writer to make; the
    Rust test crates/cli/tests/reshard_hostile.rs covers it.)"""
    st = tmp / "st"
    st.mkdir()
    for f in sorted(fx.st.iterdir()):
        header, data = read_safetensors(f)
        layouts = json.loads(header["__metadata__"]["unbound.layouts"])
        del layouts["b"]
        header["__metadata__"]["unbound.layouts"] = json.dumps(layouts)
        write_safetensors(st / f.name, header, data)
    cmd = [unbound, "reshard", "--from", "safetensors", st, tmp / "o" / "ckpt", "--mesh", "x=2", "--layout", "w=x"]
    code, err, v = check(where, cmd, [str(st)])
    if code != 1 or '"b"' not in err:
        v.append(f"{where}: a tensor without a layout: exit {code}, expected 1 naming \"b\": {err[-300:]}")
    return v


def safetensors_case(how, unbound, fx, tmp, where, check):
    st = tmp / "st"
    st.mkdir()
    files = sorted(fx.st.iterdir())
    for f in files:
        (st / f.name).write_bytes(f.read_bytes())
    target = st / files[2].name
    header, data = read_safetensors(target)
    if how == "twice":
        raw = target.read_bytes()
        (n,) = struct.unpack("<Q", raw[:8])
        text = raw[8 : 8 + n].decode()
        entry = json.dumps({"b": header["b"]})[1:-1]
        text = "{" + entry + "," + text[1:]
        target.write_bytes(struct.pack("<Q", len(text)) + text.encode() + raw[8 + n :])
    elif how == "overlap":
        # The later of the two tensors moved onto the first one's bytes.
        late = max(("b", "w"), key=lambda k: header[k]["data_offsets"][0])
        start, end = header[late]["data_offsets"]
        header[late]["data_offsets"] = [0, end - start]
        write_safetensors(target, header, data)
    elif how == "graph":
        header["__metadata__"]["unbound.object_graph"] = "0a00"
        write_safetensors(target, header, data)
    elif how == "replica":
        data[header["b"]["data_offsets"][0]] ^= 1
        write_safetensors(target, header, data)
    elif how == "extra":
        end = len(data)
        header["z"] = {"dtype": "F32", "shape": [1], "data_offsets": [end, end + 4]}
        data += bytes(4)
        write_safetensors(target, header, data)
    cmd = [unbound, "reshard", "--from", "safetensors", st, tmp / "o" / "ckpt", "--mesh", "x=2", "--layout", "w=x"]
    code, err, v = check(where, cmd, [str(st)])
    if code != 1 or target.name not in err:
        v.append(f"{where}: exit {code}, expected 1 naming {target.name}: {err[-300:]}")
    return v

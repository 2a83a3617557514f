"""`unbound.Mesh`, `Layout`, `pack`, `unpack`, `relayout` and `reshard` against TensorFlow
2.21's DTensor on 8 logical CPU devices.

TensorFlow's device setup must happen before anything else in a process uses TensorFlow, so
TensorFlow's side runs once in its own Python process and saves its strings and components.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import unbound

# (mesh dims, specs) pairs; the global arrays are (8, 12).
CASES = [
    ([("x", 2), ("y", 4)], ["unsharded", "unsharded"]),
    ([("x", 2), ("y", 4)], ["x", "unsharded"]),
    ([("x", 2), ("y", 4)], ["unsharded", "y"]),
    ([("x", 2), ("y", 4)], ["x", "y"]),
    ([("x", 2), ("y", 4)], ["y", "x"]),
    ([("batch", 8)], ["batch", "unsharded"]),
    ([("a", 2), ("b", 2), ("c", 2)], ["c", "a"]),
]
DTYPES = ["float32", "int64", "bfloat16", "bool"]

TF_SIDE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorflow as tf
    from tensorflow.experimental import dtensor
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 8)
    cases, dtypes, out = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
    saved = {}
    for i, (dims, specs) in enumerate(cases):
        mesh = dtensor.create_mesh([tuple(d) for d in dims], device_type="CPU")
        layout = dtensor.Layout(specs, mesh)
        saved[f"mesh_{i}"] = np.array(mesh.to_string())
        saved[f"layout_{i}"] = np.array(layout.to_string())
        for dt in dtypes:
            g = (np.arange(96).reshape(8, 12) * 7 % 11 - 3)
            t = tf.constant(g.astype(np.float32) if dt == "bfloat16" else g.astype(dt))
            t = tf.cast(t, tf.bfloat16) if dt == "bfloat16" else t
            rep = dtensor.copy_to_mesh(t, dtensor.Layout.replicated(mesh, 2))
            comps = dtensor.unpack(dtensor.relayout(rep, layout))
            saved[f"n_{i}_{dt}"] = np.array(len(comps))
            for j, c in enumerate(comps):
                v = c.numpy()
                saved[f"comp_{i}_{dt}_{j}"] = v.view(np.uint16) if dt == "bfloat16" else v
    # A DTensor checkpoint: a variable sharded x,y on the 2x4 mesh, one replicated.
    mesh = dtensor.create_mesh([("x", 2), ("y", 4)], device_type="CPU")
    g = np.arange(8 * 12, dtype=np.float32).reshape(8, 12)
    def dvar(value, specs):
        t = dtensor.copy_to_mesh(tf.constant(value), dtensor.Layout.replicated(mesh, value.ndim))
        return dtensor.DVariable(dtensor.relayout(t, dtensor.Layout(specs, mesh)))
    ckpt = tf.train.Checkpoint(w=dvar(g, ["x", "y"]), r=dvar(g[:2], ["unsharded", "unsharded"]))
    saved["dtensor_prefix"] = np.array(ckpt.write(out[:-4] + "_ckpt"))
    np.savez(out, **saved)
    """
)


@pytest.fixture(scope="module")
def tf_side(tmp_path_factory):
    pytest.importorskip("tensorflow")
    out = str(tmp_path_factory.mktemp("dtensor") / "tf.npz")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    subprocess.run(
        [sys.executable, "-c", TF_SIDE, json.dumps(CASES), json.dumps(DTYPES), out],
        check=True, env=env, capture_output=True,
    )
    return dict(np.load(out))


def _global(dtype: str) -> np.ndarray:
    g = np.arange(96).reshape(8, 12) * 7 % 11 - 3
    if dtype == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        return g.astype(np.float32).astype(ml_dtypes.bfloat16)
    return g.astype(dtype)


def _layout(i: int) -> "unbound.Layout":
    dims, specs = CASES[i]
    return unbound.Layout(specs, unbound.Mesh(dims))


def test_strings_equal_tensorflows(tf_side):
    for i, (dims, specs) in enumerate(CASES):
        mesh = unbound.Mesh(dims)
        assert str(mesh) == str(tf_side[f"mesh_{i}"])
        assert str(unbound.Mesh(str(mesh))) == str(mesh)
        layout = unbound.Layout(specs, mesh)
        assert str(layout) == str(tf_side[f"layout_{i}"])
        assert unbound.Layout(str(tf_side[f"layout_{i}"])) == layout
        assert layout.sharding_specs == specs and layout.mesh == mesh and layout.rank == 2
        assert mesh.num_devices == 8 and mesh.dim_names == [d for d, _ in dims]


def test_pack_gives_tensorflows_components(tf_side):
    for i in range(len(CASES)):
        layout = _layout(i)
        for dt in DTYPES:
            g = _global(dt)
            comps = unbound.pack(g, layout)
            assert len(comps) == int(tf_side[f"n_{i}_{dt}"]) == 8
            for j, c in enumerate(comps):
                want = tf_side[f"comp_{i}_{dt}_{j}"]
                got = c.view(np.uint16) if dt == "bfloat16" else c
                assert got.dtype == want.dtype and got.shape == want.shape, (i, dt, j)
                np.testing.assert_array_equal(got, want, err_msg=f"case {i} {dt} device {j}")
            back = unbound.unpack(comps, layout)
            assert back.dtype == g.dtype
            np.testing.assert_array_equal(back.view(np.uint8), g.view(np.uint8))


def test_relayout_gives_the_target_components(tf_side):
    same_mesh = [i for i, (dims, _) in enumerate(CASES) if dims == CASES[0][0]]
    for a in same_mesh:
        for b in same_mesh:
            comps = [tf_side[f"comp_{a}_int64_{j}"] for j in range(8)]
            moved = unbound.relayout(comps, _layout(a), _layout(b))
            for j, c in enumerate(moved):
                np.testing.assert_array_equal(c, tf_side[f"comp_{b}_int64_{j}"], err_msg=f"{a}->{b} {j}")


def test_dtensor_checkpoints_read_whole(tf_side):
    prefix = str(tf_side["dtensor_prefix"])
    ck = unbound.Checkpoint(prefix)
    g = np.arange(8 * 12, dtype=np.float32).reshape(8, 12)
    w = "w/.ATTRIBUTES/VARIABLE_VALUE"
    assert not ck.is_stored_whole(w)
    np.testing.assert_array_equal(ck[w], g)
    np.testing.assert_array_equal(ck["r/.ATTRIBUTES/VARIABLE_VALUE"], g[:2])
    np.testing.assert_array_equal(ck.read_box(w, "8 12 3,4:5,7"), g[3:7, 5:12])
    # The components of its layout are what DTensor held.
    comps = unbound.pack(ck[w], unbound.Layout(["x", "y"], unbound.Mesh([("x", 2), ("y", 4)])))
    assert [c.shape for c in comps] == [(4, 3)] * 8


def test_strings_and_bad_layouts():
    layout = unbound.Layout(["x"], unbound.Mesh("x=2"))
    words = np.array([b"a", b"bc", b"", b"d"], dtype=object)
    parts = unbound.pack(words, layout)
    assert [p.tolist() for p in parts] == [[b"a", b"bc"], [b"", b"d"]]
    np.testing.assert_array_equal(unbound.unpack(parts, layout), words)
    with pytest.raises(unbound.LayoutError):
        unbound.pack(np.zeros(3), layout)  # 3 does not divide by 2
    with pytest.raises(unbound.LayoutError):
        unbound.Layout(["x", "x"], unbound.Mesh("x=2"))
    with pytest.raises(unbound.LayoutError):
        unbound.Mesh("x=2,x=4")
    with pytest.raises(unbound.LayoutError):
        unbound.Layout("sharding_specs:z, mesh:|x=2|*CPU")


def test_reshard_output_reads_back_in_tensorflow(tmp_path):
    tf = pytest.importorskip("tensorflow")
    src = str(tmp_path / "src" / "ckpt")
    values = {
        "w/.ATTRIBUTES/VARIABLE_VALUE": np.arange(8 * 12, dtype=np.float32).reshape(8, 12),
        "b/.ATTRIBUTES/VARIABLE_VALUE": np.arange(16, dtype=np.int64),
        "names/.ATTRIBUTES/VARIABLE_VALUE": np.array([b"p", b"q", b"", b"r"], dtype=object),
    }
    with unbound.CheckpointWriter(src) as w:
        for k, v in values.items():
            w.write(k, v)
    dst = str(tmp_path / "dst" / "ckpt")
    mesh = unbound.Mesh([("x", 2), ("y", 4)])
    plan = unbound.reshard(src, dst, mesh, {"w/.ATTRIBUTES/VARIABLE_VALUE": "x,y"}, default="y", dry_run=True)
    assert not os.path.exists(dst + ".index") and plan["bytes"] > 0
    # Strings stay whole: TensorFlow's Python reader cannot read sliced strings back.
    rules = {"w/.ATTRIBUTES/VARIABLE_VALUE": ["x", "y"], "b/.*": "y"}
    report = unbound.reshard(src, dst, mesh, rules)
    assert report["resharded"] == 2 and report["num_shards"] == 9 and report["variables"] == 3
    ref = tf.train.load_checkpoint(dst)
    for k, v in values.items():
        np.testing.assert_array_equal(np.asarray(ref.get_tensor(k)), v, err_msg=k)
    ck = unbound.Checkpoint(dst)
    assert not ck.is_stored_whole("w/.ATTRIBUTES/VARIABLE_VALUE")
    np.testing.assert_array_equal(ck.read_box("w/.ATTRIBUTES/VARIABLE_VALUE", "8 12 4,4:6,6"), values["w/.ATTRIBUTES/VARIABLE_VALUE"][4:, 6:])
    with pytest.raises(unbound.OutputExistsError):
        unbound.reshard(src, dst, mesh)
    with pytest.raises(unbound.LayoutError, match="does not divide"):  # 4 strings on 8 devices
        unbound.reshard(src, str(tmp_path / "bad" / "ckpt"), "x=8", {"names/.*": "x"})

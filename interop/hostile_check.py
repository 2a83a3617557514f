"""Hostile inputs against TensorFlow 2.21's own readers (run by interop/hostile_check.sh).

1. No false alarms: SavedModels TensorFlow writes now (tf.saved_model.save, with a
   fingerprint.pb, variables of several dtypes, a string variable, a model sharded over
   several data files, and an asset) pass `unbound verify`, `split` and `merge`: the new
   checks (fingerprint hashes, bytes after a shard's last tensor, the index footer's
   padding, a missing index beside a shard) never fire on what TensorFlow itself writes.
2. Never looser than TensorFlow: mutants of the bundled models' model file (bit flips in
   saved_model.pb; bit flips and lying metadata in a saved_model.cpb; fingerprint.pb removed
   so that only the model file is judged) go to `unbound verify` and to TensorFlow's C++
   Merger::Read (merger_harness read). Whenever verify accepts, TensorFlow must read the
   file too, into a message equal to `unbound merge`'s; whenever `unbound split` accepts a
   .pb, TensorFlow must read its .cpb back into the message it reads from the .pb. (Verify
   may be stricter than TensorFlow; those cases are counted and printed, not failures.)

usage: hostile_check.py UNBOUND HARNESS LIE_TOOL WORKDIR [MUTANTS]
"""

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = Path(__file__).resolve().parent.parent


def run(cmd, timeout=60):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)


def make_tf_models(work):
    import numpy as np
    import tensorflow as tf

    models = {}

    class Small(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(np.arange(12, dtype=np.float32).reshape(4, 3))
            self.b = tf.Variable(np.array([1.5, -2.0, 3.25], dtype=np.float64))
            self.n = tf.Variable(np.array([1, 2, 3], dtype=np.int64))
            self.s = tf.Variable(["alpha", "beta", ""])
            self.flag = tf.Variable([True, False])

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
        def __call__(self, x):
            return tf.matmul(x, self.w) + tf.cast(self.b, tf.float32)

    d = work / "tf_small"
    tf.saved_model.save(Small(), str(d))
    models["small"] = d

    class Wide(tf.Module):
        def __init__(self):
            super().__init__()
            self.vs = [tf.Variable(tf.fill([64, 64], float(i))) for i in range(8)]

        @tf.function(input_signature=[tf.TensorSpec([64], tf.float32)])
        def __call__(self, x):
            return tf.add_n([tf.linalg.matvec(v, x) for v in self.vs])

    d = work / "tf_sharded"
    policy = tf.train.experimental.MaxShardSizePolicy(max_shard_size=40000)
    tf.saved_model.save(
        Wide(), str(d), options=tf.saved_model.SaveOptions(experimental_sharding_callback=policy)
    )
    models["sharded"] = d

    vocab = work / "vocab.txt"
    vocab.write_text("a\nb\nc\n")

    class WithAsset(tf.Module):
        def __init__(self):
            super().__init__()
            self.vocab = tf.saved_model.Asset(str(vocab))
            self.v = tf.Variable(3.0)

        @tf.function(input_signature=[])
        def __call__(self):
            return tf.io.read_file(self.vocab.asset_path)

    d = work / "tf_asset"
    tf.saved_model.save(WithAsset(), str(d))
    models["asset"] = d
    return models


def same_message(a, b):
    from tensorflow.core.protobuf import saved_model_pb2

    x, y = saved_model_pb2.SavedModel(), saved_model_pb2.SavedModel()
    x.ParseFromString(Path(a).read_bytes())
    y.ParseFromString(Path(b).read_bytes())
    return x == y


def main():
    unbound, harness, lie_tool, work = sys.argv[1:5]
    mutants = int(sys.argv[5]) if len(sys.argv) > 5 else 120
    work = Path(work)
    failed = passed = 0

    def fail(msg):
        nonlocal failed
        failed += 1
        print(f"FAIL {msg}")

    # 1. What TensorFlow writes verifies, splits and merges.
    for name, d in make_tf_models(work).items():
        shards = sorted(p.name for p in (d / "variables").glob("variables.data-*"))
        r = run([unbound, "verify", d])
        if r.returncode != 0:
            fail(f"TensorFlow's {name} model ({len(shards)} shards): verify: {r.stdout}{r.stderr}")
            continue
        if "fingerprint.pb matches" not in r.stdout:
            fail(f"TensorFlow's {name} model: fingerprint.pb not compared: {r.stdout}")
            continue
        s = run([unbound, "split", d, work / f"{name}.split", "--max-size", "2000"])
        m = run([unbound, "merge", work / f"{name}.split", work / f"{name}.merged"])
        v = run([unbound, "verify", work / f"{name}.merged"])
        if s.returncode or m.returncode or v.returncode:
            fail(f"TensorFlow's {name} model: split/merge/verify: {s.stderr}{m.stderr}{v.stdout}")
            continue
        passed += 1
        print(f"ok TensorFlow's {name} model ({len(shards)} data shard(s)) verifies, splits and merges")

    # 2. Mutants: never accepted when TensorFlow's Merger refuses them.
    rng = random.Random(13)
    bases = []
    for model in ("tf2_multi_sig", "tf1_large_consts"):
        pb_dir = work / f"base-{model}"
        shutil.copytree(ROOT / "testdata" / "models" / model, pb_dir)
        (pb_dir / "fingerprint.pb").unlink(missing_ok=True)
        bases.append(pb_dir)
        cpb_dir = work / f"base-{model}-cpb"
        r = run([unbound, "split", pb_dir, cpb_dir, "--max-size", "2000"])
        assert r.returncode == 0, r.stderr
        (cpb_dir / "fingerprint.pb").unlink()
        bases.append(cpb_dir)
    stricter = []
    agreed = 0
    for i in range(mutants):
        base = bases[i % len(bases)]
        d = work / f"mutant-{i}"
        shutil.copytree(base, d)
        cpb = d / "saved_model.cpb"
        model_file = cpb if cpb.exists() else d / "saved_model.pb"
        if model_file == cpb and rng.random() < 0.5:
            r = run([lie_tool, cpb, d / "lied.cpb", str(rng.randrange(1 << 40))])
            (d / "lied.cpb").replace(cpb)
            what = f"{base.name} lie: {r.stdout.strip()}"
        else:
            data = bytearray(model_file.read_bytes())
            bit = rng.randrange(len(data) * 8)
            data[bit // 8] ^= 1 << (bit % 8)
            model_file.write_bytes(bytes(data))
            what = f"{base.name} bit {bit} of {model_file.name}"
        ours = run([unbound, "verify", d]).returncode == 0
        tf_out = work / f"mutant-{i}.tf.pb"
        tf_ok = run([harness, "read", "--type", "tensorflow.SavedModel", d / "saved_model", tf_out]).returncode == 0
        if ours and not tf_ok:
            fail(f"{what}: unbound verify accepts what TensorFlow's Merger refuses")
        elif ours:
            merged = work / f"mutant-{i}.merged"
            r = run([unbound, "merge", d, merged])
            if r.returncode != 0:
                fail(f"{what}: verify accepts, merge refuses: {r.stderr}")
            elif not same_message(tf_out, merged / "saved_model.pb"):
                fail(f"{what}: unbound merge differs from TensorFlow's Merger")
            else:
                agreed += 1
        elif tf_ok:
            stricter.append(what)
        else:
            agreed += 1
        if model_file.suffix == ".pb":
            out = work / f"mutant-{i}.split"
            r = run([unbound, "split", d, out, "--max-size", "2000"])
            if r.returncode == 0:
                back = work / f"mutant-{i}.back.pb"
                rb = run([harness, "read", "--type", "tensorflow.SavedModel", out / "saved_model", back])
                if not tf_ok:
                    fail(f"{what}: unbound split wrote a model from a file TensorFlow refuses")
                elif rb.returncode != 0 or not same_message(tf_out, back):
                    fail(f"{what}: TensorFlow reads the split back differently")
            shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(d, ignore_errors=True)
    passed += agreed
    print(f"ok {agreed} of {mutants} mutants: unbound and TensorFlow's Merger agree")
    print(f"   {len(stricter)} mutants verify rejects but TensorFlow reads (stricter, allowed)")
    for s in stricter[:10]:
        print(f"     {s}")
    print(f"hostile check: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

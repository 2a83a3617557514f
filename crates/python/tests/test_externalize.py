"""`unbound.externalize` (issue 33): large constants moved into variables; the result loads in
TensorFlow with outputs bit for bit the original's, and the report is the CLI's."""

import numpy as np
import pytest

import unbound
from _toolkit_support import MODELS


def test_dry_run_reports_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    report = unbound.externalize(MODELS / "tf1_large_consts", out, min_size=1000, dry_run=True)
    assert isinstance(report, unbound.ExternalizeReport)
    assert not report.written and not out.exists()
    nodes = {(m.function, m.node) for m in report.moved}
    assert (None, "const_200k") in nodes
    assert any(f and f.startswith("__inference_scale_and_shift") for f, _ in nodes)
    assert report.model_bytes_after < report.model_bytes_before
    assert report.moved_bytes == sum(m.bytes for m in report.moved)
    assert unbound.DEFAULT_EXTERNALIZE_MIN_SIZE == 1 << 20


def test_output_verifies_and_exists_is_refused(tmp_path):
    out = tmp_path / "out"
    report = unbound.externalize(MODELS / "tf1_large_consts", out, min_size=1000)
    assert report.written
    assert unbound.verify(out).ok
    assert (out / "saved_model.pb").stat().st_size == pytest.approx(report.model_bytes_after, abs=64)
    with pytest.raises(unbound.OutputExistsError):
        unbound.externalize(MODELS / "tf1_large_consts", out, min_size=1000)


def test_tensorflow_loads_it_with_the_same_outputs(tmp_path):
    tf = pytest.importorskip("tensorflow")

    class Model(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
        def serve(self, x):
            w = tf.constant(np.arange(4 * 512, dtype=np.float32).reshape(4, 512) / 7)
            return {"y": tf.matmul(x, w)}

    src = tmp_path / "src"
    m = Model()
    tf.saved_model.save(m, str(src), signatures={"serving_default": m.serve})
    out = tmp_path / "out"
    report = unbound.externalize(src, out, min_size=4096)
    assert [x.shape for x in report.moved] == [[4, 512]]
    x = tf.constant(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))
    before = tf.saved_model.load(str(src)).signatures["serving_default"](x=x)["y"].numpy()
    after = tf.saved_model.load(str(out)).signatures["serving_default"](x=x)["y"].numpy()
    assert before.tobytes() == after.tobytes()
    # And back: the variable the signature only reads becomes a constant again.
    back = tmp_path / "back"
    report = unbound.externalize(out, back, inline=True)
    assert [v.shape for v in report.inlined] == [[4, 512]] and report.written
    again = tf.saved_model.load(str(back)).signatures["serving_default"](x=x)["y"].numpy()
    assert before.tobytes() == again.tobytes()
    with pytest.raises(ValueError):
        unbound.externalize(out, tmp_path / "x", min_size=10, inline=True)

"""The toolkit example in python/examples runs on a bundled model."""

import subprocess
import sys

from _toolkit_support import MODELS, ROOT


def test_toolkit_show_example(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "python" / "examples" / "toolkit_show.py"), str(MODELS / "tf2_multi_sig"), str(tmp_path / "out")],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "verify: OK" in result.stdout
    assert f"split: wrote {tmp_path / 'out' / 'saved_model.cpb'}" in result.stdout
    assert "fingerprint: " in result.stdout

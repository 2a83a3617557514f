"""Show what a SavedModel holds, check it, split it into the image format and fingerprint it,
with unbound's toolkit from Python (no TensorFlow needed).

usage: python toolkit_show.py SAVED_MODEL_DIR [OUT_DIR]
"""

import sys
import tempfile
from pathlib import Path

import unbound


def main() -> None:
    model = Path(sys.argv[1])
    info = unbound.show(model)
    print(f"{model}: {info.format} model, fields: {', '.join(info.keys())}")

    report = unbound.verify(model)
    print("verify:", "OK" if report.ok else f"{len(report.faults)} problems")
    for fault in report.faults:
        print(f"  {fault.file}: {fault.fault}")

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(tmp) / "split"
        split = unbound.split(model, out, max_size=4 << 10)
        print(f"split: wrote {split.path} ({split.chunks} chunks, {split.model_bytes} bytes of model)")
        if split.chunked:
            cpb = unbound.inspect(split.path)
            print(f"inspect: {len(cpb.chunks)} chunks, splitter version {cpb.version.splitter_version}")
        print("fingerprint:", unbound.fingerprint(out).singleprint)


if __name__ == "__main__":
    main()

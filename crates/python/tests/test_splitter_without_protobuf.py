"""Without the `protobuf` package: messages go in as `(bytes, "full.type.Name")` and the
chunked message comes back as bytes; `read_message` returns bytes."""

import subprocess
import sys
import textwrap

from _toolkit_support import MODELS


def test_serialized_messages_without_protobuf(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        sys.modules["google.protobuf"] = None  # importing it now raises ImportError
        import unbound
        data = open({str(MODELS / 'frozen_graph.pb')!r}, "rb").read()
        chunks, chunked_message = unbound.Splitter((data, "tensorflow.GraphDef"), max_size=1000).split()
        assert isinstance(chunked_message, bytes) and all(isinstance(c, bytes) for c in chunks), chunks
        path = unbound.Splitter((data, "tensorflow.GraphDef"), max_size=1000).write({str(tmp_path / 'g')!r})
        assert path.endswith(".cpb")
        back = unbound.read_message({str(tmp_path / 'g')!r}, "tensorflow.GraphDef")
        assert back == data, "the split read back differs"
        print(len(chunks))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 2

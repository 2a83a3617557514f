"""Type stubs for the extension module `unbound._unbound` (private: use `unbound`)."""

__version__: str

# --- toolkit ---
from typing import List, Optional, Sequence, Tuple, Union
import os

_Path = Union[str, "os.PathLike[str]"]

DEFAULT_MAX_SIZE: int
"""The default largest chunk, 1 GiB (`unbound split --max-size`)."""

def split(src_dir: _Path, out_dir: _Path, max_size: int = ..., compression: str = "zstd") -> str:
    """`unbound split`: the report as JSON."""

def merge(src_dir: _Path, out_dir: _Path) -> str:
    """`unbound merge`: the report as JSON."""

def show(dir: _Path) -> str:
    """`unbound show --json`."""

def inspect(path: _Path) -> str:
    """`unbound inspect --json`."""

def verify(dir: _Path) -> str:
    """`unbound verify`: faults and the parts checked, as JSON."""

def fingerprint(dir: _Path) -> Tuple[str, str]:
    """`unbound fingerprint --json` and the model file read."""

def read_message(prefix: _Path, type_name: str) -> Tuple[bytes, str]:
    """TensorFlow's `Merger::Read`: the serialized message and the format read (`cpb`/`pb`)."""

# --- splitter ---
class ChunkSink:
    """Where each chunk of a split goes (field tags) and the final chunk order."""

    def __init__(self, type_name: str, proto_as_initial_chunk: bool = True, schema: Optional[bytes] = None) -> None: ...
    def add_chunk(self, path: Sequence[Union[str, int, bool]], index: Optional[int] = None) -> bool:
        """Places a chunk; True when the path ends at a repeated element or map value."""
    def __len__(self) -> int: ...
    def finish(self) -> bytes:
        """The serialized ChunkedMessage; the sink takes no more chunks."""

def split_message(
    type_name: str, data: bytes, max_size: int = ..., schema: Optional[bytes] = None
) -> Tuple[List[Tuple[bytes, bool]], bytes, List[str]]:
    """`unbound proto split`'s algorithm: chunks (bytes, is a message), ChunkedMessage, warnings."""

def write_chunks(
    prefix: _Path, chunks: Sequence[Tuple[bytes, bool]], chunked_message: bytes, compression: str = "zstd"
) -> str:
    """Writes PREFIX.pb or PREFIX.cpb atomically; the path written."""

def merge_chunks(
    type_name: str, chunks: Sequence[bytes], chunked_message: bytes, schema: Optional[bytes] = None
) -> bytes:
    """TensorFlow's `Merger::Merge`, serialized."""

def read_into_bytes(prefix: _Path, type_name: str, schema: Optional[bytes] = None) -> Tuple[bytes, str]:
    """TensorFlow's `Merger::Read` for any type: the serialized message and the format read."""

def chunk_schema() -> bytes:
    """The FileDescriptorSet of tensorflow.proto_splitter.ChunkedMessage."""

def split_and_write(
    type_name: str,
    data: bytes,
    prefix: _Path,
    max_size: int = ...,
    compression: str = "zstd",
    schema: Optional[bytes] = None,
) -> Tuple[str, List[str]]:
    """`unbound proto split`'s algorithm, written at once: the path written and warnings."""

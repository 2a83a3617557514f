"""Type stubs for the extension module `unbound._unbound` (private: use `unbound`)."""

__version__: str

# --- checkpoint ---
import os
import pathlib
from typing import Dict, List, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

class MappedBytes:
    """Holds mapped bytes for the read-only arrays that view them."""
    def __len__(self) -> int: ...

class CheckpointReader:
    """Native checkpoint reader behind `unbound.Checkpoint`."""
    def __init__(self, prefix: Union[str, os.PathLike[str]]) -> None: ...
    @property
    def prefix(self) -> pathlib.Path: ...
    def keys(self) -> List[str]: ...
    def describe(self, key: str) -> Tuple[str, List[int], bool]: ...
    def read(self, key: str, verify: bool = True) -> Tuple[str, List[int], str, Union[npt.NDArray[np.uint8], List[bytes]]]: ...
    def read_box(self, key: str, spec: str) -> Tuple[str, List[int], str, Union[npt.NDArray[np.uint8], List[bytes]]]: ...

class CheckpointWriter:
    """Native checkpoint writer behind `unbound.CheckpointWriter`."""
    def __init__(self, prefix: Union[str, os.PathLike[str]]) -> None: ...
    @property
    def prefix(self) -> pathlib.Path: ...
    @property
    def closed(self) -> bool: ...
    def write_raw(self, key: str, dtype: str, shape: List[int], data: npt.NDArray[np.uint8]) -> None: ...
    def write_strings(self, key: str, shape: List[int], values: List[bytes]) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...

# --- dtensor ---
from typing import Any, Dict, Optional

_NativeArray = Tuple[List[int], int, Union[npt.NDArray[np.uint8], List[bytes]]]

def mesh_info(text: str) -> Dict[str, Any]: ...
def layout_info(text: str) -> Dict[str, Any]: ...
def layout_new(specs: List[str], mesh: str) -> str: ...
def dtensor_split(layout: str, array: _NativeArray) -> List[_NativeArray]: ...
def dtensor_join(layout: str, components: List[_NativeArray]) -> _NativeArray: ...
def dtensor_relayout(components: List[_NativeArray], src: str, dst: str) -> List[_NativeArray]: ...
def plan(
    dir: str,
    mesh: str,
    inputs: List[Tuple[str, str]],
    variables: List[Tuple[str, str]],
    shapes: Dict[str, List[int]],
    signature: Optional[str] = None,
    tags: Optional[str] = None,
) -> str: ...
def convert(
    src: str,
    dst: str,
    to: Optional[str] = None,
    max_shard_size: str = "5GB",
    names: str = "paths",
    jobs: int = 2,
    dry_run: bool = False,
) -> str: ...
def reshard(
    src: str,
    dst: str,
    mesh: str,
    layouts: List[str],
    default: Optional[str] = None,
    jobs: int = 2,
    dry_run: bool = False,
) -> str: ...
# --- toolkit ---
from typing import List, Optional, Sequence, Tuple, Union
import os

_Path = Union[str, "os.PathLike[str]"]

DEFAULT_MAX_SIZE: int
DEFAULT_EXTERNALIZE_MIN_SIZE: int
"""The default largest chunk, 1 GiB (`unbound split --max-size`)."""

def split(src_dir: _Path, out_dir: _Path, max_size: int = ..., compression: str = "zstd") -> str:
    """`unbound split`: the report as JSON."""

def merge(src_dir: _Path, out_dir: _Path) -> str:
    """`unbound merge`: the report as JSON."""

def externalize(
    src_dir: _Path, out_dir: _Path, min_size: int = ..., dry_run: bool = False, inline: bool = False
) -> str:
    """`unbound externalize --json`: the report as JSON."""

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
# --- tensorflow ---
from os import PathLike
from typing import Any, Iterator, List, Tuple, Union

_Node = Union[bytes, Tuple[bytes, List[Tuple[int, List[Any]]]]]

class MergeSteps:
    """A merged SavedModel's `(path, bytes)` merge steps (see `unbound._parts`)."""

    def __iter__(self) -> Iterator[Tuple[List[Tuple[int, int]], bytes]]: ...
    def __next__(self) -> Tuple[List[Tuple[int, int]], bytes]: ...
    def __len__(self) -> int: ...

def _tf_split(parts: _Node, max_size: int) -> Tuple[List[bytes], bytes, List[str]]: ...
def _tf_write(
    parts: _Node, prefix: Union[str, PathLike[str]], max_size: int, compression: str
) -> Tuple[str, bool, int, int, List[str]]: ...
def _tf_read(
    export_dir: Union[str, PathLike[str]], step_limit: int = ...
) -> Tuple[MergeSteps, str]: ...
def _tf_assembled_bytes(parts: _Node) -> bytes: ...
def _tf_file_descriptor_set() -> bytes: ...

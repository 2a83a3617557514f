"""DTensor meshes and layouts without TensorFlow, splitting NumPy arrays into per-device
components and joining them, relayouts, and resharding checkpoints.

A :class:`Mesh` is a named grid of devices, a :class:`Layout` says for each tensor axis which
mesh dimension it is split over (or ``unsharded``). Both read and print TensorFlow's own
strings: ``str(mesh)`` is ``dtensor.Mesh.to_string()`` and ``str(layout)`` is
``dtensor.Layout.to_string()`` for the same mesh and layout.

Naming: :func:`pack` goes from a global array to the per-device components (what one hands
to ``dtensor.pack``), :func:`unpack` from components (what ``dtensor.unpack`` returns) back
to the global array. Shards are even, as DTensor requires: a dimension must divide by the
number of shards of its axis (:class:`unbound.LayoutError` otherwise).
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from unbound import _unbound
from unbound._checkpoint import numpy_dtype
from unbound._errors import InvalidArgumentError

__all__ = ["Mesh", "Layout", "pack", "unpack", "relayout", "reshard", "plan"]

PathLike = Union[str, "os.PathLike[str]"]


class Mesh:
    """A DTensor mesh.

    ``Mesh([("x", 2), ("y", 4)], device_type="GPU")`` (or a dict) is the mesh
    ``dtensor.create_mesh([("x", 2), ("y", 4)], device_type="GPU")`` makes in a single client
    (devices ``/job:localhost/replica:0/task:0/device:GPU:0`` to ``:7``). A string is read as
    ``unbound reshard --mesh`` reads it: TensorFlow's full mesh string
    (``|x=2,y=4|0,...|0,...|/job:...,...``, what ``Mesh.to_string()`` prints), its short test
    form ``|x=2,y=4|*CPU``, or only ``"x=2,y=4"`` (meaning ``|x=2,y=4|*CPU``). A bad mesh
    raises :class:`unbound.LayoutError` with TensorFlow's message.
    """

    def __init__(
        self,
        dims: Union[str, Sequence[Tuple[str, int]], Mapping[str, int]],
        *,
        device_type: str = "CPU",
        name: str = "",
    ) -> None:
        """A mesh from a mesh string, or from ``(name, size)`` dimensions on devices 0 to
        n-1 of ``device_type`` (``name`` is the mesh's name)."""
        if isinstance(dims, str):
            text = dims
        else:
            items = list(dims.items()) if isinstance(dims, Mapping) else list(dims)
            # The string `dtensor.create_mesh(dims, device_type=...)` gives for one client.
            spec = ",".join(f"{n}={int(s)}" for n, s in items)
            count = 1
            for _, size in items:
                count *= int(size)
            ids = ",".join(str(i) for i in range(count))
            devices = ",".join(f"/job:localhost/replica:0/task:0/device:{device_type}:{i}" for i in range(count))
            text = f"{name}|{spec}|{ids}|{ids}|{devices}"
        info = _unbound.mesh_info(text)
        self._info: Dict[str, Any] = info

    @property
    def dim_names(self) -> List[str]:
        """The dimension names, major first."""
        return list(self._info["dim_names"])

    @property
    def shape(self) -> Tuple[int, ...]:
        """The dimension sizes."""
        return tuple(self._info["shape"])

    @property
    def name(self) -> str:
        """The mesh's name (often empty)."""
        return self._info["name"]

    @property
    def device_type(self) -> str:
        """The device type (``CPU``, ``GPU``, ``TPU``)."""
        return self._info["device_type"]

    @property
    def local_devices(self) -> List[str]:
        """The local devices' full names, in local-device order."""
        return list(self._info["local_devices"])

    @property
    def global_device_ids(self) -> List[int]:
        """The global device ids, in mesh order."""
        return list(self._info["global_device_ids"])

    @property
    def num_devices(self) -> int:
        """The number of local devices."""
        return int(self._info["num_devices"])

    def __str__(self) -> str:
        return self._info["string"]

    def __repr__(self) -> str:
        return f"unbound.Mesh({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mesh) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))


class Layout:
    """A DTensor layout: a sharding spec per tensor axis on a :class:`Mesh`.

    ``Layout(["x", "unsharded"], mesh)``, or ``Layout(text)`` with TensorFlow's layout string
    (``sharding_specs:x,unsharded, mesh:|x=2,y=4|...``, what ``Layout.to_string()``
    prints). Specs name mesh dimensions or ``unsharded``; a mesh dimension shards at most one
    axis. Bad layouts raise :class:`unbound.LayoutError` with TensorFlow's message.
    """

    def __init__(self, specs: Union[str, Sequence[str]], mesh: Optional[Union[Mesh, str]] = None) -> None:
        """A layout from specs and a mesh, or from TensorFlow's layout string alone."""
        if isinstance(specs, str):
            if mesh is not None:
                raise InvalidArgumentError("give either a layout string, or specs and a mesh")
            text = specs
        else:
            if mesh is None:
                raise InvalidArgumentError("a layout from specs needs a mesh")
            text = _unbound.layout_new(list(specs), str(mesh))
        self._info: Dict[str, Any] = _unbound.layout_info(text)

    @classmethod
    def replicated(cls, mesh: Union[Mesh, str], rank: int) -> "Layout":
        """The layout of a tensor of ``rank`` replicated on every device of ``mesh``."""
        return cls(["unsharded"] * rank, mesh)

    @property
    def sharding_specs(self) -> List[str]:
        """The spec of each axis (a mesh dimension name or ``unsharded``)."""
        return list(self._info["specs"])

    @property
    def mesh(self) -> Mesh:
        """The mesh."""
        return Mesh(self._info["mesh"])

    @property
    def rank(self) -> int:
        """The tensor rank the layout is for."""
        return len(self._info["specs"])

    def __str__(self) -> str:
        return self._info["string"]

    def __repr__(self) -> str:
        return f"unbound.Layout({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))


def _to_native(array: Any) -> Tuple[List[int], int, Any]:
    value = np.asarray(array)
    shape = [int(d) for d in value.shape]
    if value.dtype.kind in ("S", "U", "O"):
        items = [v.encode("utf-8") if isinstance(v, str) else v for v in value.reshape(-1).tolist()]
        if not all(isinstance(v, bytes) for v in items):
            raise InvalidArgumentError("a string array holds bytes or str")
        return shape, 0, items
    data = np.ascontiguousarray(value)
    return shape, data.dtype.itemsize, data.reshape(-1).view(np.uint8)


def _from_native(native: Tuple[List[int], int, Any], dtype: np.dtype) -> np.ndarray:
    shape, itemsize, payload = native
    if itemsize == 0:
        values = np.empty(len(payload), dtype=object)
        values[:] = payload
        return values.reshape(shape)
    return payload.view(dtype).reshape(shape)


def _dtype_of(array: Any) -> np.dtype:
    value = np.asarray(array)
    return np.dtype(object) if value.dtype.kind in ("S", "U", "O") else value.dtype


def pack(array: Any, layout: Layout) -> List[np.ndarray]:
    """Splits the global ``array`` into the components of the local devices of ``layout``'s
    mesh, in local-device order: what ``dtensor.unpack`` returns for that DTensor (and what
    ``dtensor.pack`` takes). Replicas are copies. Any dtype (strings as ``object`` arrays of
    ``bytes``). The GIL is released while copying."""
    dtype = _dtype_of(array)
    parts = _unbound.dtensor_split(str(layout), _to_native(array))
    return [_from_native(p, dtype) for p in parts]


def unpack(components: Sequence[Any], layout: Layout) -> np.ndarray:
    """Joins per-device ``components`` (local-device order, as :func:`pack` gives them) of
    ``layout`` into the global array; the global shape follows from the components.
    Replicas are not compared: the first device holding each shard supplies it."""
    if not components:
        raise InvalidArgumentError("no components given")
    dtype = _dtype_of(components[0])
    native = _unbound.dtensor_join(str(layout), [_to_native(c) for c in components])
    return _from_native(native, dtype)


def relayout(components: Sequence[Any], src_layout: Layout, dst_layout: Layout) -> List[np.ndarray]:
    """Moves ``components`` of ``src_layout`` to the components of ``dst_layout`` on the
    same mesh, each target filled from the sources overlapping it (the global array is never
    built), as ``dtensor.relayout`` would leave them."""
    if not components:
        raise InvalidArgumentError("no components given")
    dtype = _dtype_of(components[0])
    parts = _unbound.dtensor_relayout([_to_native(c) for c in components], str(src_layout), str(dst_layout))
    return [_from_native(p, dtype) for p in parts]


def reshard(
    src_prefix: PathLike,
    dst_prefix: PathLike,
    mesh: Union[Mesh, str],
    layouts: Union[Mapping[str, Union[str, Sequence[str]]], Sequence[str], None] = None,
    default: Union[str, Sequence[str], None] = None,
    *,
    jobs: int = 2,
    dry_run: bool = False,
) -> Dict[str, Any]:
    """Rewrites the checkpoint ``src_prefix`` for other layouts on ``mesh`` at
    ``dst_prefix``, as ``unbound reshard SRC DST --mesh MESH [--layout ...] [--default ...]``
    does, streamed (no variable is held whole), written atomically; ``dst_prefix`` must not
    exist (:class:`unbound.OutputExistsError`).

    ``layouts`` maps a checkpoint key, object path or regular expression (matching whole) to
    specs (``"y,unsharded"`` or ``["y", "unsharded"]``), first match wins; a list of
    ``"KEY_OR_REGEX=SPECS"`` strings works too. ``default`` gives the specs for every other
    variable of that rank; ``default="replicated"`` replicates every other variable, whatever
    its rank. Returns the report ``unbound reshard --json`` prints (``bytes``,
    ``seconds``, ``num_shards``, ...), or with ``dry_run`` the plan, writing nothing.
    """
    rules: List[str] = []
    if isinstance(layouts, Mapping):
        for key, specs in layouts.items():
            rules.append(f"{key}={specs if isinstance(specs, str) else ','.join(specs)}")
    elif layouts is not None:
        rules = [str(r) for r in layouts]
    default_text = None if default is None else (default if isinstance(default, str) else ",".join(default))
    out = _unbound.reshard(
        os.fspath(src_prefix), os.fspath(dst_prefix), str(mesh), rules, default_text, jobs, dry_run
    )
    return json.loads(out)


def _specs_text(specs: Union[str, Sequence[str]]) -> str:
    return specs if isinstance(specs, str) else ",".join(specs)


def plan(
    dir: PathLike,
    mesh: Union[Mesh, str],
    inputs: Optional[Mapping[str, Union[str, Sequence[str]]]] = None,
    variables: Optional[Mapping[str, Union[str, Sequence[str]]]] = None,
    *,
    shapes: Optional[Mapping[str, Sequence[int]]] = None,
    signature: Optional[str] = None,
    tags: Optional[str] = None,
) -> Dict[str, Any]:
    """What TensorFlow's DTensor would do with signature ``signature`` (default
    ``serving_default``) of the SavedModel in ``dir`` on ``mesh``, decided offline, as
    ``unbound plan DIR --mesh MESH [--input ...] [--variable ...] [--shape ...] --json`` does.

    ``inputs`` maps an input name, and ``variables`` a variable's object path (the child
    names from the SavedModel's root joined with ``/``, ``"dense/kernel"``; a variable's
    name in TF1 models, which have no object graph) or a regular expression matching it
    whole (first match wins), to specs (``"x,unsharded"`` or ``["x", "unsharded"]``); what is
    not named is replicated, and a key that matches no variable raises
    :class:`unbound.InvalidArgumentError`. ``shapes`` pins dynamic dimensions of inputs (the
    batch) so byte counts are known. Returns the report as a dict: ``outputs`` (each output's
    ``specs`` and ``shape``), ``ops`` (every op's operand and result layouts, the operands
    relayouted first, its ``collectives`` with ``kind``, ``mesh_dims`` and ``bytes`` per
    device), ``assumed`` (ops planned without a rule), ``totals``. Where DTensor refuses the
    program, raises :class:`unbound.UnsupportedError` naming the op and DTensor's message.
    """
    out = _unbound.plan(
        os.fspath(dir),
        str(mesh),
        [(name, _specs_text(s)) for name, s in (inputs or {}).items()],
        [(name, _specs_text(s)) for name, s in (variables or {}).items()],
        {name: [int(d) for d in dims] for name, dims in (shapes or {}).items()},
        signature,
        tags,
    )
    return json.loads(out)

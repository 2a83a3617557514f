"""Reports: what the toolkit's functions return, the same data the `unbound` CLI prints.

A report is built from the JSON the Rust library serializes (for `show`, `inspect` and
`fingerprint`, exactly what the CLI prints with ``--json``). Its fields read as attributes,
nested objects as nested reports, lists as lists; :meth:`Report.to_dict` gives the plain JSON
data back, so ``report.to_dict() == json.loads(cli_output)``.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Dict, Iterator, List

__all__ = [
    "Report",
    "SavedModelInfo",
    "InspectReport",
    "VerifyReport",
    "FingerprintReport",
    "SplitReport",
    "MergeReport",
    "ExternalizeReport",
]


def _wrap(value: Any) -> Any:
    """JSON data with every object turned into a :class:`Report`."""
    if isinstance(value, dict):
        return Report(value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


class Report:
    """A read-only record of JSON data: ``report.field`` for each key (``report["key"]`` for
    keys that are not identifiers), nested objects as reports, and :meth:`to_dict`."""

    __slots__ = ("_data",)

    def __init__(self, data: Dict[str, Any]) -> None:
        object.__setattr__(self, "_data", data)

    @classmethod
    def from_json(cls, text: str) -> "Report":
        """The report of the JSON object `text`."""
        return cls(json.loads(text))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # internals (and copy/pickle probes) are never fields
            raise AttributeError(name)
        try:
            return _wrap(self._data[name])
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}") from None

    def __getitem__(self, key: str) -> Any:
        return _wrap(self._data[key])

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def keys(self) -> List[str]:
        """The field names, in the order the library serializes them."""
        return list(self._data)

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | {k for k in self._data if k.isidentifier()})

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Report):
            return self._data == other._data
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        text = repr(self._data)
        if len(text) > 300:
            text = text[:297] + "..."
        return f"{type(self).__name__}({text})"

    def to_dict(self) -> Dict[str, Any]:
        """The report as plain JSON data (a deep copy): what the CLI prints with ``--json``."""
        return copy.deepcopy(self._data)

    def __reduce__(self) -> Any:
        return (type(self), (self._data,))

    def to_json(self, indent: int = 2) -> str:
        """The report as JSON text."""
        return json.dumps(self._data, indent=indent)


class SavedModelInfo(Report):
    """What :func:`unbound.show` finds in a SavedModel: format, sizes, tag-sets, signatures,
    functions, variables, assets (``unbound show --json``)."""

    __slots__ = ()


class InspectReport(Report):
    """The chunk metadata of a ``.cpb`` file (``unbound inspect --json``): version, chunks,
    the message tree, Riegeli chunks, and ``faults`` (damaged chunk data, for which the CLI
    exits with 1)."""

    __slots__ = ()

    @property
    def faults(self) -> List[str]:
        """The faults found in the chunk data; empty for a sound file (the JSON then omits
        the field, as the CLI's does)."""
        return list(self._data.get("faults", []))


class VerifyReport(Report):
    """What :func:`unbound.verify` found: ``faults`` (each with ``file`` and ``fault``) and
    ``checked``, the parts checked (``unbound verify`` prints them as its summary line)."""

    __slots__ = ()

    @property
    def ok(self) -> bool:
        """Whether no fault was found."""
        return not self._data["faults"]


class FingerprintReport(Report):
    """The ``FingerprintDef`` TensorFlow computes for a SavedModel, its fields under their proto
    names (``unbound fingerprint --json``; ``uuid`` is fresh each time, as TensorFlow makes
    it), plus :attr:`model_file` and :attr:`singleprint`."""

    __slots__ = ("_model_file",)

    def __init__(self, data: Dict[str, Any], model_file: str = "") -> None:
        super().__init__(data)
        object.__setattr__(self, "_model_file", model_file)

    def __reduce__(self) -> Any:
        return (type(self), (self._data, self._model_file))

    @property
    def model_file(self) -> str:
        """The model file fingerprinted (``DIR/saved_model.cpb`` or ``DIR/saved_model.pb``)."""
        return self._model_file

    @property
    def singleprint(self) -> str:
        """TensorFlow's singleprint: the four hashes joined by ``/``."""
        d = self._data
        return (
            f"{d['graph_def_program_hash']}/{d['signature_def_hash']}/"
            f"{d['saved_object_graph_hash']}/{d['checkpoint_hash']}"
        )


class SplitReport(Report):
    """What :func:`unbound.split` wrote: ``path`` (``OUT/saved_model.cpb``, or ``.pb`` when
    nothing needed splitting), ``chunked``, ``chunks``, ``data_bytes`` (chunk data before
    compression), ``model_bytes`` (the model proto before splitting), ``copied_files`` and
    ``warnings`` (where the split differs from TensorFlow's algorithm)."""

    __slots__ = ()


class ExternalizeReport(Report):
    """What :func:`unbound.externalize` did (or would do): ``moved`` (each constant moved:
    ``meta_graph``, ``function`` (``None`` for the graph), ``node``, ``dtype``, ``shape``,
    ``bytes``, ``variable``, ``checkpoint_key``), ``kept`` (constants at least the minimum size
    left, with a ``reason``), ``model_bytes_before``, ``model_bytes_after``, ``moved_bytes``
    and ``written``: what ``unbound externalize --json`` prints."""

    __slots__ = ()


class MergeReport(Report):
    """What :func:`unbound.merge` wrote: ``path`` (``OUT/saved_model.pb``), ``model_bytes`` and
    ``copied_files``."""

    __slots__ = ()

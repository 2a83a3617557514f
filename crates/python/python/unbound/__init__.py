"""unbound: TensorFlow model artifacts of any size, from Python.

The `unbound` CLI's toolkit as functions returning typed reports, checkpoints as NumPy arrays,
the chunked protobuf format (TensorFlow's Splitter and Merger) for any message, DTensor layouts,
and, in :mod:`unbound.tensorflow`, the SavedModel image format (`saved_model.cpb`) for
open-source TensorFlow, past 2 GiB. TensorFlow is never required to import this package.
"""

from __future__ import annotations

from unbound._unbound import __version__
from unbound._errors import *  # noqa: F401,F403
from unbound._errors import __all__ as _errors_all
from unbound._toolkit import *  # noqa: F401,F403
from unbound._toolkit import __all__ as _toolkit_all
from unbound._checkpoint import *  # noqa: F401,F403
from unbound._checkpoint import __all__ as _checkpoint_all
from unbound._dtensor import *  # noqa: F401,F403
from unbound._dtensor import __all__ as _dtensor_all
from unbound import tensorflow  # noqa: F401  (the module; TensorFlow itself is imported lazily)

__all__ = [
    "__version__",
    *_errors_all,
    *_toolkit_all,
    *_checkpoint_all,
    *_dtensor_all,
    "tensorflow",
]

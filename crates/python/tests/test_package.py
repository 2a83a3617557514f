"""The package imports without TensorFlow and exposes its version and exceptions."""

import subprocess
import sys

import unbound


def test_version_is_the_crate_version():
    assert unbound.__version__.count(".") == 2


def test_import_does_not_import_tensorflow():
    code = "import sys, unbound; sys.exit(1 if 'tensorflow' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_exceptions_derive_from_the_builtin_meaning_the_same():
    assert issubclass(unbound.NotFoundError, FileNotFoundError)
    assert issubclass(unbound.KeyNotFoundError, KeyError)
    assert issubclass(unbound.FormatError, ValueError)
    for name in unbound._errors.__all__:
        assert issubclass(getattr(unbound, name), unbound.Error)

"""Type stubs for the extension module `unbound._unbound` (private: use `unbound`)."""

__version__: str

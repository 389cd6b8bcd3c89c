"""deepsharp's version, as its distribution states it."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("deepsharp")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.1.0"

"""align's version, read from the installed distribution's metadata: pyproject.toml is the one
place it is written. Every store and result records it (`align_version`)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("align")
except (
    PackageNotFoundError
):  # the source folder on sys.path without an install: say so, never guess
    __version__ = "0+unknown"

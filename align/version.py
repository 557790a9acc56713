"""align's version, read from the installed distribution's metadata: pyproject.toml is the one
place it is written. Every store and result records it (`align_version`).

The distribution is `align-depth` (the package registry's `align` is another project); the
import package and the command are `align`."""

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "align-depth"

try:
    __version__ = version(DISTRIBUTION)
except (
    PackageNotFoundError
):  # the source folder on sys.path without an install: say so, never guess
    __version__ = "0+unknown"

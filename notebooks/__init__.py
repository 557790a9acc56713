"""align's notebooks, installed with the package as `align.notebooks`: `FOLDER` is where they
are (`python -m align.notebooks` prints it; copy them from there and run them beside a result).

The notebooks read the demo's output by default wherever they are run: `demo_output()` finds
the `demo-output/` folder that `align demo` (or `make demo` in a checkout) writes, in the
folder the notebook runs in or any folder above it, so a notebook run where it sits in a
checkout (`notebooks/`) reads the checkout's `demo-output/`."""

import os

from align.errors import InputError

FOLDER = os.path.dirname(os.path.abspath(__file__))
NOTEBOOKS = ("alignment.ipynb", "analyses.ipynb")
DEMO_OUTPUT = "demo-output"


def demo_output(start: str | None = None) -> str:
    """The nearest `demo-output/` folder: in `start` (default: the current folder) or the
    first folder above it that holds one.

    Raises
    ------
    InputError
        One line, when no folder from `start` up to the root holds `demo-output/`: it names
        `start` and what to do (run `align demo` there, or point the notebook at a result).
    """
    here = os.path.abspath(start or os.getcwd())
    folder = here
    while True:
        found = os.path.join(folder, DEMO_OUTPUT)
        if os.path.isdir(found):
            return found
        parent = os.path.dirname(folder)
        if parent == folder:
            raise InputError(
                f"no {DEMO_OUTPUT}/ in {here} or any folder above it: run `align demo` there "
                "(`make demo` in a checkout), or set the notebook's paths (or their ALIGN_* "
                "environment variables) to your own results"
            )
        folder = parent

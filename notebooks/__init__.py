"""align's notebooks, installed with the package as `align.notebooks`: `FOLDER` is where they
are (`python -m align.notebooks` prints it; copy them from there and run them beside a result)."""

import os

FOLDER = os.path.dirname(os.path.abspath(__file__))
NOTEBOOKS = ("alignment.ipynb", "analyses.ipynb")

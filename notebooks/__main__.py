"""`python -m align.notebooks`: the folder that holds align's notebooks."""

from align.notebooks import FOLDER

print(FOLDER)

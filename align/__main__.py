"""`python -m align ...` is `align ...`."""

from align.cli.main import main

main()

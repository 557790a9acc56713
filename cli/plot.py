"""Commands of align.cli.plot (filled in by its issue)."""

commands = []

"""Commands of align.cli.fit (filled in by its issue)."""

commands = []

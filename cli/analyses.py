"""Commands of align.cli.analyses (filled in by its issue)."""

commands = []

"""Commands of align.cli.demo (filled in by its issue)."""

commands = []

"""align.cli: click commands. They parse, call the library, and report; nothing else."""

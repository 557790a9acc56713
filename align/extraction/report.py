"""What an extraction run returns and how it writes numbers into its messages."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ExtractReport:
    path: str
    status: str  # "complete", "resumed", "already complete", "dry run"
    n_tokens: int
    seconds: float
    tokens_per_second: float
    dry_run: dict | None = None
    stats: dict | None = (
        None  # padding_fraction, group_window, loop_s, queue_blocked_s (a run that forwarded)
    )


def span(idx) -> str:
    """Indices as a range "a..b" when consecutive, else comma-separated."""
    idx = list(idx)
    if idx == list(range(idx[0], idx[-1] + 1)):
        return f"{idx[0]}..{idx[-1]}"
    return ",".join(map(str, idx))

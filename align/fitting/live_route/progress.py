"""Progress of a run of forwards on a terminal: tokens/s of each model, step k of n, the ETA
(`align fit --live`, and the analyses that run a model: contrib, lens, skip, erase, igrad; and
`align depthscore`'s resamples)."""

from __future__ import annotations

import sys
import time

LOG_EVERY = 10.0  # seconds between two plain log lines off a terminal


class Progress:
    """Tokens/s of each model (`sides`), step k of n and the ETA: a tqdm bar on a terminal,
    else a log line every ~LOG_EVERY s and at the last step, each begun with `command` and
    counting `unit`s ("batch" for the live fit, "forward" for layer skipping); the rates are
    `rate_unit`s a second ("tok", or "resamples" for a bootstrap)."""

    def __init__(
        self,
        total_batches: int,
        log,
        terminal: bool,
        command: str = "align fit --live",
        sides: tuple = ("source", "target"),
        unit: str = "batch",
        rate_unit: str = "tok",
    ):
        self.log, self.total, self.command, self.unit = log, max(total_batches, 1), command, unit
        self.rate_unit = rate_unit
        self.done, self.t0, self.last = 0, time.perf_counter(), time.perf_counter()
        self.seconds = {k: 0.0 for k in sides}
        self.tokens = {k: 0 for k in sides}
        self.bar = None
        if terminal:
            from tqdm import tqdm

            # a batch takes tens of ms at least: redraw at each one
            self.bar = tqdm(
                total=self.total,
                unit=unit,
                dynamic_ncols=True,
                leave=False,
                file=sys.stderr,
                mininterval=0,
            )

    def forward(self, side: str, tokens: int, seconds: float) -> None:
        self.tokens[side] += tokens
        self.seconds[side] += seconds

    def rates(self) -> str:
        """ "source 1,234 tok/s, target 567 tok/s"; "1,234 tok/s" for one model."""
        r = {k: self.tokens[k] / max(self.seconds[k], 1e-9) for k in self.seconds}
        if len(r) == 1:
            return f"{next(iter(r.values())):,.0f} {self.rate_unit}/s"
        return ", ".join(f"{k} {v:,.0f} {self.rate_unit}/s" for k, v in r.items())

    def step(self, what: str, n: int = 1) -> None:
        """`n` more of the `total` units done, the last of them `what` (e.g. "pass 1/2")."""
        self.done += n
        now = time.perf_counter()
        eta = (now - self.t0) / self.done * max(self.total - self.done, 0)
        if self.bar is not None:
            self.bar.set_description_str(what, refresh=False)
            self.bar.set_postfix_str(f"{self.rates()}, ETA {eta:,.0f} s", refresh=False)
            self.bar.update(n)
        elif now - self.last >= LOG_EVERY or self.done >= self.total:
            self.last = now
            self.log(
                f"{self.command}: {what}, {self.unit} {self.done:,}/{self.total:,}, {self.rates()}, "
                f"ETA {eta:,.0f} s"
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

"""The live route's progress on a terminal: tokens/s of each model, pass k of n, the ETA."""

from __future__ import annotations

import sys
import time


class Progress:
    """Tokens/s of each model, pass k of n and the ETA: a tqdm bar on a terminal, else a log
    line every ~10 s."""

    def __init__(self, total_batches: int, log, terminal: bool):
        self.log, self.total = log, max(total_batches, 1)
        self.done, self.t0, self.last = 0, time.perf_counter(), time.perf_counter()
        self.seconds = {"source": 0.0, "target": 0.0}
        self.tokens = {"source": 0, "target": 0}
        self.bar = None
        if terminal:
            from tqdm import tqdm

            # a batch takes tens of ms at least: redraw at each one
            self.bar = tqdm(
                total=self.total,
                unit="batch",
                dynamic_ncols=True,
                leave=False,
                file=sys.stderr,
                mininterval=0,
            )

    def forward(self, side: str, tokens: int, seconds: float) -> None:
        self.tokens[side] += tokens
        self.seconds[side] += seconds

    def rates(self) -> str:
        r = {k: self.tokens[k] / max(self.seconds[k], 1e-9) for k in self.seconds}
        return f"source {r['source']:,.0f} tok/s, target {r['target']:,.0f} tok/s"

    def step(self, what: str) -> None:
        self.done += 1
        now = time.perf_counter()
        eta = (now - self.t0) / self.done * (self.total - self.done)
        if self.bar is not None:
            self.bar.set_description_str(what, refresh=False)
            self.bar.set_postfix_str(f"{self.rates()}, ETA {eta:,.0f} s", refresh=False)
            self.bar.update(1)
        elif now - self.last >= 10 or self.done == self.total:
            self.last = now
            self.log(
                f"align fit --live: {what}, batch {self.done:,}/{self.total:,}, {self.rates()}, ETA {eta:,.0f} s"
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

"""What the library says, in its own terms, and who translates it.

The library's errors and log lines name the Python API's parameters in backticks (`` `batch_size`
0 must be at least 1 ``; `output` for where a result goes). A caller that offers them under other
names speaks them with `speaking` (the CLI: `batch_size` → `--batch-size`, `output` →
`-o`); every log line the library prints goes through `say`, and `shown` gives any message in
the installed terms. Without a translation a message is shown as written.
"""

from __future__ import annotations

import contextlib
import re
import sys
from typing import Callable

NAME = re.compile(r"`([a-z][a-z0-9_]*)`")
_terms: Callable[[str], str | None] | None = None


@contextlib.contextmanager
def speaking(terms: Callable[[str], str | None]):
    """While inside, show every parameter name `name` for which terms(name) is not None as
    terms(name); the terms before are back after."""
    global _terms
    before, _terms = _terms, terms
    try:
        yield
    finally:
        _terms = before


def shown(message: str, terms: Callable[[str], str | None] | None = None) -> str:
    """`message` in `terms` (default: those installed by `speaking`, if any)."""
    terms = terms or _terms
    if terms is None:
        return message
    return NAME.sub(lambda m: terms(m.group(1)) or m.group(0), message)


def say(message: str) -> None:
    """The library's log line, on stderr, in the installed terms."""
    print(shown(message), file=sys.stderr, flush=True)


def human_bytes(n: float) -> str:
    """Bytes in binary units for a message, one decimal.

    1536 -> "1.5 KiB", 1.6e9 -> "1.5 GiB", 512 -> "512 B"; past ZiB, YiB with thousands
    separators.

    Parameters
    ----------
    n : float
        Bytes.

    Returns
    -------
    str
        The text.
    """
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB"):
        if abs(n) < 1024:
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:,.1f} YiB"


@contextlib.contextmanager
def heartbeat(log: Callable[[str], None], what: str, every: float = 10.0):
    """While inside, a line `{what}: still running, N s` whenever `every` seconds pass with no
    line logged through the yielded function: a step that prints nothing of its own for
    longer still shows that it runs. Yields the log to use inside (it resets the clock)."""
    import threading
    import time

    start = time.monotonic()
    last = [start]
    lock = threading.Lock()
    stop = threading.Event()

    def spoken(line: str) -> None:
        with lock:
            last[0] = time.monotonic()
            log(line)

    def beat() -> None:
        while not stop.wait(min(every, 1.0)):
            with lock:
                now = time.monotonic()
                if now - last[0] >= every:
                    last[0] = now
                    log(f"{what}: still running, {now - start:.0f} s")

    thread = threading.Thread(target=beat, name="heartbeat", daemon=True)
    thread.start()
    try:
        yield spoken
    finally:
        stop.set()
        thread.join()

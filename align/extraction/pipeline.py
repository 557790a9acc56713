"""The device-to-store pipeline of a run: the store's sequences forwarded window by window in
length-grouped batches (align.extraction.batches), each batch's activations copied to host
(align.extraction.transfer), and every sequence handed, in corpus order, through a bounded
queue to a writer thread that fills the store writer's chunk buffers; whole-chunk writes run
in WRITER_THREADS threads and commits follow them (align.store.ActivationWriter)."""

from __future__ import annotations

import queue
import sys
import threading
import time

import numpy as np

from align import store as st
from align.extraction import batches
from align.extraction.plan import dropped_summary
from align.extraction.report import ExtractReport, span
from align.extraction.transfer import forward_batch
from align.faults import fault_point

# Chunk writes run in this many threads (store.ActivationWriter): zarr encodes and checksums
# a chunk in the thread that writes it. Measured in bench/store_layout.py.
WRITER_THREADS = 4
# Items (lists of sequences' activations) that may wait for the writer: the back-pressure
# that bounds host memory to this many batches, the chunk buffers and one flush in flight.
QUEUE_DEPTH = 2


class _Progress:
    """A tqdm bar on a terminal; otherwise a plain log line (through `log`) every ~10 s."""

    def __init__(self, total: int, done: int, log, terminal: bool):
        self.stream, self.log = sys.stderr, log
        self.total, self.done, self.t0, self.last = total, done, time.time(), 0.0
        self.start_done = done
        self.bar = None
        if terminal:
            from tqdm import tqdm

            self.bar = tqdm(
                total=total,
                initial=done,
                unit="tok",
                unit_scale=True,
                file=self.stream,
                dynamic_ncols=True,
            )

    def update(self, n: int, padding: float | None = None):
        """`n` more tokens written; `padding`: the run's padded fraction of computed positions."""
        self.done += n
        if self.bar is not None:
            if padding is not None:
                self.bar.set_postfix_str(f"padding {padding:.1%}", refresh=False)
            self.bar.update(n)
            return
        now = time.time()
        if now - self.last >= 10 or self.done == self.total:
            self.last = now
            rate = (self.done - self.start_done) / max(now - self.t0, 1e-9)
            eta = (self.total - self.done) / rate if rate > 0 else float("inf")
            pad = f", padding {padding:.1%}" if padding is not None else ""
            self.log(
                f"align extract: {self.done:,}/{self.total:,} tokens, {rate:,.0f} tok/s{pad}, ETA {eta:,.0f} s"
            )

    def close(self):
        if self.bar is not None:
            self.bar.close()


class _BackgroundWriter:
    """Runs the store writer in a thread so writing overlaps the next forward pass. Each item
    is a list of appends (arrays, seq_end), one per sequence, in sequence order, with the
    device events its arrays' copies must finish by; at most `depth` items wait (the
    back-pressure that keeps host memory bounded: `put` blocks while the queue is full)."""

    def __init__(self, writer, depth: int = QUEUE_DEPTH):
        self.writer, self.q, self.error = writer, queue.Queue(maxsize=depth), None
        self.blocked_s = 0.0  # time the forward loop waited for room in the queue
        self.max_depth = 0  # the most items seen waiting (at most `depth`)
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while True:
            item = self.q.get()
            if item is None:
                if self.error is None:
                    try:
                        self.writer.drain()  # what is handed over is written and committed
                    except BaseException as e:
                        self.error = e
                return
            appends, events = item
            if self.error is None:
                try:
                    for ev in events:
                        ev.synchronize()  # the batch's device-to-host copies are done
                    for arrays, seq_end in appends:
                        self.writer.append(arrays, seq_end)
                except BaseException as e:  # re-raised in the caller's thread
                    self.error = e

    def put(self, appends: list, events: list = ()):
        if self.error is not None:
            raise self.error
        t = time.perf_counter()
        self.q.put((appends, list(events)))
        self.blocked_s += time.perf_counter() - t
        self.max_depth = max(self.max_depth, self.q.qsize())

    def close(self, raise_error: bool = True):
        self.q.put(None)
        self.thread.join()
        if self.error is not None and raise_error:
            raise self.error


def forward_all(
    model, store, batch_size: int, inputs, *, status: str, log, t0: float, terminal: bool
) -> ExtractReport:
    """Forward the store's sequences window by window (length-grouped batches, see
    group_batches) and hand each sequence's activations to the writer in sequence order, as
    soon as every sequence before it is done. A resume starts at a committed sequence, which
    may lie inside a window: the whole window is computed again, so every sequence meets the
    batch it had in an uninterrupted run, and the sequences already written are dropped.
    Closes the run's segment in the store's provenance and marks the store complete.
    `inputs` (`extraction.inputs.Inputs`): the boundaries, sublayer blocks and storage dtype."""
    boundaries, sublayer_blocks, store_dtype = (
        inputs.boundaries,
        inputs.sublayer_blocks,
        inputs.store_dtype,
    )
    writer = st.ActivationWriter(store, threads=WRITER_THREADS)
    start_tokens, start_seq = writer.committed
    window = batch_size * batches.GROUP_FACTOR
    w0 = (start_seq // window) * window
    # Nothing is recomputed when every token is written (a run killed at its final metadata).
    recompute = w0 < start_seq and start_tokens < store.n_tokens
    first_token = batches.seq_start_token(store, w0, start_tokens) if recompute else start_tokens
    progress = _Progress(store.n_tokens, start_tokens, log, terminal)
    bg = _BackgroundWriter(writer)
    t_fwd = time.time()
    stats = {"padded": 0, "computed": 0}

    def locator(members):
        """locate(k) for a batch: k indexes its real tokens, sequence after sequence."""
        cum = np.cumsum([0] + [len(ids) for _, _, ids in members])

        def locate(k: int) -> str:
            j = int(np.searchsorted(cum, k, side="right")) - 1
            g = members[j][1] + (k - int(cum[j]))
            doc, pos = int(store.tokens("doc", g, g + 1)[0]), int(store.tokens("pos", g, g + 1)[0])
            return f"document {doc}, position {pos} (token {g:,})"

        return locate

    n_forward = 0
    events: list = []  # device copies the next handed-over item's arrays wait for
    try:
        for win in batches.windows(store, first_token, window):
            ready: dict[int, dict] = {}
            nxt = next((i for i, (sid, _, _) in enumerate(win) if sid >= start_seq), len(win))
            for b in batches.group_batches([len(ids) for _, _, ids in win], batch_size):
                if n_forward:
                    fault_point("between_batches")
                n_forward += 1
                members = [win[i] for i in b]
                seqs = [ids for _, _, ids in members]
                arrays = forward_batch(
                    model, seqs, boundaries, sublayer_blocks, store_dtype, locator(members), events
                )
                T = max(len(x) for x in seqs)
                stats["computed"] += T * len(seqs)
                stats["padded"] += T * len(seqs) - sum(len(x) for x in seqs)
                off = 0
                for i, x in zip(b, seqs):
                    # Views into the batch's arrays: no copy until the writer's flush.
                    ready[i] = {k: v[:, off : off + len(x)] for k, v in arrays.items()}
                    off += len(x)
                del arrays
                appends, n_new = [], 0
                while nxt in ready:
                    appends.append((ready.pop(nxt), win[nxt][0] + 1))
                    n_new += len(win[nxt][2])
                    nxt += 1
                if appends:
                    bg.put(appends, events)
                    events = []
                    progress.update(n_new, stats["padded"] / stats["computed"])
    except BaseException:
        # The sequences already handed over are finite and whole: let them be written (and
        # committed at chunk ends) before the error propagates and the lock is released.
        bg.close(raise_error=False)
        try:
            writer.close()
        except BaseException:  # the first error is the one to report
            pass
        raise
    finally:
        progress.close()
    bg.close()
    padding = stats["padded"] / max(stats["computed"], 1)
    st.end_run(store, padding)
    writer.finish()
    n = store.n_tokens - start_tokens
    dt = time.time() - t_fwd
    dropped = dropped_summary(store.provenance.get("corpus", {}))
    log(
        f"align extract: wrote {store.path} ({store.n_tokens:,} tokens, boundaries {span(boundaries)}"
        + (f", sublayers of {len(sublayer_blocks)} blocks" if sublayer_blocks else "")
        + f") at {n / max(dt, 1e-9):,.0f} tok/s, "
        + f"padding {padding:.1%} of computed positions (batches grouped by length in windows of {window} sequences); "
        + dropped
    )
    run_stats = {
        "padding_fraction": padding,
        "group_window": window,
        "loop_s": dt,
        "queue_blocked_s": bg.blocked_s,
        "queue_max_depth": bg.max_depth,
        "writer_threads": writer.threads,
    }
    return ExtractReport(
        store.path, status, store.n_tokens, time.time() - t0, n / max(dt, 1e-9), stats=run_stats
    )

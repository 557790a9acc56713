"""One read of a corpus (`Reading`): it hashes the bytes it decodes in the same read (each
file opened once, each line hashed as it is decoded: `align.textfiles`, which also names a
file that is not UTF-8), and its `hexdigest()` is `corpus_hash`'s value. A store or result
records the hash of the read its tokens came from; a later read of other bytes in the same run
is refused (`Reading.check`): the corpus changed while align read it.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Iterator

from align import textfiles
from align.corpus.formats import generated_format
from align.corpus.sources import source_files
from align.corpus.spec import CorpusSpec, validate
from align.errors import InputError


def corpus_hash(spec: CorpusSpec) -> str:
    """sha256 of the source bytes (file names and contents in order) and the cutting options
    (`Reading`'s hash, of a read that decodes nothing). A generated format's problems follow
    from its options alone."""
    validate(spec)
    return Reading(spec).hexdigest()


class Reading:
    """One read of a corpus's files, each opened once: the text of its documents is decoded
    from exactly the bytes its hash covers (`items(spec, reading)`, `sequences(...,
    reading=)`), so a file replaced while align runs can never give tokens of one text and
    the hash of another.

    The hash is `corpus_hash`'s: sha256 of the options (JSON, sorted keys), then the data set
    name, or for each source file its name, a zero byte and its bytes. `hexdigest()` ends the
    read: the bytes not yet read (the rest of a file the documents stopped in, at --max-docs
    or --max-tokens, and the files after it) are read into the hash from the same handles."""

    def __init__(self, spec: CorpusSpec):
        self._h = hashlib.sha256(json.dumps(spec.options(), sort_keys=True).encode())
        self._paths: list[str] = []
        if spec.dataset is not None:
            self._h.update(spec.dataset.encode())
        elif spec.path is not None and generated_format(spec.fmt) is None:
            self._paths = source_files(spec)
        self._begun = 0  # source files opened so far
        self._open = None  # (path, handle) of the file being read, where its reader stopped
        self._digest: str | None = None

    def files(self) -> Iterator[tuple[str, Iterator[str]]]:
        """(path, its lines) of each source file in order; each raw line enters the hash as it
        is read (`align.textfiles.lines`)."""
        while self._digest is None and self._begun < len(self._paths):
            path, f = self._begin()
            yield path, self._lines(path, f)

    def _begin(self):
        self._finish_open()
        path = self._paths[self._begun]
        self._begun += 1
        self._h.update(os.path.basename(path).encode() + b"\0")
        self._open = (path, textfiles.open_binary(path, "corpus file"))
        return self._open

    def _lines(self, path: str, f) -> Iterator[str]:
        yield from textfiles.lines(f, path, "corpus file", self._h)
        if self._open is not None and self._open[1] is f:
            self._open = None
            f.close()

    def _finish_open(self) -> None:
        if self._open is None:
            return
        path, f = self._open
        self._open = None
        with f:
            try:
                for block in iter(lambda: f.read(1 << 20), b""):
                    self._h.update(block)
            except OSError as e:
                raise InputError(f"cannot read corpus file {path}: {e.strerror or e}") from None

    def close(self) -> None:
        """Close the file being read, without reading the rest (no hash is asked for)."""
        if self._open is not None:
            self._open[1].close()
            self._open = None

    def hexdigest(self) -> str:
        """The corpus hash of this read, its unread bytes read into it first (once)."""
        if self._digest is None:
            self._finish_open()
            while self._begun < len(self._paths):
                self._begin()
                self._finish_open()
            self._digest = self._h.hexdigest()
        return self._digest

    def check(
        self,
        spec: CorpusSpec,
        recorded: str,
        advice: str = "keep it unchanged while align runs, then run again",
    ) -> None:
        """Refuse this read (InputError, one line ending in `advice`) when its hash is not
        `recorded`, the hash taken earlier in the same run: the corpus changed while align
        was reading it."""
        now = self.hexdigest()
        if now != recorded:
            raise InputError(
                f"corpus {spec.describe()} changed while align read it (sha256 {recorded[:12]}… when the "
                f"run began, {now[:12]}… now): {advice}"
            )

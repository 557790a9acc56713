"""Reading the text files align is given: corpora (.txt, .jsonl, folders), prompt, answer and
reference files, and the JSON files of a checkpoint. Every reader decodes through `decode`,
so a file that is not UTF-8 is one line, the same everywhere: the file, the first byte that is
not UTF-8 (its value and offset from the file's start) and its line, e.g.

    corpus file docs.txt is not UTF-8 (byte 0xe9 at offset 5, line 2): convert it to UTF-8,
    e.g. iconv -f latin1 -t utf-8

A file that starts with the byte-order mark of UTF-16 or UTF-32 is named as that encoding, and
the conversion given is from it (latin1 would turn every character into two or four).

`lines` streams a file's lines (memory stays flat) and adds each raw line to a hash as it is
read, so that a hash taken this way covers exactly the bytes the text was decoded from;
`read` gives a whole (small) file's text.
"""

from __future__ import annotations

from typing import BinaryIO, Iterator

from align.errors import InputError


def open_binary(path: str, what: str, error=InputError) -> BinaryIO:
    """`path` opened for reading bytes, or `error` (one line) naming `what` and `path`."""
    try:
        return open(path, "rb")
    except IsADirectoryError:
        raise error(f"{what} {path} is a folder, not a file") from None
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror or e}") from None


def decode(
    raw: bytes, path: str, what: str, offset: int = 0, line: int | None = None, error=InputError
) -> str:
    """`raw` (bytes of `path` starting at byte `offset`, on line `line`) as UTF-8 text, or
    `error`: "{what} {path} is not UTF-8 (byte 0x.. at offset N, line K): convert it ..."."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        bom = encoding_of_bom(raw) if offset == 0 else None
        if bom is not None:
            raise error(
                f"{what} {path} is {bom} (its first bytes are {bom}'s byte-order mark), not UTF-8: "
                f"convert it to UTF-8, e.g. iconv -f {bom} -t utf-8"
            ) from None
        at = f", line {line}" if line is not None else ""
        raise error(
            f"{what} {path} is not UTF-8 (byte 0x{raw[e.start]:02x} at offset {offset + e.start:,}{at}): "
            "convert it to UTF-8, e.g. iconv -f latin1 -t utf-8"
        ) from None


# Byte-order marks of the encodings that are not UTF-8, longest first (UTF-32LE's mark begins
# with UTF-16LE's), and the name iconv knows each encoding by.
BYTE_ORDER_MARKS = (
    (b"\x00\x00\xfe\xff", "UTF-32BE"),
    (b"\xff\xfe\x00\x00", "UTF-32LE"),
    (b"\xfe\xff", "UTF-16BE"),
    (b"\xff\xfe", "UTF-16LE"),
)


def encoding_of_bom(raw: bytes) -> str | None:
    """The encoding whose byte-order mark `raw` (a file's first bytes) starts with, or None."""
    return next((name for mark, name in BYTE_ORDER_MARKS if raw.startswith(mark)), None)


def lines(f: BinaryIO, path: str, what: str, digest=None, error=InputError) -> Iterator[str]:
    """The lines of the open binary file `f` from where it stands (its start), without their
    line ends, each decoded by `decode`; each raw line is added to `digest` (a hashlib
    object, when given) before it is decoded."""
    offset = 0
    try:
        for number, raw in enumerate(f, 1):
            if digest is not None:
                digest.update(raw)
            line = decode(raw, path, what, offset, number, error)
            offset += len(raw)
            yield line.rstrip("\r\n") if line.endswith("\n") else line
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror or e}") from None


def read(path: str, what: str, error=InputError) -> str:
    """The whole text of a small UTF-8 file (a JSON file of a checkpoint), read once."""
    with open_binary(path, what, error) as f:
        try:
            raw = f.read()
        except OSError as e:
            raise error(f"cannot read {what} {path}: {e.strerror or e}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
    return decode(raw, path, what, 0, line, error)  # raises, naming the line of the first bad byte

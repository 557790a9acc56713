"""The layer-spec language of `--boundaries`, `--source-boundaries`, `--target-boundaries`.

A spec selects residual boundaries 0..L (or any index range 0..n-1): comma-separated items,
each an integer (negative counts from the end: -1 is the last) or a Python slice `a:b:c`
(`::2` every other, `1:` all but the first). `all` or an empty spec is everything. The result
is sorted and without repeats.
"""

from __future__ import annotations

from align.errors import InputError


def parse_boundaries(
    spec: str | None, n_layers: int, option: str = "`boundaries`", count: int | None = None
) -> list[int]:
    """Indices selected by `spec` among range(count) (default: boundaries, n_layers + 1)."""
    n = n_layers + 1 if count is None else count
    if spec is None or spec.strip() in ("", "all"):
        return list(range(n))
    chosen: set[int] = set()
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            raise InputError(f"{option} {spec!r} has an empty item: write e.g. 0,4,8 or ::2")
        try:
            if ":" in item:
                parts = item.split(":")
                if len(parts) > 3:
                    raise ValueError
                a, b, c = (parts + [""] * 3)[:3]
                step = int(c) if c.strip() else 1
                if step == 0:
                    raise InputError(f"{option} {spec!r}: a slice step cannot be 0")
                sl = slice(int(a) if a.strip() else None, int(b) if b.strip() else None, step)
                chosen.update(range(n)[sl])
            else:
                i = int(item)
                if not -n <= i < n:
                    raise InputError(
                        f"{option} {spec!r}: index {i} is out of range for {n} boundaries (0..{n - 1})"
                    )
                chosen.add(i % n)
        except ValueError:
            raise InputError(
                f"{option} {spec!r}: {item!r} is not an integer or a slice a:b:c"
            ) from None
    if not chosen:
        raise InputError(f"{option} {spec!r} selects no boundary among 0..{n - 1}")
    return sorted(chosen)

"""Percentiles and the human-readable tables the benchmarks print."""

import math
from collections.abc import Iterable, Sequence


def percentile(sorted_values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile of already sorted values (None when empty)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def summary(values: Iterable[float], *, digits: int = 2) -> dict:
    """p50 / p95 / p99 / max, rounded; None for each when there are no values."""
    ordered = sorted(values)
    out = {f"p{p}": percentile(ordered, p) for p in (50, 95, 99)}
    out["max"] = ordered[-1] if ordered else None
    return {k: None if v is None else round(v, digits) for k, v in out.items()}


def fmt(value, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        text = f"{value:,.2f}" if abs(value) < 100 else f"{value:,.1f}"
    elif isinstance(value, int):
        text = f"{value:,}"
    else:
        text = str(value)
    return f"{text} {unit}".rstrip()


def table(rows: Sequence[Sequence], headers: Sequence[str] | None = None) -> str:
    """A plain, aligned text table: first column left, the others right."""
    cells = [[str(c) for c in row] for row in rows]
    if headers:
        cells.insert(0, [str(h) for h in headers])
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = []
    for n, row in enumerate(cells):
        parts = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join(parts).rstrip())
        if headers and n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)

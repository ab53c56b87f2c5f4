"""Statistics of comparisons, written once."""
from __future__ import annotations

import math
import statistics


def ranks(values) -> list:
    """Average ranks from 0: tied values share the mean of the ranks they span."""
    order = sorted(range(len(values)), key=values.__getitem__)
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2
        i = j + 1
    return out


def spearman(a, b) -> float:
    """Spearman's rank correlation of two equally long sequences (ties at average ranks, as scipy's); nan when
    fewer than two values or either is constant."""
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(f"spearman needs sequences of one length, got {len(a)} and {len(b)}")
    if len(a) < 2:
        return float("nan")
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    var = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return cov / var if var else float("nan")


def geomean(values) -> float:
    """The geometric mean of positive values (nan for none)."""
    values = list(values)
    if not values:
        return float("nan")
    return math.exp(statistics.fmean(math.log(v) for v in values))

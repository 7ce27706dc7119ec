"""Summary statistics: mean, percentiles, ratios, for benchmark reports and stream metrics.

One convention for percentiles everywhere: `q` in 0..100, linear interpolation between the
sorted values' ranks (numpy's default, "linear"), and an empty sample is an error, never 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TypedDict


class Summary(TypedDict):
    n: int
    mean: float
    p50: float
    p95: float
    min: float
    max: float


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation between ranks (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within 0..100, got {q}")
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(values: Sequence[float]) -> Summary:
    if not values:
        raise ValueError("summary of no values")
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"values must be finite numbers, got {list(values)}")
    return {
        "n": len(values),
        "mean": sum(values) / len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "min": min(values),
        "max": max(values),
    }


def ratio(numerator: float, denominator: float) -> float | None:
    """numerator / denominator, or None when the denominator is zero (no meaningful ratio)."""
    return None if denominator == 0 else numerator / denominator

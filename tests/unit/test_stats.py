"""`voicestream.stats.percentile`: the one percentile, q in 0..100, linear interpolation."""

from __future__ import annotations

import pytest

from voicestream.stats import percentile


def test_percentiles_interpolate_between_ranks() -> None:
    assert percentile([4.0], 95) == 4.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([10.0, 0.0, 20.0], 95) == pytest.approx(19.0)
    assert percentile(iter([3.0, 1.0, 2.0]), 0) == 1.0  # any iterable, sorted here


@pytest.mark.parametrize("values, q", [([], 50), ([1.0], 101), ([1.0], -1), ([1.0], 0.95 - 1)])
def test_an_empty_sample_or_a_q_outside_0_to_100_is_refused(values: list[float], q: float) -> None:
    with pytest.raises(ValueError):
        percentile(values, q)

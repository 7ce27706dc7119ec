"""Clocks for tests whose subject reads the time: the verdict must not depend on how fast the
machine runs, so the test decides what each reading returns."""

from __future__ import annotations


class ManualClock:
    """Time that moves only when the test says so: `clock.now += seconds`."""

    def __init__(self, start: float = 100.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


class TickingClock:
    """Time that moves `step_s` forward at every reading: whatever runs between two readings
    took `step_s`."""

    def __init__(self, step_s: float, start: float = 0.0) -> None:
        self.step_s = step_s
        self.now = start

    def __call__(self) -> float:
        self.now += self.step_s
        return self.now

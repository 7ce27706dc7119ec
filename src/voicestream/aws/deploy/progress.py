"""Progress lines: which step of how many, what it is doing, how long it took."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Progress = Callable[[str], None]


class Steps:
    """Numbered steps: `with steps.step("model weights"):` prints `[3/6] model weights` on entry
    and the elapsed time on exit; `steps.note(...)` prints an indented detail line."""

    def __init__(self, total: int, progress: Progress = print, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.progress = progress
        self.clock = clock
        self.current = 0

    @contextmanager
    def step(self, title: str) -> Iterator[None]:
        self.current += 1
        self.progress(f"[{self.current}/{self.total}] {title}")
        started = self.clock()
        yield
        self.progress(f"      done in {self.clock() - started:.0f} s")

    def note(self, message: str) -> None:
        self.progress(f"      {message}")

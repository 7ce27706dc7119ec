"""How much audio a listener has yet to hear: what the next sentence's synthesis may spend.

The model is a listener who plays every chunk as soon as it exists, without a pause: playback
of a chunk begins when it is synthesized or when the audio before it ends, whichever is later.
The real listener starts no earlier (the network and its jitter buffer only delay it), so the
audio ahead of it is at least this. The engine spends it on fewer, larger decoder windows for
the next sentence (engine/streaming/windows.py, `WindowPlan.ahead`). A listener left without audio though
the text was waiting tells the engine it is behind (`WindowPlan.behind`).
"""

from __future__ import annotations

import time
from collections.abc import Callable


class PlaybackClock:
    """One per stream of audio a listener hears in order (a request, or a bidi session)."""

    def __init__(self, now: Callable[[], float] = time.perf_counter) -> None:
        self._now = now
        self._playing_until = 0.0
        self._last_gap_from: float | None = None  # when the listener last ran out of audio

    def produced(self, seconds: float) -> None:
        """A chunk of `seconds` of audio was just synthesized."""
        now = self._now()
        if 0.0 < self._playing_until < now:
            self._last_gap_from = self._playing_until
        self._playing_until = max(now, self._playing_until) + seconds

    def ahead_s(self) -> float:
        """Seconds of audio produced that the listener has yet to hear."""
        return max(0.0, self._playing_until - self._now())

    def runs_dry_at(self, text_since: float) -> float:
        """When the listener runs (or ran) out of audio, for a step whose text has been there since
        `text_since`: the step's deadline. A listener with nothing to hear has waited since the text
        came, one whose audio ran out before that since then too."""
        return max(self._playing_until, text_since)

    def ran_dry_since(self, moment: float) -> bool:
        """The listener has run out of audio (now, or in a gap since filled) after `moment`: with
        `moment` a time the text to speak next was already there, the silence was the server's
        doing, not the text's lateness."""
        gap_from = self._playing_until if 0.0 < self._playing_until <= self._now() else self._last_gap_from
        return gap_from is not None and gap_from > moment

    def stop(self) -> None:
        """The listener stopped (a cancel): nothing it was sent will play on."""
        self._playing_until = 0.0
        self._last_gap_from = None

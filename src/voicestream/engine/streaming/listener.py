"""The listener: how much audio it has yet to hear, and whether the server has let it run dry.

One `Listener` per stream of audio a listener hears in order: a request, a bidi session, or one
`synthesize` call made on its own. Every chunk an engine yields is handed to it
(`SpeechEngine.synthesize` does that, once per chunk: like LiveKit's `AudioEmitter`, whose
`pushed_duration()` its sentence pacer reads), and everyone who needs the listener reads this one
clock: the server (its workers' deadlines: kokoro_server/scheduler.py), the window plan (audio
ahead buys fewer, larger windows; a server behind starts large: windows.py) and the pacer (no
window outlasts the audio ahead: pacing.py).

The model is a listener who plays every chunk as soon as it exists, without a pause: playback of
a chunk begins when it is synthesized or when the audio before it ends, whichever is later. The
real listener starts no earlier (the network and its jitter buffer only delay it), so the audio
ahead of it is at least this. Clocks are injected, so tests decide what time it is.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Final, Protocol, TypeVar

# A silence shorter than one of Kokoro's frames (25 ms) is the clock's rounding and the thread
# hand-offs, not a listener left waiting.
GAP_S: Final = 0.025


class Playable(Protocol):
    """Anything a listener hears: an engine's AudioChunk."""

    @property
    def duration_s(self) -> float: ...


A = TypeVar("A", bound=Playable)


class Listener:
    """The audio clock of one listener; safe to read from one thread while a worker feeds it."""

    def __init__(
        self, *, ahead_s: float = 0.0, now: Callable[[], float] = time.perf_counter, gap_s: float = GAP_S
    ) -> None:
        """`ahead_s`: audio the listener has yet to hear when it is made (earlier audio still
        playing, handed to it by someone else). `gap_s`: the shortest silence that counts as the
        listener having run dry."""
        if not (math.isfinite(ahead_s) and ahead_s >= 0.0):
            raise ValueError(f"ahead_s must be a finite number of seconds >= 0, got {ahead_s}")
        self.now = now
        self._gap_s = gap_s
        self._lock = threading.Lock()
        made = now()
        self._playing_until: float | None = made + ahead_s if ahead_s > 0 else None  # None: nothing heard yet
        self._last_gap_from: float | None = None  # when the listener last ran out of audio (filled since)
        self._text_since = made  # since when the text to speak next has been waiting
        self._pushed_s = 0.0
        self._last: object = None  # the chunk pushed last: a chunk is heard once
        self._epoch = 0  # bumped by stop(): audio of a synthesis begun before it is not heard

    # --- what the listener is handed ------------------------------------------------------------

    def push(self, audio: Playable) -> None:
        """`audio` was just handed to the listener. The same chunk pushed again (an engine wrapping
        another passes its chunks on) counts once."""
        with self._lock:
            if audio is self._last:
                return
            self._last = audio
            self._produced(audio.duration_s)

    def produced(self, seconds: float) -> None:
        """`seconds` of audio were just handed to the listener."""
        with self._lock:
            self._produced(seconds)

    def _produced(self, seconds: float) -> None:
        now = self.now()
        playing_until = self._playing_until
        if playing_until is not None and playing_until + self._gap_s < now:
            self._last_gap_from = playing_until
        self._playing_until = max(now, playing_until or now) + seconds
        self._pushed_s += seconds

    def hearing(self, chunks: Iterator[A]) -> Iterator[A]:
        """`chunks`, each pushed as it is handed on; none once the listener `stop`s (a synthesis
        still finishing its step after a barge-in: its audio is never played)."""
        epoch = self._epoch
        for chunk in chunks:
            if self._epoch != epoch:
                return
            self.push(chunk)
            yield chunk

    def waiting_since(self, moment: float) -> None:
        """The text to speak next has been there since `moment` (a request's arrival, or when the
        sentence before it started): a listener who runs dry after that was left waiting by the
        server."""
        with self._lock:
            self._text_since = moment

    def stop(self) -> None:
        """The listener stopped (a cancel): nothing it was sent will play on."""
        with self._lock:
            self._playing_until = None
            self._last_gap_from = None
            self._last = None
            self._epoch += 1

    # --- what the engine and the server read ----------------------------------------------------

    @property
    def pushed_s(self) -> float:
        """Seconds of audio handed to the listener so far (LiveKit's `pushed_duration()`)."""
        return self._pushed_s

    def ahead_s(self) -> float:
        """Seconds of audio handed to the listener that it has yet to hear."""
        playing_until = self._playing_until
        return 0.0 if playing_until is None else max(0.0, playing_until - self.now())

    def behind(self) -> bool:
        """The server is behind this listener: it ran out of audio while the text to speak next
        was waiting (`waiting_since`). Each window then waits for a worker whatever its size,
        and larger windows, which cost less, are the remedy (windows.py, pacing.py)."""
        return self.ran_dry_since(self._text_since)

    def runs_dry_at(self) -> float:
        """When the listener runs (or ran) out of audio, for the text waiting since `waiting_since`:
        its next step's deadline (scheduler.py). A listener with nothing to hear has waited since
        the text came, one whose audio ran out before that since then too."""
        with self._lock:
            playing_until = self._playing_until
            return self._text_since if playing_until is None else max(playing_until, self._text_since)

    def ran_dry_since(self, moment: float) -> bool:
        """The listener has run out of audio (now, or in a gap since filled), for longer than
        `gap_s`, after `moment`: with `moment` a time the text to speak next was already there,
        the silence was the server's doing, not the text's lateness."""
        with self._lock:
            playing_until = self._playing_until
            dry_now = playing_until is not None and playing_until + self._gap_s < self.now()
            gap_from = playing_until if dry_now else self._last_gap_from
            return gap_from is not None and gap_from > moment

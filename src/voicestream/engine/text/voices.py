"""Blended voice style tables: the canonical form of a blend and the bounded cache of their tables
(`VoiceTables`). The grammar of a voice or blend is the wire's (wire/voices.py)."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Final

import numpy as np
import numpy.typing as npt

from voicestream.engine.base import InvalidRequestError, check_voice
from voicestream.wire.voices import VoiceBlend

VoiceTable = npt.NDArray[np.float32]
# Blend weights are kept to this many decimals: finer differences are inaudible, and without a
# grid every new weight would be a new table.
WEIGHT_DECIMALS: Final = 3

BlendKey = tuple[tuple[str, float], ...]


def blend_key(blend: VoiceBlend) -> BlendKey:
    """The canonical form of a blend: one part per voice (weights of repeated voices added), in
    name order, weights normalized and rounded to WEIGHT_DECIMALS; parts that round to 0 dropped.
    `af_heart:2,am_adam:2`, `am_adam,af_heart` and `af_heart:0.5,am_adam:0.5001` share one key."""
    totals: dict[str, float] = collections.defaultdict(float)
    for name, weight in blend.parts:
        totals[name] += weight
    rounded = ((name, round(weight, WEIGHT_DECIMALS)) for name, weight in sorted(totals.items()))
    key = tuple((name, weight) for name, weight in rounded if weight > 0)
    if not key:  # needs over 2000 voices of equal share: refused rather than an empty table
        raise InvalidRequestError(f"every part of the blend rounds to a weight of 0 ({len(blend.parts)} parts)")
    return key


class VoiceTables:
    """Style tables by canonical blend (`blend_key`). Single voices are kept apart, each read
    (and verified) once: at most one table per valid voice (54 x 522 KB). Blends are at most
    `max_tables`, the least recently used dropped first (each is 510 x 256 float32, 522 KB;
    unbounded, every distinct blend string a client sent stayed in memory forever), and rotating
    blends never evicts the voices they are made of. Thread-safe.

    `load_voice` reads (and verifies) one voice's table; a blend is the weighted sum of them."""

    def __init__(self, load_voice: Callable[[str], VoiceTable], valid: tuple[str, ...], max_tables: int = 32) -> None:
        if max_tables < 1:
            raise ValueError(f"max_tables must be at least 1, got {max_tables}")
        self._load_voice = load_voice
        self._valid = valid
        self.max_tables = max_tables
        self._tables: collections.OrderedDict[BlendKey, VoiceTable] = collections.OrderedDict()
        self._voices: dict[str, VoiceTable] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Blend tables held (single voices are counted by `voices_held`)."""
        return len(self._tables)

    @property
    def voices_held(self) -> int:
        return len(self._voices)

    def get(self, spec: str) -> VoiceTable:
        """The table of a voice id or blend; UnknownVoiceError / InvalidRequestError for a bad spec."""
        key = blend_key(check_voice(spec, self._valid))
        if len(key) == 1:
            return self._voice(key[0][0])
        table = self._cached(key)
        if table is None:
            table = self._remember(key, self._blend(key))
        return table

    def _cached(self, key: BlendKey) -> VoiceTable | None:
        with self._lock:
            table = self._tables.get(key)
            if table is not None:
                self._tables.move_to_end(key)
            return table

    def _remember(self, key: BlendKey, table: VoiceTable) -> VoiceTable:
        with self._lock:
            self._tables[key] = table
            self._tables.move_to_end(key)
            while len(self._tables) > self.max_tables:
                self._tables.popitem(last=False)
        return table

    def _voice(self, name: str) -> VoiceTable:
        """One voice's table, read once (the voice ids are a fixed set: this cannot grow)."""
        with self._lock:
            table = self._voices.get(name)
        if table is None:
            table = self._load_voice(name)
            with self._lock:
                table = self._voices.setdefault(name, table)
        return table

    def _blend(self, key: BlendKey) -> VoiceTable:
        total = sum(weight for _, weight in key)
        table: VoiceTable | None = None
        for name, weight in key:
            part = (weight / total) * self._voice(name)
            table = part if table is None else table + part
        assert table is not None  # blend_key never returns an empty key
        return table.astype(np.float32, copy=False)

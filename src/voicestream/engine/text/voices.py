"""Voice ids, blends (`af_heart:0.7,am_michael:0.3`), the language each voice speaks, and the
bounded cache of blended style tables (`VoiceTables`)."""

from __future__ import annotations

import collections
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from voicestream.engine.base import InvalidRequestError, UnknownVoiceError

VoiceTable = npt.NDArray[np.float32]
# Blend weights are kept to this many decimals: finer differences are inaudible, and without a
# grid every new weight would be a new table.
WEIGHT_DECIMALS: Final = 3

# Kokoro's voice ids start with a language letter, then f/m: af_heart = American English, female.
LANGUAGE_OF_PREFIX: dict[str, str] = {
    "a": "en-us",
    "b": "en-gb",
    "e": "es",
    "f": "fr-fr",
    "h": "hi",
    "i": "it",
    "j": "ja",
    "p": "pt-br",
    "z": "cmn",
}

# Every voice of Kokoro-82M v1.0 (hexgrad/Kokoro-82M VOICES.md), shipped by both asset sources.
OFFICIAL_VOICES: tuple[str, ...] = (
    "af_alloy", "af_aoede", "af_bella", "af_heart", "af_jessica", "af_kore", "af_nicole",
    "af_nova", "af_river", "af_sarah", "af_sky", "am_adam", "am_echo", "am_eric", "am_fenrir",
    "am_liam", "am_michael", "am_onyx", "am_puck", "am_santa", "bf_alice", "bf_emma",
    "bf_isabella", "bf_lily", "bm_daniel", "bm_fable", "bm_george", "bm_lewis", "ef_dora",
    "em_alex", "em_santa", "ff_siwis", "hf_alpha", "hf_beta", "hm_omega", "hm_psi", "if_sara",
    "im_nicola", "jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo", "pf_dora",
    "pm_alex", "pm_santa", "zf_xiaobei", "zf_xiaoni", "zf_xiaoxiao", "zf_xiaoyi", "zm_yunjian",
    "zm_yunxi", "zm_yunxia", "zm_yunyang",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class VoiceBlend:
    """Voice ids with weights that sum to 1."""

    parts: tuple[tuple[str, float], ...]

    @property
    def language(self) -> str:
        return LANGUAGE_OF_PREFIX[self.parts[0][0][0]]


def parse_voice_spec(spec: str, valid: tuple[str, ...]) -> VoiceBlend:
    """Parse `af_heart` or `af_heart:0.7,am_michael:0.3`; weights default to equal shares.

    All voices of a blend must speak the same language (their G2P differs otherwise).
    """
    if not isinstance(spec, str) or not spec.strip():
        raise UnknownVoiceError(str(spec), valid)
    parts: list[tuple[str, float]] = []
    for item in spec.split(","):
        name, _, weight_text = item.strip().partition(":")
        if name not in valid:
            raise UnknownVoiceError(name, valid)
        try:
            weight = float(weight_text) if weight_text else 1.0
        except ValueError:
            raise InvalidRequestError(f"voice weight of {name!r} is not a number: {weight_text!r}") from None
        if not math.isfinite(weight) or weight <= 0:
            raise InvalidRequestError(f"voice weight of {name!r} must be positive, got {weight_text}")
        parts.append((name, weight))
    languages = {LANGUAGE_OF_PREFIX.get(name[0]) for name, _ in parts}
    if len(languages) > 1:
        raise InvalidRequestError(f"a blend must mix voices of one language, got {spec!r}")
    total = sum(weight for _, weight in parts)
    return VoiceBlend(tuple((name, weight / total) for name, weight in parts))


BlendKey = tuple[tuple[str, float], ...]


def blend_key(blend: VoiceBlend) -> BlendKey:
    """The canonical form of a blend: one part per voice (weights of repeated voices added), in
    name order, weights normalized and rounded to WEIGHT_DECIMALS; parts that round to 0 dropped.
    `af_heart:2,am_adam:2`, `am_adam,af_heart` and `af_heart:0.5,am_adam:0.5001` share one key."""
    totals: dict[str, float] = collections.defaultdict(float)
    for name, weight in blend.parts:
        totals[name] += weight
    rounded = ((name, round(weight, WEIGHT_DECIMALS)) for name, weight in sorted(totals.items()))
    return tuple((name, weight) for name, weight in rounded if weight > 0)


class VoiceTables:
    """Blended style tables by canonical blend (`blend_key`), at most `max_tables` of them: the
    least recently used is dropped first. Each table is 510 x 256 float32 (522 KB); unbounded,
    every distinct blend string a client sent stayed in memory forever. Thread-safe.

    `load_voice` reads (and verifies) one voice's table; a blend is the weighted sum of them."""

    def __init__(self, load_voice: Callable[[str], VoiceTable], valid: tuple[str, ...], max_tables: int = 32) -> None:
        if max_tables < 1:
            raise ValueError(f"max_tables must be at least 1, got {max_tables}")
        self._load_voice = load_voice
        self._valid = valid
        self.max_tables = max_tables
        self._tables: collections.OrderedDict[BlendKey, VoiceTable] = collections.OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._tables)

    def get(self, spec: str) -> VoiceTable:
        """The table of a voice id or blend; UnknownVoiceError / InvalidRequestError for a bad spec."""
        key = blend_key(parse_voice_spec(spec, self._valid))
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
        """One voice's table: cached like any blend, so blend churn over the same voices reads
        (and verifies) no file again."""
        key: BlendKey = ((name, 1.0),)
        table = self._cached(key)
        return table if table is not None else self._remember(key, self._load_voice(name))

    def _blend(self, key: BlendKey) -> VoiceTable:
        if len(key) == 1:
            return self._load_voice(key[0][0])
        total = sum(weight for _, weight in key)
        table: VoiceTable | None = None
        for name, weight in key:
            part = (weight / total) * self._voice(name)
            table = part if table is None else table + part
        assert table is not None  # a key has at least one part: the largest weight is >= 1/parts
        return table.astype(np.float32, copy=False)

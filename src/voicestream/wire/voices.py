"""Kokoro's voice ids, the grammar of a voice or blend (`af_heart:0.7,am_michael:0.3`), and the
language each voice speaks.

Pure standard library, like the rest of wire/: a client or a Lambda can check a voice before it
sends it; the engine checks it with the same function (engine/base.py, `check_voice`) and blends
the tables (engine/text/voices.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from voicestream.wire.errors import ErrorCode, ProtocolError

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


class UnknownVoice(ProtocolError):
    """`voice` is none of `valid`: code unknown_voice, with the valid ids listed."""

    def __init__(self, voice: str, valid: tuple[str, ...]) -> None:
        super().__init__(ErrorCode.UNKNOWN_VOICE, f"unknown voice {voice!r}; valid voices: {', '.join(valid)}")
        self.voice = voice
        self.valid = valid


@dataclass(frozen=True, slots=True)
class VoiceBlend:
    """Voice ids with weights that sum to 1."""

    parts: tuple[tuple[str, float], ...]

    @property
    def language(self) -> str:
        return LANGUAGE_OF_PREFIX[self.parts[0][0][0]]


# A blend weight's upper bound: weights are relative, and unbounded ones overflow their sum
# (`a:1e308,b:1e308` summed to inf, every share became 0, and the blend had no part).
MAX_WEIGHT = 1000.0


def parse_voice_spec(spec: str, valid: tuple[str, ...]) -> VoiceBlend:
    """Parse `af_heart` or `af_heart:0.7,am_michael:0.3`; weights default to equal shares.

    All voices of a blend must speak the same language (their G2P differs otherwise).
    `UnknownVoice` for a name not in `valid`, `ProtocolError` invalid_request for a bad weight."""
    if not isinstance(spec, str) or not spec.strip():
        raise UnknownVoice(str(spec), valid)
    parts: list[tuple[str, float]] = []
    for item in spec.split(","):
        name, _, weight_text = item.strip().partition(":")
        if name not in valid:
            raise UnknownVoice(name, valid)
        try:
            weight = float(weight_text) if weight_text else 1.0
        except ValueError:
            raise ProtocolError(
                ErrorCode.INVALID_REQUEST, f"voice weight of {name!r} is not a number: {weight_text!r}"
            ) from None
        if not (math.isfinite(weight) and 0 < weight <= MAX_WEIGHT):
            raise ProtocolError(
                ErrorCode.INVALID_REQUEST,
                f"voice weight of {name!r} must be a positive number up to {MAX_WEIGHT:g}, got {weight_text}",
            )
        parts.append((name, weight))
    languages = {LANGUAGE_OF_PREFIX.get(name[0]) for name, _ in parts}
    if len(languages) > 1:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, f"a blend must mix voices of one language, got {spec!r}")
    total = sum(weight for _, weight in parts)
    return VoiceBlend(tuple((name, weight / total) for name, weight in parts))

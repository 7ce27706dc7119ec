"""The Kokoro text options the plugins pass on every request: `lexicon` and `normalize`
(docs/protocol.md, "Pronunciation" and "Agent text"), checked when a plugin is built so that a
bad entry fails the agent's setup, not its first reply."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from voicestream.speech import Upstream
from voicestream.wire.errors import ProtocolError
from voicestream.wire.pronunciation import parse_lexicon


@dataclass(frozen=True, slots=True)
class RequestTextOptions:
    lexicon: dict[str, str] | None = None  # word -> "/phonemes/" or a respelling
    normalize: bool | None = None  # None: the server's default (on)


def text_options(upstream: Upstream, lexicon: Mapping[str, str] | None, normalize: bool | None) -> RequestTextOptions:
    """The options, validated as the server would; ValueError names what is wrong."""
    if upstream != "kokoro" and (lexicon is not None or normalize is not None):
        raise ValueError("lexicon and normalize are Kokoro options: the vLLM-Omni upstream takes neither")
    if normalize is not None and not isinstance(normalize, bool):
        raise ValueError(f"normalize must be true or false, got {normalize!r}")
    words = None if lexicon is None else dict(lexicon)
    try:
        parse_lexicon(words)
    except ProtocolError as error:
        raise ValueError(str(error)) from error
    return RequestTextOptions(words, normalize)

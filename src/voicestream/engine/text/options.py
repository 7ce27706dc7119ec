"""Per-request options of the text front end (what a request may change about how its text is read)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TextOptions:
    """`normalize`: read agent text right (agent_text.py: markup and emoji dropped; for English
    voices times, dates, phone numbers, URLs, units ... said as words). False speaks the text as
    misaki reads it, after the robustness rules of normalize.py, which always apply."""

    normalize: bool = True


DEFAULT_TEXT_OPTIONS = TextOptions()
"""The defaults, as one shared (immutable) value for parameter defaults."""

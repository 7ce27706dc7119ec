"""The agent-text cases' patterns (tests/support/agent_text_heard.py) against transcripts the two
listeners wrote in benchmarks/agent_text.py runs: each right reading is heard in the spelling
Whisper chose, and the wrong readings Whisper base writes otherwise are not."""

from __future__ import annotations

import pytest

from tests.support.agent_text_heard import CASES

CASE = {case.name: case for case in CASES}

# (case, transcript, heard): "on" transcripts are of the normalized text, "off" of the text as written.
TRANSCRIPTS = [
    ("date_iso", "It was due on December 3, 2024.", True),  # base, on
    ("date_iso", "It was due on December 3rd, 2024.", True),  # tiny.en, on
    ("date_iso", "It was due on 2024-103.", False),  # base, off
    ("date_iso", "It was due on 2024-03.", False),  # tiny.en, off
    ("date_long", "She was born December 3, 2024.", True),  # base, on and off
    ("range", "Read pages 10-20 tonight.", True),  # base, on
    ("range", "Read pages 10 to 20 tonight.", True),  # tiny.en, on
    ("range", "Read pages 1020 tonight.", False),  # base, off
    ("fraction", "Add 3-quarters cup of sugar.", True),  # base, on
    ("fraction", "Add 3 quarters cup of sugar.", True),  # tiny.en, on
    ("fraction", "Adds 3, 4 cup of sugar.", False),  # base, off
    ("fraction", "Add 3-4 cup of sugar.", False),  # tiny.en, off
    ("phone", "Call us at plus one for 15555-0132.", True),  # base, on: digit words count
    ("bold", "This is asterisk asterisk very important.", False),  # markup read aloud
]


@pytest.mark.parametrize(("name", "transcript", "heard"), TRANSCRIPTS)
def test_a_case_hears_the_right_reading_in_whispers_spelling_and_not_a_wrong_one(
    name: str, transcript: str, heard: bool
) -> None:
    assert CASE[name].heard(transcript) is heard

"""Agent-text sentences and what a listener must hear in each (benchmarks/agent_text.py runs them
all, with normalization on and off; tests/integration/test_agent_text.py gates a few).

A case is heard when its pattern matches the transcript of `listen` (multilingual Whisper base in
English, tests/support/asr.py), lower-cased. Not Whisper tiny.en: it drops one of a run of repeated
digits ("four one five, five five five" heard as "for 1555") on the int8 rendering of one CPU class
and not another's; base hears the run on each.
Whisper writes what it hears its own way ("3.45 PM", "$3 billion", "5 kilometers"), so each
pattern accepts the spellings of the right reading and, where a wrong reading would still
contain the right words (markup read aloud, a URL's "https"), refuses that reading. Phone numbers
are compared as digit strings: Whisper groups spoken digits unpredictably.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.support.asr import transcribe_language
from voicestream.engine.base import FloatAudio

_DIGIT_WORDS = {
    "zero": "0",
    "oh": "0",
    "one": "1",
    "two": "2",
    "to": "2",
    "too": "2",
    "three": "3",
    "four": "4",
    "for": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
}


def listen(audio: FloatAudio) -> str:
    """What the cases' listener hears in `audio` (24 kHz)."""
    return transcribe_language(audio, "en")


@dataclass(frozen=True, slots=True)
class HeardCase:
    name: str
    text: str
    pattern: str = ""  # a regex over the lower-cased transcript
    digits: str = ""  # or: these digits, in order and together, among the transcript's digits

    def heard(self, transcript: str) -> bool:
        said = transcript.lower()
        if self.digits:
            return self.digits in spoken_digits(said)
        return re.search(self.pattern, said) is not None


def spoken_digits(transcript: str) -> str:
    """Every digit of a transcript, digit words included, in order ("plus one for 1555" -> "141555")."""
    tokens = re.findall(r"\d|[a-z]+", transcript)
    return "".join(token if token.isdigit() else _DIGIT_WORDS.get(token, "") for token in tokens)


CASES = (
    HeardCase("money", "The total is $1,249.99 today.", r"1,?249 and 99 cents|thousand two hundred.*ninety.nine cents"),
    HeardCase("time", "Meet me at 3:45 PM tomorrow.", r"3[:.]45 ?p\.?m|three forty.five p"),
    HeardCase("time_oclock", "Call me at 10:00 am.", r"10( ?o'clock|:00)? ?a\.?m|ten a\.?m"),
    HeardCase("hour_am", "The meeting is at 9am.", r"\b9 ?a\.?m|nine a\.?m"),
    HeardCase("date_short", "The party is on Dec 3rd.", r"december (3rd|third)"),
    # Whisper base writes "December third" and "December three" alike ("December 3"): date_iso
    # still tells the date from the ISO form read as written; date_long is heard either way.
    HeardCase("date_iso", "It was due on 2024-12-03.", r"december (3rd|third|3),? (2024|twenty twenty.four)"),
    HeardCase("date_long", "She was born December 3, 2024.", r"december (3rd|third|3),? (2024|twenty twenty.four)"),
    HeardCase("phone", "Call us at +1 (415) 555-0132.", digits="14155550132"),
    HeardCase("email", "Write to support@example.com for help.", r"support(@| at )example(\.| dot )com"),
    HeardCase(
        "url",
        "The guide is at https://example.com/docs now.",
        r"^(?!.*(http|slash slash)).*example(\.| dot )com( slash |/)docs",
    ),
    HeardCase(
        "link",
        "Read [the guide](https://example.com/docs) first.",
        r"^(?!.*(http|slash|bracket)).*read the guide first",
    ),
    HeardCase("unit_km", "The station is 5 km away.", r"(5|five) kilometers"),
    HeardCase("unit_gb", "The file is 3.5 GB in size.", r"gigabytes?"),
    HeardCase("unit_mph", "Drive at 60 mph here.", r"miles per hour"),
    HeardCase("title", "Dr. Smith will see you.", r"(dr\.?|doctor) smith"),
    HeardCase("bold", "This is **very** important.", r"^(?!.*aster).*this is very important"),
    HeardCase("bullet", "- Buy milk and eggs.", r"^(?!.*(dash|minus|hyphen)).*milk and eggs"),
    HeardCase("emoji", "Great job 🎉!", r"^(?!.*(party|popper|confetti)).*great job"),
    HeardCase("acronym", "The FBI and the CIA met.", r"fbi.*cia"),
    HeardCase("percent", "Sales grew 50% this year.", r"50 ?%|fifty percent"),
    # Whisper writes the spoken "twenty-second" as "20 second".
    HeardCase("ordinal", "She came 22nd in the race.", r"22nd|twenty.second|20 second"),
    # Whisper base writes a spoken "ten to twenty" as "10-20" and "ten twenty" as "1020" (tiny.en
    # wrote both as "10-20": with it this case could not tell them apart).
    HeardCase("range", "Read pages 10-20 tonight.", r"(10|ten)( to |-)(20|twenty)"),
    HeardCase("fraction", "Add 3/4 cup of sugar.", r"(3|three)[ -]quarters?"),
    HeardCase("temperature", "It is 72°F outside.", r"(72|seventy.two) degrees fahrenheit"),
    HeardCase("negative", "It is -5 outside.", r"minus (5|five)"),
    HeardCase("version", "Install v2.1.3 today.", r"version (2\.1\.3|two point one point three)"),
    HeardCase("money_magnitude", "The company raised $3B last year.", r"\$3 billion|three billion dollars"),
    HeardCase(
        "money_tenths", "It costs $12.5 each.", r"\$12\.50|twelve dollars and fifty cents|12 dollars and 50 cents"
    ),
    HeardCase("per", "The plan is $20/month.", r"(per|a) month"),
    HeardCase("saint", "Visit St. Louis in May.", r"(st\.?|saint) louis"),
    HeardCase("for_example", "Bring fruit, e.g. apples.", r"for example"),
    HeardCase("incorporated", "Acme Inc. makes tools.", r"incorporated"),
    HeardCase("always", "We are open 24/7.", r"24.7|twenty.four.seven"),
    HeardCase("multiplier", "It runs 5x faster now.", r"(5|five) times faster"),
)

GATE = ("time", "date_short", "phone", "url", "unit_km", "bold", "money_magnitude", "for_example")
"""Cases the integration gate requires heard (each also missed or misread without normalization)."""

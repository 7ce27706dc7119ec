"""Agent text read right: an LLM's reply rewritten, before G2P, the way a person reads it aloud.

misaki already reads plain money (`$1,249.99`, `£3.50`), percentages, ordinals, years, big
numbers, most acronyms and `Dr.`/`Mr.` right; what it gets wrong was measured
(benchmarks/agent_text.py) and only that is rewritten here:

- markup is never read aloud: markdown emphasis, code marks, headings, bullets, quotes, rules,
  table pipes and emoji go; a link `[text](https://…)` reads as its text. Kokoro's own inline
  markup (`[word](/phonemes/)`, `[word](+1)`, `[word](#…#)`) passes through untouched;
- English voices only (the entity rules): times (`3:45 PM`, `9am`), dates (`Dec 3rd`,
  `2024-12-03`, `12/03/2024`: month first, day first for en-gb voices), phone numbers, URLs,
  e-mail addresses, units (`5 km`, `3.5 GB`, `60 mph`), temperatures, money with a magnitude
  (`$3B`) or a currency code, versions and IP addresses, fractions, ranges (`10-20`),
  multipliers, negative numbers and the abbreviations misaki spells out (`e.g.`, `St.`, `Inc.`).

Every rewrite is an `Edit` of the source; `NormalizedText` keeps them, so a range of the
normalized text maps back to the source (`source_range`), and `source_words` renames the words
misaki timed to the source's: `$3B` spoken as "three billion dollars" is ONE timed word, `$3B`.

Rules claim source ranges in priority order (the rule lists below, top first); a match that
overlaps a claimed range is skipped, so each character is rewritten at most once and every
rule sees the text as written (a link's text is still read by the entity rules: only its
brackets and target are claimed). Deleted markup takes the spaces after it along: misaki
reads a doubled space as part of the next word.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from num2words import num2words  # type: ignore[import-untyped]  # no stubs; misaki's own number reader

from voicestream.engine.text.g2p import Phonemes, SpokenWord

ENGLISH: Final = frozenset({"en-us", "en-gb"})


@dataclass(frozen=True, slots=True)
class Edit:
    """Source characters [start, end) are spoken as `replacement`."""

    start: int
    end: int
    replacement: str


@dataclass(frozen=True, slots=True)
class Placed:
    """An applied edit: source [start, end) became normalized [out_start, out_end)."""

    start: int
    end: int
    out_start: int
    out_end: int


@dataclass(frozen=True, slots=True)
class NormalizedText:
    source: str
    text: str
    placed: tuple[Placed, ...] = ()

    def source_range(self, start: int, end: int) -> tuple[int, int]:
        """The source range that normalized [start, end) was made from (end > start)."""
        return self._point(start, at_end=False), self._point(end, at_end=True)

    def edits_in(self, start: int, end: int) -> frozenset[int]:
        """Indices of the edits whose (non-empty) output overlaps normalized [start, end)."""
        return frozenset(
            index for index, edit in enumerate(self.placed) if edit.out_start < end and start < edit.out_end
        )

    def _point(self, position: int, *, at_end: bool) -> int:
        probe = position - 1 if at_end else position  # an end is judged by its last character
        shift = 0  # source index minus normalized index, after the edits passed so far
        for edit in self.placed:
            if probe < edit.out_start:
                break
            if probe < edit.out_end:
                return edit.end if at_end else edit.start
            shift = edit.end - edit.out_end
        return position + shift


Handler = Callable[[re.Match[str]], Sequence[Edit] | None]
"""A rule's edits for one match (None: the match is not what the rule reads, leave it)."""


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    handle: Handler
    claim_whole: bool = False  # claim the whole match, not only its edits (protected markup)


@functools.lru_cache(maxsize=512)  # a request's work check and then its synthesis ask for the same text
def normalize_agent_text(text: str, *, english: bool = True, british: bool = False) -> NormalizedText:
    """`text` with the markup rules (every language) and, for English, the entity rules applied
    (about 1 ms for a 100-character sentence)."""
    rules = [*_PROTECT, *_MARKUP, *(_english_rules(british) if english else ())]
    claimed: list[tuple[int, int]] = []
    edits: list[Edit] = []
    for rule in rules:
        for match in rule.pattern.finditer(text):
            if any(match.start() < end and start < match.end() for start, end in claimed):
                continue
            found = rule.handle(match)
            if found is None:
                continue
            edits.extend(found)
            claimed.extend([(match.start(), match.end())] if rule.claim_whole else [(e.start, e.end) for e in found])
    return _apply(text, sorted(edits, key=lambda edit: edit.start))


def source_words(phonemes: Phonemes, normalized: NormalizedText) -> Phonemes:
    """`phonemes` (of `normalized.text`) with its words named as the source's: each word made
    by an edit takes the edit's source text, and consecutive words of one edit are one word."""
    if not normalized.placed or not phonemes.words:
        return phonemes
    words: list[SpokenWord] = []
    spans: list[tuple[int, int]] = []  # source range of each word in `words`
    made_by: list[frozenset[int]] = []  # edits each word in `words` came from
    cursor = 0
    for word in phonemes.words:
        needle = word.text.strip()  # misaki's token text may carry a space from a doubled one
        at = normalized.text.find(needle, cursor) if needle else -1
        if at < 0:  # misaki's token text is not in the text (never seen): keep it as it is
            words.append(word)
            spans.append((-1, -1))
            made_by.append(frozenset())
            continue
        end = cursor = at + len(needle)
        edits = normalized.edits_in(at, end)
        start_s, end_s = normalized.source_range(at, end)
        if edits and made_by and made_by[-1] & edits:
            first_s = min(spans[-1][0], start_s)
            end_s = max(spans[-1][1], end_s)
            words[-1] = SpokenWord(normalized.source[first_s:end_s].strip(), words[-1].start, word.end)
            spans[-1] = (first_s, end_s)
            made_by[-1] = made_by[-1] | edits
            continue
        name = normalized.source[start_s:end_s].strip() if edits else word.text
        words.append(SpokenWord(name or word.text, word.start, word.end))
        spans.append((start_s, end_s))
        made_by.append(edits)
    return Phonemes(phonemes.text, tuple(words))


def _apply(text: str, edits: list[Edit]) -> NormalizedText:
    out: list[str] = []
    placed: list[Placed] = []
    position = length = 0
    for index, edit in enumerate(edits):
        kept = text[position : edit.start]
        out.append(kept)
        length += len(kept)
        replacement, end = edit.replacement, edit.end
        after_space = not length or next(piece for piece in reversed(out) if piece)[-1].isspace()
        if replacement.isspace() and after_space:
            replacement = ""  # a space after a space (the two sides of a deleted emoji, say)
        elif not replacement and _joins_words(text, edit):
            replacement = " "  # "great👍job": the two words stay two
        elif not replacement and after_space:
            # No double spaces: misaki reads a doubled space as part of the next word.
            limit = edits[index + 1].start if index + 1 < len(edits) else len(text)
            while end < limit and text[end] in " \t":
                end += 1
        out.append(replacement)
        placed.append(Placed(edit.start, end, length, length + len(replacement)))
        length += len(replacement)
        position = end
    out.append(text[position:])
    return NormalizedText(text, "".join(out), tuple(placed))


def _joins_words(text: str, edit: Edit) -> bool:
    return edit.start > 0 and edit.end < len(text) and text[edit.start - 1].isalnum() and text[edit.end].isalnum()


# --- how things are said -------------------------------------------------------------------------

_DIGITS: Final = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_MONTHS: Final = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def _cardinal(number: int) -> str:
    return str(num2words(number))


def _ordinal(number: int) -> str:
    return str(num2words(number, to="ordinal"))


def _year(number: int) -> str:
    return str(num2words(number, to="year"))


def _digits(run: str) -> str:
    return " ".join(_DIGITS[int(char)] for char in run if char.isdigit())


def _date(month: int, day: int, year: int | None) -> str | None:
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    spoken = f"{_MONTHS[month - 1]} {_ordinal(day)}"
    return f"{spoken}, {_year(year)}" if year is not None else spoken


def _sentence_end(match: re.Match[str]) -> str:
    """The "." of a match that took a dot ("p.m.", "etc.") and ends its text or line: that dot
    also ended the sentence (the server speaks a text sentence by sentence, so that is where it is)."""
    following = match.string[match.end() :].lstrip(" \t")
    return "." if match.group().endswith(".") and (not following or following[0] == "\n") else ""


def _replace(spoken: str) -> Handler:
    return lambda match: [Edit(match.start(), match.end(), spoken)]


def _delete(match: re.Match[str]) -> list[Edit]:
    return [Edit(match.start(), match.end(), "")]


def _rule(name: str, pattern: str, handle: Handler, flags: int = 0) -> Rule:
    return Rule(name, re.compile(pattern, flags), handle)


# --- markup: every language ----------------------------------------------------------------------

# Kokoro's (misaki's) inline markup: phonemes /…/, stress ±N or ±0.5, #…# features. Never touched.
_PROTECT: Final = (
    Rule(
        "kokoro_markup",
        re.compile(r"\[[^\]\n]+\]\((?:/[^)\n]*/|#[^)\n]*#|[+-]?\d+|[+-]?0\.5)\)"),
        lambda match: [],
        claim_whole=True,
    ),
)


def _link(match: re.Match[str]) -> list[Edit]:
    """`[text](target)` and `![alt](src)` read as their text: the rest goes."""
    return [Edit(match.start(), match.start(2), ""), Edit(match.end(2), match.end(), "")]


_EMOJI: Final = (
    "\U0001f000-\U0001faff"  # pictographs, emoticons, transport, flags (regional indicators) ...
    "\u2600-\u27bf"  # miscellaneous symbols and dingbats (☀ ✓ ❤)
    "\u2b00-\u2bff\u2300-\u23ff"  # arrows/stars (⭐), technical (⌛ ⏰)
    "\ufe0f\u20e3\u200d"  # variation selector, keycap, joiner
    "\U000e0020-\U000e007f"  # tag characters (subdivision flags)
)

_MARKUP: Final = (
    _rule("code_fence", r"^[ \t]*(?:```|~~~)[^\n]*$", _delete, re.MULTILINE),
    _rule("link", r"(!?\[)([^\]\n]+)\]\(([^)\s]*)\)", _link),
    _rule("table_rule", r"^[ \t]*\|?(?:[ \t]*:?-{3,}:?[ \t]*\|?)+[ \t]*$", _delete, re.MULTILINE),
    _rule("horizontal_rule", r"^[ \t]*(?:[-*_=][ \t]*){3,}$", _delete, re.MULTILINE),
    _rule("heading", r"^[ \t]*#{1,6}[ \t]+", _delete, re.MULTILINE),
    _rule("bullet", r"^[ \t]*[-*+•◦▪‣][ \t]+", _delete, re.MULTILINE),
    _rule("quote", r"^[ \t]*>+[ \t]?", _delete, re.MULTILINE),
    _rule("table_edge", r"^[ \t]*\|[ \t]*|[ \t]*\|[ \t]*$", _delete, re.MULTILINE),
    _rule("table_cell", r"[ \t]*\|[ \t]*", _replace(", ")),
    _rule("times_sign", r"(?<=\d)[ \t]?[*×][ \t]?(?=\d)", _replace(" times ")),
    _rule("emphasis", r"\*{1,3}(?=\S)|(?<=\S)\*{1,3}|~~|`+", _delete),
    _rule("underscores", r"(?<!\w)_{1,3}(?=[^\W_])|(?<=[^\W_])_{1,3}(?!\w)", _delete),
    _rule("emoji", f"[{_EMOJI}]+", _delete),
    # misaki reads a doubled space as part of the next word, which shifts its inline markup
    # ("[Kokoro](/…/)") onto the word before: one space is all a word boundary needs.
    _rule("spaces", r"(?<=\S)[ \t]{2,}(?=\S)", _replace(" ")),
)


# --- entities: English voices --------------------------------------------------------------------


def _email(match: re.Match[str]) -> list[Edit]:
    local, domain = match.group(1), match.group(2)
    spoken_local = re.sub(r"[._+-]", lambda sep: f" {_SEPARATORS[sep.group()]} ", local)
    spoken_domain = " dot ".join(domain.split("."))
    return [Edit(match.start(), match.end(), f"{spoken_local} at {spoken_domain}")]


_SEPARATORS: Final = {".": "dot", "_": "underscore", "-": "dash", "+": "plus", "/": "slash"}


def _url(match: re.Match[str]) -> list[Edit]:
    url = match.group().rstrip(".,;:!?")
    address = re.sub(r"^(?:https?://)?(?:www\.)?", "", url, flags=re.IGNORECASE)
    address = re.split(r"[?#]", address)[0].rstrip("/")
    host, _, path = address.partition("/")
    spoken = " dot ".join(part for part in host.split(".") if part)
    for segment in (part for part in path.split("/") if part):
        words = re.sub(r"[-_.]", lambda sep: f" {_SEPARATORS[sep.group()]} ", segment)
        spoken += f" slash {words}"
    return [Edit(match.start(), match.start() + len(url), spoken)]


def _phone(match: re.Match[str]) -> list[Edit]:
    number = match.group()
    groups = re.findall(r"\d+", number)
    spoken = ", ".join(_digits(group) for group in groups)
    if number.startswith("+"):
        spoken = "plus " + spoken
    return [Edit(match.start(), match.end(), spoken)]


def _iso_date(match: re.Match[str]) -> list[Edit] | None:
    spoken = _date(int(match.group(2)), int(match.group(3)), int(match.group(1)))
    return None if spoken is None else [Edit(match.start(), match.end(), spoken)]


def _numeric_date(british: bool) -> Handler:
    def handle(match: re.Match[str]) -> list[Edit] | None:
        first, second, year = int(match.group(1)), int(match.group(2)), int(match.group(3))
        month, day = (second, first) if british else (first, second)
        if month > 12 and day <= 12:  # unambiguous the other way round
            month, day = day, month
        year = year + 2000 if year < 100 else year
        spoken = _date(month, day, year)
        return None if spoken is None else [Edit(match.start(), match.end(), spoken)]

    return handle


_MONTH_NAME: Final = (
    r"(Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)


def _month(name: str) -> int:
    return next(index for index, month in enumerate(_MONTHS, start=1) if month.startswith(name[:3]))


def _month_day(match: re.Match[str]) -> list[Edit] | None:
    year = int(match.group(3)) if match.group(3) else None
    spoken = _date(_month(match.group(1)), int(match.group(2)), year)
    return None if spoken is None else [Edit(match.start(), match.end(), spoken)]


def _day_month(match: re.Match[str]) -> list[Edit] | None:
    day, month = int(match.group(1)), _month(match.group(2))
    if not 1 <= day <= 31:
        return None
    spoken = f"the {_ordinal(day)} of {_MONTHS[month - 1]}"
    if match.group(3):
        spoken += f", {_year(int(match.group(3)))}"
    return [Edit(match.start(), match.end(), spoken)]


def _month_year(match: re.Match[str]) -> list[Edit]:
    return [Edit(match.start(), match.end(), _MONTHS[_month(match.group(1)) - 1])]


def _meridiem(letter: str | None) -> str:
    return "" if not letter else (" AM" if letter.lower() == "a" else " PM")


def _clock(match: re.Match[str]) -> list[Edit]:
    hour, minute = int(match.group(1)), int(match.group(2))
    meridiem = _meridiem(match.group(4))
    if meridiem and hour > 12:
        meridiem = ""  # "14:30 PM": the clock says it already
    if minute == 0:
        minutes = "" if meridiem else (" o'clock" if 1 <= hour <= 12 else " hundred")
    elif minute < 10:
        minutes = f" oh {_cardinal(minute)}"
    else:
        minutes = f" {_cardinal(minute)}"
    hours = "zero" if hour == 0 and not meridiem else _cardinal(hour if hour or not meridiem else 12)
    seconds = f" and {_cardinal(int(match.group(3)))} seconds" if match.group(3) and int(match.group(3)) else ""
    spoken = f"{hours}{minutes}{seconds}{meridiem}"
    return [Edit(match.start(), match.end(), spoken + _sentence_end(match))]


def _hour(match: re.Match[str]) -> list[Edit]:
    spoken = _cardinal(int(match.group(1))) + _meridiem(match.group(2))
    return [Edit(match.start(), match.end(), spoken + _sentence_end(match))]


_CURRENCY_NAMES: Final = {"$": "dollars", "€": "euros", "£": "pounds", "¥": "yen"}
_MAGNITUDES: Final = {"k": "thousand", "m": "million", "b": "billion", "bn": "billion", "t": "trillion"}
_CODES: Final = {"USD": "$", "EUR": "€", "GBP": "£"}


def _money_magnitude(match: re.Match[str]) -> list[Edit]:
    scale = match.group(3).lower()
    scale = _MAGNITUDES.get(scale, scale)
    spoken = f"{match.group(2)} {scale} {_CURRENCY_NAMES[match.group(1)]}"
    return [Edit(match.start(), match.end(), spoken)]


def _money_tenths(match: re.Match[str]) -> list[Edit]:
    return [Edit(match.start(), match.end(), match.group(1) + "0")]


def _code_before(match: re.Match[str]) -> list[Edit]:
    code, amount = match.group(1), match.group(2)
    spoken = f"{amount} yen" if code == "JPY" else _CODES[code] + amount
    return [Edit(match.start(), match.end(), spoken)]


def _code_after(match: re.Match[str]) -> list[Edit]:
    amount, code = match.group(1), match.group(2)
    spoken = f"{amount} yen" if code == "JPY" else _CODES[code] + amount
    return [Edit(match.start(), match.end(), spoken)]


_TEMPERATURE_UNITS: Final = {"C": " Celsius", "F": " Fahrenheit", "K": " kelvin", "": ""}


def _temperature(match: re.Match[str]) -> list[Edit]:
    sign, number, unit = match.group(1), match.group(2), match.group(3) or ""
    degrees = "degree" if number == "1" else "degrees"
    spoken = f"{'minus ' if sign else ''}{number} {degrees}{_TEMPERATURE_UNITS[unit]}"
    return [Edit(match.start(), match.end(), spoken)]


def _version(match: re.Match[str]) -> list[Edit] | None:
    if match.group(1) == "V" and "." not in match.group(2):
        return None  # "V8" is a name, not a version
    return [Edit(match.start(), match.end(), "version " + " point ".join(match.group(2).split(".")))]


def _dotted(match: re.Match[str]) -> list[Edit]:
    parts = match.group().split(".")
    address = len(parts) == 4 and all(int(part) <= 255 for part in parts)
    return [Edit(match.start(), match.end(), (" dot " if address else " point ").join(parts))]


_DENOMINATORS: Final = {2: ("half", "halves"), 4: ("quarter", "quarters")}


def _fraction(match: re.Match[str]) -> list[Edit] | None:
    numerator, denominator = int(match.group(1)), int(match.group(2))
    if not (1 <= numerator < denominator <= 16):
        return None  # "12/5" is no fraction anyone writes: a date or a ratio, left as it is
    one, many = _DENOMINATORS.get(denominator, (_ordinal(denominator), _ordinal(denominator) + "s"))
    spoken = f"{_cardinal(numerator)} {one if numerator == 1 else many}"
    return [Edit(match.start(), match.end(), spoken)]


def _range(match: re.Match[str]) -> list[Edit] | None:
    before = match.string[: match.start()]
    number = re.search(r"(?:^|(?<=[\s($€£(]))\d+(?:[.,]\d+)*$", before)
    return None if number is None else [Edit(match.start(), match.end(), " to ")]


def _magnitude(match: re.Match[str]) -> list[Edit]:
    return [Edit(match.start(2), match.end(), " " + _MAGNITUDES[match.group(2).lower()])]


# unit: (singular, plural)
_UNITS: Final = {
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "m/s": ("meter per second", "meters per second"),
    "kph": ("kilometer per hour", "kilometers per hour"),
    "mph": ("mile per hour", "miles per hour"),
    "km": ("kilometer", "kilometers"),
    "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"),
    "m": ("meter", "meters"),
    "mi": ("mile", "miles"),
    "ft": ("foot", "feet"),
    "kg": ("kilogram", "kilograms"),
    "mg": ("milligram", "milligrams"),
    "lb": ("pound", "pounds"),
    "lbs": ("pound", "pounds"),
    "oz": ("ounce", "ounces"),
    "ml": ("milliliter", "milliliters"),
    "mL": ("milliliter", "milliliters"),
    "L": ("liter", "liters"),
    "TB": ("terabyte", "terabytes"),
    "GB": ("gigabyte", "gigabytes"),
    "MB": ("megabyte", "megabytes"),
    "KB": ("kilobyte", "kilobytes"),
    "kB": ("kilobyte", "kilobytes"),
    "Gbps": ("gigabit per second", "gigabits per second"),
    "Mbps": ("megabit per second", "megabits per second"),
    "GHz": ("gigahertz", "gigahertz"),
    "MHz": ("megahertz", "megahertz"),
    "kHz": ("kilohertz", "kilohertz"),
    "Hz": ("hertz", "hertz"),
    "ms": ("millisecond", "milliseconds"),
    "sec": ("second", "seconds"),
    "min": ("minute", "minutes"),
    "hr": ("hour", "hours"),
    "hrs": ("hour", "hours"),
    "kWh": ("kilowatt hour", "kilowatt hours"),
    "kW": ("kilowatt", "kilowatts"),
    "mAh": ("milliamp hour", "milliamp hours"),
}
_UNIT_PATTERN: Final = "|".join(re.escape(unit) for unit in sorted(_UNITS, key=len, reverse=True))


def _unit(match: re.Match[str]) -> list[Edit]:
    number = re.search(r"[\d.,]+$", match.string[: match.start()])
    singular = number is not None and number.group() == "1"
    one, many = _UNITS[match.group(2)]
    return [Edit(match.start(), match.end(), " " + (one if singular else many))]


def _abbreviation(spoken: str) -> Handler:
    return lambda match: [Edit(match.start(), match.end(), spoken + _sentence_end(match))]


_ABBREVIATIONS: Final = {
    r"e\.g\.": "for example",
    r"i\.e\.": "that is",
    r"etc\.": "et cetera",
    r"Inc\.": "Incorporated",
    r"Ltd\.": "Limited",
    r"Corp\.": "Corporation",
    r"Prof\.": "Professor",
    r"approx\.": "approximately",
    r"Ave\.": "Avenue",
    r"Blvd\.": "Boulevard",
    r"Jr\.": "Junior",
    r"Sr\.": "Senior",
    r"Mt\.": "Mount",
    r"Dept\.": "Department",
    r"est\.": "estimated",
}

_PER: Final = r"month|mo|year|yr|day|week|wk|hour|hr|night|person|user|seat|unit|item|kg|lb|GB|TB|mile|km"


def _english_rules(british: bool) -> tuple[Rule, ...]:
    number = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
    return (
        _rule("email", r"(?<![\w.+-])([A-Za-z0-9][\w.+-]*)@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)", _email),
        _rule("url", r"\b(?:https?://|www\.)[^\s<>()\[\]\"']+", _url, re.IGNORECASE),
        _rule(
            "domain",
            r"(?<![\w@./])[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*\.(?:com|org|net|io|ai|dev|app|edu|gov|co\.uk|co)"
            r"\b(?:/[^\s<>()\[\]\"']*)?",
            _url,
        ),
        _rule(
            "phone",
            r"(?<![\w+])(?:\+\d{1,3}[ .-]?|1[ .-])?(?:\(\d{3}\)[ .-]?|\d{3}[ .-])\d{3}[ .-]\d{4}(?!\w)",
            _phone,
        ),
        _rule("local_phone", r"(?<![\w.,-])\d{3}-\d{4}(?![\w-])", _phone),
        _rule("iso_date", r"(?<![\w-])(\d{4})-(\d{2})-(\d{2})(?![\w-])", _iso_date),
        _rule("numeric_date", r"(?<![\w/])(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})(?![\w/])", _numeric_date(british)),
        _rule(
            "month_day",
            rf"\b{_MONTH_NAME}\.?[ \t]+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?[ \t]+(\d{{4}})\b)?",
            _month_day,
        ),
        _rule(
            "day_month",
            rf"\b(\d{{1,2}})(?:st|nd|rd|th)?[ \t]+(?:of[ \t]+)?{_MONTH_NAME}\b\.?(?:,?[ \t]+(\d{{4}})\b)?",
            _day_month,
        ),
        _rule("month_year", rf"\b{_MONTH_NAME}\.?(?=[ \t]+\d{{4}}\b)", _month_year),
        _rule(
            "clock",
            r"(?<![\w:.])([01]?\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?(?:[ \t]?([AaPp])(?:\.[Mm]\.|\.?[Mm]\b))?(?![\w:])",
            _clock,
        ),
        _rule("hour", r"(?<![\w:.])(1[0-2]|0?[1-9])[ \t]?([AaPp])(?:\.[Mm]\.|\.?[Mm]\b)", _hour),
        _rule(
            "money_magnitude",
            rf"(?<![\w.])([$€£¥])({number})[ \t]?(thousand|million|billion|trillion|bn|[KkMmBbTt])\b",
            _money_magnitude,
        ),
        # "$12.5" is twelve dollars and fifty cents (misaki: "and five cents")
        _rule("money_tenths", r"(?<![\w.])([$€£]\d[\d,]*\.\d)(?!\d|\.\d)", _money_tenths),
        _rule("yen", r"¥(\d[\d,]*(?:\.\d+)?)", lambda m: [Edit(m.start(), m.end(), f"{m.group(1)} yen")]),
        _rule("currency_code_before", rf"\b(USD|EUR|GBP|JPY)[ \t]?({number})\b", _code_before),
        _rule("currency_code_after", rf"(?<![\w.])({number})[ \t]?(USD|EUR|GBP|JPY)\b", _code_after),
        _rule("temperature", r"(?<![\w.])([-−]?)(\d+(?:\.\d+)?)[ \t]?°[ \t]?([CFK])?(?![A-Za-z])", _temperature),
        _rule("negative", r"(?:(?<=\s)|^)[-−](?=\d)", _replace("minus ")),
        _rule("version", r"(?<![\w.])([vV])(\d+(?:\.\d+){0,3})(?![\w.]|\.\d)", _version),
        _rule("dotted", r"(?<![\w.])\d+\.\d+\.\d+(?:\.\d+)?(?![\w]|\.\d)", _dotted),
        _rule("always", r"(?<![\w/])24/7(?![\w/])", _replace("twenty-four seven")),
        _rule("fraction", r"(?<![\w/.])(\d{1,2})/(\d{1,2})(?![\w/]|\.\d)", _fraction),
        _rule("range", r"(?<=\d)[ \t]?[-–—][ \t]?(?=\d+(?:[.,]\d+)*(?![\w-]|[.,]\d))", _range),
        _rule("dimensions", r"(?<=\d)[ \t]?[x×][ \t]?(?=\d)", _replace(" by ")),
        _rule("multiplier", r"(?<=\d)[x×](?![\w])", _replace(" times")),
        _rule("about", r"~(?=[ \t]?[\d$€£])", _replace("about ")),
        _rule("approximately", r"≈[ \t]?", _replace("approximately ")),
        _rule("plus_minus", r"±[ \t]?", _replace("plus or minus ")),
        _rule("number_sign", r"(?<![\w&])#(?=\d)", _replace("number ")),
        _rule("hashtag", r"(?<![\w&])#(?=[A-Za-z])", _delete),
        _rule("magnitude", r"(?<![\w.$€£¥])(\d+(?:\.\d+)?)(K|k|M|B|bn)\b", _magnitude),
        _rule("unit", rf"(?<=\d)([ \t]?)({_UNIT_PATTERN})(?![\w/°])", _unit),
        _rule("per", rf"(?<=[\w%])[ \t]?/[ \t]?(?=(?:{_PER})\b)", _replace(" per ")),
        *(
            _rule("abbreviation", rf"(?<![\w.]){pattern}(?!\w)", _abbreviation(spoken))
            for pattern, spoken in _ABBREVIATIONS.items()
        ),
        _rule("saint", r"(?<![\w.])St\.(?=[ \t]+[A-Z])", _replace("Saint")),
        _rule("street", r"(?<![\w.])St\.", _abbreviation("Street")),
    )

"""Text to Kokoro phonemes with misaki (the G2P that `kokoro` itself uses), offline, in worker processes.

English (US/GB) uses misaki's lexicon + spaCy tagger with espeak-ng as the out-of-vocabulary
fallback; Spanish, French, Hindi, Italian and Portuguese use misaki's espeak-ng G2P; Japanese uses
misaki's cutlet G2P (fugashi over the unidic-lite dictionary that its package carries) and Mandarin
misaki's jieba + pypinyin G2P, the ones `kokoro` picks for Kokoro-82M v1.0. Only English aligns
words to phonemes (word timings); the others give the phoneme string alone. Only English is
built ahead of time (g2p_preload): the other languages are built in a worker on its first
request of them, so they cost English's start nothing, and that build is not charged to the
request's text: a worker without the language answers at once, and the conversion is sent
again with `BUILD_ALLOWANCE_S` on top of the timeout.

Why processes: misaki is superlinear on some inputs (200 characters of "a-a-a-…" take seconds,
1000 apostrophes minutes), espeak-ng keeps process-global state and misaki's English G2P is not
documented as re-entrant. One lock around one in-process G2P let one session's pathological
text stall every other session's first audio. Here each worker process owns its own G2P, so
sessions convert text side by side, and a conversion that runs past `G2PSettings.timeout_s` is
stopped the only way Python can stop CPU-bound work: its worker is killed (and replaced), and
the request fails with `text_too_complex`. A small cache makes a text phonemized for the
work-budget check (`SpeechEngine.count_phonemes`) free to synthesize right after.

Workers are forked from a fork server (multiprocessing's "forkserver": a fresh single-threaded
process, never this multi-threaded one) that built the English G2P once (`g2p_preload`), so a
worker that replaces a killed one is ready in milliseconds instead of re-loading spaCy and the
lexicons for seconds, and the workers share those pages copy-on-write. As with any
multiprocessing start method but fork, a script that loads an engine needs the usual
`if __name__ == "__main__":` guard.
"""

from __future__ import annotations

import collections
import gc
import multiprocessing
import re
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from typing import Any, Final

from pebble import ProcessExpired, ProcessPool

from voicestream.engine.base import EngineError, TextTooComplexError, UnsupportedLanguageError

# Kokoro's hard limit on phonemes per inference (its context length minus the two pad tokens).
MAX_PHONEMES = 510

# misaki's espeak G2P language names for the non-English voices.
ESPEAK_LANGUAGES = {"es": "es", "fr-fr": "fr-fr", "hi": "hi", "it": "it", "pt-br": "pt-br"}
# misaki's own G2Ps (its `ja` and `zh` extras); "cmn" is wire/voices.py's name for Mandarin.
MISAKI_LANGUAGES: Final = ("ja", "cmn")
LANGUAGES: Final = ("en-us", "en-gb", *ESPEAK_LANGUAGES, *MISAKI_LANGUAGES)

# A language's phonemizer is built in a worker on that worker's first request of it (all but
# English, which the fork server preloads): jieba loads its dictionary, fugashi opens unidic-lite,
# a second or two on a loaded machine. That is not the text's work, so it has an allowance of its
# own beyond `G2PSettings.timeout_s`.
BUILD_ALLOWANCE_S = 60.0

# Kokoro's inline markup `[word](/phonemes/)` (misaki/en.py's LINK_REGEX): misaki's English G2P
# reads it natively; for the espeak languages `spliced_markup` does the same.
MARKUP: Final = re.compile(r"\[([^\]]+)\]\(([^\)]*)\)")

# Break preference when a text's phonemes exceed MAX_PHONEMES: sentence ends, then clauses, then words.
_BREAK_CLASSES = (".!?", ":;", ",—…", " ")


@dataclass(frozen=True, slots=True)
class G2PSettings:
    """`workers`: G2P processes (conversions that run at once); `timeout_s`: the longest one
    conversion (one request's text, or one sentence) may take before it is stopped."""

    workers: int = 2
    timeout_s: float = 5.0

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"G2P workers must be at least 1, got {self.workers}")
        if not self.timeout_s > 0:
            raise ValueError(f"the G2P timeout must be a positive number of seconds, got {self.timeout_s}")


@dataclass(frozen=True, slots=True)
class SpokenWord:
    """A word of the text and where its phonemes are: [start, end) in a phoneme string."""

    text: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Phonemes:
    """A phoneme string and its words (empty when the G2P does not align words: every language
    but English)."""

    text: str
    words: tuple[SpokenWord, ...] = ()

    def pieces(self, limit: int = MAX_PHONEMES) -> list[Phonemes]:
        """`split_phonemes` of the text, each piece with the words that start in it (positions
        re-based to the piece; a word cut by a hard cut ends with its piece)."""
        pieces: list[Phonemes] = []
        cursor = 0
        for piece in split_phonemes(self.text, limit):
            offset = self.text.index(piece, cursor)  # pieces are stripped substrings, in order
            cursor = offset + len(piece)
            words = tuple(
                SpokenWord(word.text, word.start - offset, min(word.end, cursor) - offset)
                for word in self.words
                if offset <= word.start < cursor
            )
            pieces.append(Phonemes(piece, words))
        return pieces


Phonemizer = Callable[[str], Phonemes]
Builder = Callable[[str], Phonemizer]
"""Builds the phonemizer of one language inside a worker (a module-level function: it is pickled)."""


def align_words(tokens: Sequence[Any], unknown: str = "❓") -> Phonemes:
    """The phoneme string misaki builds from its tokens, with each word's span in it.

    misaki joins `(phonemes or its unknown mark) + whitespace` over its tokens. A word is a token
    whose text holds a letter or digit; a token that speaks nothing ("$" before "5") joins the
    word it touches ("$5"). Punctuation tokens are not words (their phonemes are pauses).
    """
    parts: list[str] = []
    words: list[SpokenWord] = []
    position = 0
    prefix = ""
    touching_previous = False  # the previous token had no whitespace after it
    for token in tokens:
        phonemes = unknown if token.phonemes is None else str(token.phonemes)
        text = str(token.text)
        if any(ch.isalnum() for ch in text) or (not phonemes and text.strip()):
            if not phonemes:
                if touching_previous and words:
                    last = words[-1]
                    words[-1] = SpokenWord(last.text + text, last.start, last.end)
                else:
                    prefix += text
            else:
                words.append(SpokenWord(prefix + text, position, position + len(phonemes)))
                prefix = ""
        parts.append(phonemes + str(token.whitespace))
        position += len(phonemes) + len(str(token.whitespace))
        touching_previous = not token.whitespace
    joined = "".join(parts)
    stripped = joined.strip()
    shift = len(joined) - len(joined.lstrip())
    spans = tuple(
        SpokenWord(word.text, word.start - shift, min(word.end - shift, len(stripped)))
        for word in words
        if word.start - shift >= 0 and word.end > word.start
    )
    return Phonemes(stripped, spans)


class G2P:
    """Thread-safe text → phonemes over a pool of worker processes (see the module docstring).

    `build` makes a language's phonemizer inside a worker (tests pass their own). The pool
    starts on first use; `warm` starts it and loads English in every worker."""

    def __init__(
        self, settings: G2PSettings | None = None, *, build: Builder | None = None, cache_size: int = 512
    ) -> None:
        self.settings = settings or G2PSettings()
        self._build = build or build_phonemizer
        self._pool: ProcessPool | None = None
        self._pool_lock = threading.Lock()
        self._cache: collections.OrderedDict[tuple[str, str], Phonemes] = collections.OrderedDict()
        self._cache_size = cache_size
        self._cache_lock = threading.Lock()

    def phonemize(self, text: str, language: str) -> str:
        return self.phonemize_words(text, language).text

    def phonemize_words(self, text: str, language: str) -> Phonemes:
        """The phonemes of `text` and, for English, where each word's phonemes are."""
        return self.phonemize_many([text], language)[0]

    def phonemize_many(self, texts: Sequence[str], language: str) -> list[Phonemes]:
        """The phonemes of each text, converted in ONE worker task bounded by the timeout."""
        if language not in LANGUAGES and self._build is build_phonemizer:
            raise _unsupported(language)
        found = [self._cached(language, text) for text in texts]
        missing = sorted({text for text, phonemes in zip(texts, found, strict=True) if phonemes is None})
        if missing:
            converted = dict(zip(missing, self._convert(missing, language), strict=True))
            self._remember(language, converted)
            found = [converted.get(text, phonemes) for text, phonemes in zip(texts, found, strict=True)]
        return [phonemes or Phonemes("") for phonemes in found]

    def warm(self, language: str = "en-us") -> None:
        """Start every worker (each loads `language` as it starts) and wait until one answers."""
        self._convert(["Hello."], language)

    def close(self) -> None:
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            _stop_pool(pool)

    def _convert(self, texts: list[str], language: str) -> list[Phonemes]:
        """One task under the timeout; if its worker has not built `language` yet it answers None
        at once, and a second task may build it, with the build allowance on top."""
        converted = self._run(texts, language, build=False, timeout_s=self.settings.timeout_s)
        if converted is None:
            converted = self._run(texts, language, build=True, timeout_s=self.settings.timeout_s + BUILD_ALLOWANCE_S)
        assert converted is not None, "a worker allowed to build a language answers"
        return converted

    def _run(self, texts: list[str], language: str, *, build: bool, timeout_s: float) -> list[Phonemes] | None:
        future = self._workers().schedule(_phonemize_in_worker, (texts, language, build), timeout=timeout_s)
        try:
            result: list[Phonemes] | None = future.result()
            return result
        except TimeoutError:
            raise TextTooComplexError(
                f"the text took longer than {timeout_s:g} s to convert to phonemes "
                f"({sum(map(len, texts))} characters); simplify or shorten it"
            ) from None
        except ProcessExpired as error:  # espeak-ng crashed the worker: the pool starts another
            raise EngineError(f"the G2P worker died: {error}") from None

    def _workers(self) -> ProcessPool:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ProcessPool(
                    max_workers=self.settings.workers,
                    initializer=_start_worker,
                    initargs=(self._build, ("en-us",)),
                    context=_worker_context(preload=self._build is build_phonemizer),
                )
                weakref.finalize(self, _stop_pool_elsewhere, self._pool)
            return self._pool

    def _cached(self, language: str, text: str) -> Phonemes | None:
        with self._cache_lock:
            phonemes = self._cache.get((language, text))
            if phonemes is not None:
                self._cache.move_to_end((language, text))
            return phonemes

    def _remember(self, language: str, converted: dict[str, Phonemes]) -> None:
        with self._cache_lock:
            for text, phonemes in converted.items():
                self._cache[(language, text)] = phonemes
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)


def _worker_context(preload: bool) -> BaseContext:
    """Never fork this process itself: it runs threads (onnxruntime, asyncio, the pool's own),
    and a fork keeps their locks but not the threads. The fork server is a fresh process; with
    `preload` it builds the English G2P before forking anyone (module docstring). A builder of
    a test's own gets plain spawn: nothing to share."""
    if not preload:
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["voicestream.engine.text.g2p_preload"])  # read when the server starts
    return context


def _stop_pool(pool: ProcessPool) -> None:
    pool.stop()  # type: ignore[no-untyped-call]  # pebble leaves stop() unannotated
    pool.join(timeout=5)


def _stop_pool_elsewhere(pool: ProcessPool) -> None:
    """The stop of a G2P dropped without `close()`: its finalizer runs in whichever thread the
    garbage collector does, which can be one of the pool's own manager threads, and a thread
    cannot join itself (CI once failed with "cannot join current thread"). A thread of its own
    can always join them. At interpreter exit no thread can start; the finalizers then run in
    the main thread, which is none of the pool's."""
    try:
        threading.Thread(target=_stop_pool, args=(pool,), name="voicestream-g2p-stop", daemon=True).start()
    except RuntimeError:  # "can't create new thread at interpreter shutdown"
        _stop_pool(pool)


# --- inside the fork server and the worker processes ---------------------------------------------

_worker_build: Builder | None = None
_phonemizers: dict[tuple[Builder, str], Phonemizer] = {}


def preload(languages: Sequence[str]) -> None:
    """Build these languages' phonemizers now; in the fork server, every worker forked from it
    then starts with them. Frozen for the GC, so that collections in the workers do not touch
    (and so copy) the shared pages."""
    for language in languages:
        if (build_phonemizer, language) not in _phonemizers:
            _phonemizers[(build_phonemizer, language)] = build_phonemizer(language)
    gc.freeze()


def _start_worker(build: Builder, languages: tuple[str, ...]) -> None:
    global _worker_build
    _worker_build = build
    for language in languages:
        _worker_phonemizer(language)


def _worker_phonemizer(language: str) -> Phonemizer:
    assert _worker_build is not None, "the worker was not started with _start_worker"
    phonemizer = _phonemizers.get((_worker_build, language))
    if phonemizer is None:
        phonemizer = _phonemizers[(_worker_build, language)] = _worker_build(language)
    return phonemizer


def _phonemize_in_worker(texts: list[str], language: str, build: bool) -> list[Phonemes] | None:
    """The texts' phonemes; None, at once, when `language` is not built here and `build` is off."""
    assert _worker_build is not None, "the worker was not started with _start_worker"
    if not build and (_worker_build, language) not in _phonemizers:
        return None
    phonemizer = _worker_phonemizer(language)
    return [phonemizer(text) for text in texts]


def build_phonemizer(language: str) -> Phonemizer:
    """misaki's phonemizer of `language` (what every worker process runs)."""
    if language in ("en-us", "en-gb"):
        from misaki import en, espeak

        british = language == "en-gb"
        english = en.G2P(trf=False, british=british, fallback=espeak.EspeakFallback(british=british))

        def english_phonemes(text: str) -> Phonemes:
            phonemes, tokens = english(text)
            aligned = align_words(tokens, english.unk)
            # Words only when the alignment rebuilds misaki's own string (a future misaki may differ).
            return aligned if aligned.text == str(phonemes).strip() else Phonemes(str(phonemes).strip())

        return english_phonemes
    if language in ESPEAK_LANGUAGES:
        from misaki import espeak

        other = espeak.EspeakG2P(language=ESPEAK_LANGUAGES[language])

        def espeak_phonemes(text: str) -> Phonemes:
            return Phonemes(spliced_markup(text, lambda part: str(other(part)[0]).strip()))

        return espeak_phonemes
    if language == "ja":
        # misaki's JAG2P() (what `kokoro` builds for Japanese) is this Cutlet and nothing more, but
        # its module imports pyopenjtalk, which only its other G2P calls: importing Cutlet itself
        # spares the image pyopenjtalk and its dictionaries (~340 MB). fugashi finds unidic-lite.
        from misaki.cutlet import Cutlet

        japanese = Cutlet()

        def japanese_phonemes(text: str) -> Phonemes:
            phonemes, _ = japanese(text)
            return Phonemes(str(phonemes).strip())

        return japanese_phonemes
    if language == "cmn":
        import jieba
        from misaki import zh

        jieba.setLogLevel(60)  # it logs its dictionary load at INFO on stderr, once per worker
        # version None: the legacy G2P that `kokoro` uses for Kokoro-82M v1.0 (1.1 is for v1.1-zh).
        mandarin = zh.ZHG2P()

        def mandarin_phonemes(text: str) -> Phonemes:
            phonemes, _ = mandarin(text)
            return Phonemes(str(phonemes).strip())

        return mandarin_phonemes
    raise _unsupported(language)


def spliced_markup(text: str, phonemize: Callable[[str], str]) -> str:
    """The phonemes of `text` with its `[word](/phonemes/)` markup said as written: a G2P
    without markup support (espeak's would read the brackets and slashes aloud) converts the
    text between them. Markup of another kind (`[word](2)`, misaki's stress) is read as its word."""
    parts: list[str] = []
    cursor = 0
    for match in MARKUP.finditer(text):
        parts.append(phonemize(text[cursor : match.start()]) if text[cursor : match.start()].strip() else "")
        value = match.group(2)
        written = len(value) >= 2 and value[0] == "/" and value[-1] == "/"
        parts.append(value[1:-1].strip() if written else phonemize(match.group(1)))
        cursor = match.end()
    parts.append(phonemize(text[cursor:]) if text[cursor:].strip() else "")
    return " ".join(part for part in parts if part)


def _unsupported(language: str) -> UnsupportedLanguageError:
    return UnsupportedLanguageError(f"no G2P for language {language!r}; the languages are {', '.join(LANGUAGES)}")


def split_phonemes(phonemes: str, limit: int = MAX_PHONEMES) -> list[str]:
    """Cut a phoneme string into pieces of at most `limit`, preferring punctuation, then spaces.

    A piece ends right after the best break character found in its window, so nothing is lost:
    "".join(pieces) == phonemes (apart from whitespace stripped at the cuts).
    """
    pieces: list[str] = []
    rest = phonemes.strip()
    while len(rest) > limit:
        window = rest[:limit]
        cut = 0
        for breaks in _BREAK_CLASSES:
            cut = max(window.rfind(char) for char in breaks) + 1
            if cut > 0:
                break
        if cut <= 0:  # one unbroken run longer than the limit: a hard cut is all that is left
            cut = limit
        pieces.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    if rest:
        pieces.append(rest)
    return [piece for piece in pieces if piece]

"""Pronunciation control without the model: the lexicon's wire rules and bounds, its rewrite
into Kokoro's inline markup, phoneme checks against a vocabulary, phoneme input's words and
sentences, markup for G2Ps without it, and normalization leaving markup alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from voicestream.cli import main
from voicestream.engine.base import check_text
from voicestream.engine.text.agent_text import normalize_agent_text
from voicestream.engine.text.g2p import spliced_markup
from voicestream.engine.text.options import TextOptions
from voicestream.engine.text.pronunciation import (
    InvalidPhonemesError,
    apply_lexicon,
    check_phonemes,
    check_request,
    phoneme_input,
    respellings_used,
    split_phoneme_sentences,
)
from voicestream.wire.bidi import (
    Config,
    Limits,
    Synthesize,
    encode_client_message,
    parse_client_message,
    parse_invocation_request,
)
from voicestream.wire.errors import ErrorCode, ProtocolError
from voicestream.wire.openai_speech import (
    OpenAIRequestError,
    parse_openai_speech_request,
    parse_phonemize_request,
)
from voicestream.wire.pronunciation import (
    MAX_LEXICON_ENTRIES,
    merge_lexicons,
    parse_lexicon,
    parse_phonemes,
)

VOCAB = frozenset("ðəkˈOɹnWsAlɪzhˈɪ.,!? ʌmbɛ")


# --- the lexicon on the wire ------------------------------------------------------------------


def test_a_lexicon_keeps_its_entries_in_order() -> None:
    assert parse_lexicon({"Kokoro": "/kˈOkəɹO/", "Nguyen": "win", "don't": "dont"}) == (
        ("Kokoro", "/kˈOkəɹO/"),
        ("Nguyen", "win"),
        ("don't", "dont"),
    )
    assert parse_lexicon({"Jose\u0301": "hoseh"}) == (("Jos\u00e9", "hoseh"),)  # NFC, as the text is
    assert parse_lexicon(None) is None
    assert parse_lexicon({}) == ()


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (["Kokoro"], "lexicon must be an object"),
        ({f"w{n}": "x" for n in range(MAX_LEXICON_ENTRIES + 1)}, f"the limit is {MAX_LEXICON_ENTRIES}"),
        ({"w" * 65: "x"}, "at most 64 characters"),
        ({"two words": "x"}, "lexicon['two words']: a key must be one word"),
        ({"-dash": "x"}, "lexicon['-dash']"),
        ({"gif": 3}, "lexicon['gif'] must be a string"),
        ({"gif": "//"}, "lexicon['gif']: 1 to 128 phonemes"),
        ({"gif": "/" + "a" * 129 + "/"}, "got 129"),
        ({"gif": "/ʤɪ(f/"}, "symbol '(' at position 2"),
        ({"gif": "jif2"}, "lexicon['gif']: a respelling is 1 to 64 characters of letters"),
        ({"gif": "[jif]"}, "a respelling"),
        ({"gif": ""}, "a respelling"),
    ],
)
def test_a_bad_lexicon_is_a_coded_error_naming_the_field(value: Any, named: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_lexicon(value)
    assert caught.value.code == ErrorCode.INVALID_LEXICON
    assert named in caught.value.message


def test_a_request_entry_wins_over_the_sessions() -> None:
    session = (("gif", "/ɡˈɪf/"), ("SQL", "sequel"))
    assert merge_lexicons(session, (("gif", "/ʤˈɪf/"),)) == (("SQL", "sequel"), ("gif", "/ʤˈɪf/"))
    assert merge_lexicons(session, None) == session


# --- the messages and bodies -------------------------------------------------------------------


def test_synthesize_takes_a_lexicon_or_phonemes_instead_of_text() -> None:
    message = parse_client_message(json.dumps({"type": "synthesize", "text": "a gif", "lexicon": {"gif": "jif"}}))
    assert isinstance(message, Synthesize) and message.lexicon == (("gif", "jif"),) and not message.phonemes
    message = parse_client_message(json.dumps({"type": "synthesize", "phonemes": "ðə ʤˈɪf"}))
    assert isinstance(message, Synthesize) and (message.text, message.phonemes) == ("ðə ʤˈɪf", True)
    # What a client encodes is what the server reads: phonemes travel as "phonemes".
    assert json.loads(encode_client_message(message)) == {"type": "synthesize", "phonemes": "ðə ʤˈɪf"}
    assert parse_client_message(encode_client_message(message)) == message
    bare = parse_client_message('{"phonemes": "hˈI"}')  # like a bare {"text"}, no type needed
    assert isinstance(bare, Synthesize) and bare.phonemes


def test_config_sets_the_sessions_lexicon() -> None:
    message = parse_client_message(json.dumps({"type": "config", "lexicon": {"SQL": "sequel"}}))
    assert isinstance(message, Config) and message.lexicon == (("SQL", "sequel"),)
    assert json.loads(encode_client_message(message)) == {"type": "config", "lexicon": {"SQL": "sequel"}}


@pytest.mark.parametrize(
    ("body", "code", "named"),
    [
        ({"text": "hi", "phonemes": "hˈI"}, ErrorCode.INVALID_REQUEST, 'give "text" or "phonemes"'),
        ({"phonemes": 3}, ErrorCode.INVALID_PHONEMES, "phonemes must be a string"),
        ({"phonemes": "  "}, ErrorCode.EMPTY_TEXT, "phonemes is empty"),
        ({"phonemes": "a" * 11}, ErrorCode.TEXT_TOO_COMPLEX, "the symbol at position 10 is the first over"),
        ({"text": "hi", "lexicon": {"a b": "x"}}, ErrorCode.INVALID_LEXICON, "lexicon['a b']"),
    ],
)
def test_bad_pronunciation_fields_are_coded_on_every_route(body: dict[str, Any], code: str, named: str) -> None:
    limits = Limits(max_phonemes=10)
    for parse in (parse_client_message, parse_invocation_request):
        with pytest.raises(ProtocolError) as caught:
            parse(
                json.dumps({"request_id": "r1", **body}) if parse is parse_client_message else json.dumps(body), limits
            )
        assert (caught.value.code, named in caught.value.message) == (code, True), caught.value.message
    assert parse_phonemes("hˈI", 10) == "hˈI"


def test_invocations_take_a_lexicon_and_phonemes() -> None:
    request = parse_invocation_request(json.dumps({"phonemes": "hˈI", "lexicon": {"gif": "jif"}}))
    assert (request.text, request.phonemes, request.lexicon) == ("hˈI", True, (("gif", "jif"),))


def test_openai_speech_takes_a_lexicon_as_an_extra_body_field() -> None:
    body = {"model": "kokoro", "voice": "af_heart", "input": "a gif"}
    assert parse_openai_speech_request(json.dumps({**body, "lexicon": {"gif": "jif"}})).lexicon == (("gif", "jif"),)
    with pytest.raises(OpenAIRequestError) as caught:
        parse_openai_speech_request(json.dumps({**body, "lexicon": {"gif": 1}}))
    assert (caught.value.code, caught.value.param) == (ErrorCode.INVALID_LEXICON, "lexicon")


def test_the_phonemize_body() -> None:
    request = parse_phonemize_request(json.dumps({"input": "a gif", "voice": "af_heart", "lexicon": {"gif": "jif"}}))
    assert (request.input, request.voice, request.lexicon) == ("a gif", "af_heart", (("gif", "jif"),))
    for body, param in [({"voice": "af_heart"}, "input"), ({"input": "x"}, "voice"), ({"input": "x", "v": 1}, "v")]:
        with pytest.raises(OpenAIRequestError) as caught:
            parse_phonemize_request(json.dumps(body))
        assert caught.value.param == param


# --- the rewrite into inline markup -------------------------------------------------------------


def test_a_lowercase_key_matches_any_case_and_a_capital_one_only_its_own() -> None:
    lexicon = (("kokoro", "/kˈOkəɹO/"), ("US", "/jˌuˈɛs/"))
    assert apply_lexicon("Kokoro, KOKORO and kokoro.", lexicon, {}) == (
        "[Kokoro](/kˈOkəɹO/), [KOKORO](/kˈOkəɹO/) and [kokoro](/kˈOkəɹO/)."
    )
    assert apply_lexicon("The US and us.", lexicon, {}) == "The [US](/jˌuˈɛs/) and us."


def test_the_exact_spelling_wins_over_a_lowercase_key() -> None:
    lexicon = (("polish", "/pˈɑlɪʃ/"), ("Polish", "/pˈOlɪʃ/"))
    assert apply_lexicon("Polish polish", lexicon, {}) == "[Polish](/pˈOlɪʃ/) [polish](/pˈɑlɪʃ/)"


def test_only_whole_words_match_whatever_the_punctuation_around_them() -> None:
    lexicon = (("gif", "/ʤˈɪf/"),)
    assert apply_lexicon("gifs, gift, (gif) 'gif' gif-based gif's gif!", lexicon, {}) == (
        "gifs, gift, ([gif](/ʤˈɪf/)) '[gif](/ʤˈɪf/)' [gif](/ʤˈɪf/)-based gif's [gif](/ʤˈɪf/)!"
    )
    assert apply_lexicon("don't dont", (("don't", "/dˈOnt/"),), {}) == "[don't](/dˈOnt/) dont"


def test_markup_already_in_the_text_is_left_alone() -> None:
    lexicon = (("gif", "/ʤˈɪf/"),)
    assert apply_lexicon("[gif](/ɡˈɪf/) or gif", lexicon, {}) == "[gif](/ɡˈɪf/) or [gif](/ʤˈɪf/)"


def test_a_respelling_is_said_as_the_g2p_reads_it() -> None:
    lexicon = (("Nguyen", "win"), ("gif", "/ʤˈɪf/"))
    assert respellings_used("Mr Nguyen sent a gif. [Nguyen](/x/)", lexicon) == {"win"}
    assert respellings_used("nothing here", lexicon) == set()
    assert apply_lexicon("Mr Nguyen.", lexicon, {"win": "wˈɪn"}) == "Mr [Nguyen](/wˈɪn/)."
    assert apply_lexicon("Mr Nguyen.", lexicon, {}) == "Mr Nguyen."  # no phonemes: the word as it is


# --- phonemes a client writes ---------------------------------------------------------------------


def test_a_symbol_outside_the_vocabulary_is_named_with_its_position() -> None:
    check_phonemes("ðə kˈOkəɹO", VOCAB, "phonemes")  # spaces are always fine
    with pytest.raises(InvalidPhonemesError) as caught:
        check_phonemes("ðə kˈOXəɹO", VOCAB, "phonemes")
    assert caught.value.code == ErrorCode.INVALID_PHONEMES
    assert "symbol 'X' (U+0058 LATIN CAPITAL LETTER X) at position 6" in caught.value.message


@pytest.mark.parametrize(
    ("text", "options", "named"),
    [
        ("a [gif](/ʤˈɪf/) b", TextOptions(), "inline markup '[gif](/ʤˈɪf/)' at position 2: symbol 'ʤ'"),
        ("a gif", TextOptions(lexicon=(("gif", "/ʤˈɪf/"),)), "lexicon['gif']: symbol 'ʤ' (U+02A4"),
        ("ðə ʤˈɪf", TextOptions(phonemes=True), "phonemes: symbol 'ʤ' (U+02A4 LATIN SMALL LETTER DEZH DIGRAPH) at"),
    ],
)
def test_each_way_of_writing_phonemes_is_checked(text: str, options: TextOptions, named: str) -> None:
    with pytest.raises(InvalidPhonemesError) as caught:
        check_request(text, options, VOCAB)
    assert named in caught.value.message
    check_request(text, options, frozenset())  # an engine without a vocabulary checks nothing
    check_request(text, options, VOCAB | {"ʤ", "f"})


def test_phoneme_input_words_are_its_groups_without_punctuation() -> None:
    spoken = phoneme_input("  ðə kˈOkəɹO, ... nˈW!  ")
    assert spoken.text == "ðə kˈOkəɹO, ... nˈW!"
    assert [(w.text, spoken.text[w.start : w.end]) for w in spoken.words] == [
        ("ðə", "ðə"),
        ("kˈOkəɹO", "kˈOkəɹO"),
        ("nˈW", "nˈW"),
    ]
    assert split_phoneme_sentences(" hˈI. hˌW ɑɹ ju? ˈOkA… bˈI ") == ["hˈI.", "hˌW ɑɹ ju?", "ˈOkA…", "bˈI"]


def test_espeak_languages_say_markup_as_written() -> None:
    calls: list[str] = []

    def phonemize(part: str) -> str:
        calls.append(part)
        return part.strip().upper()

    assert spliced_markup("hola [Kokoro](/kˈOkəɹO/) amigo [dos](2).", phonemize) == "HOLA kˈOkəɹO AMIGO DOS ."
    assert calls == ["hola ", " amigo ", "dos", "."]
    assert spliced_markup("[x](/ks/)", phonemize) == "ks"


@pytest.mark.parametrize(
    "text",
    ["Say [Kokoro](/kˈOkəɹO/) now.", "A [gif](/ʤˈɪf/)!!", "[SQL](/sˈikwəl/), [x](/ɛks ˈɛks/)"],
)
def test_normalization_leaves_inline_markup_alone(text: str) -> None:
    assert check_text(text) == text
    assert normalize_agent_text(text).text == text  # agent text reads links as their text, not this
    assert check_text(f"  {text}  ", TextOptions(phonemes=True)) == text


def test_cli_say_refuses_a_bad_lexicon_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lexicon = tmp_path / "lexicon.json"
    lexicon.write_text(json.dumps({"two words": "x"}), encoding="utf-8")
    text = "Please bring the blorptang tomorrow."
    assert main(["say", "--lexicon", str(lexicon), "-o", str(tmp_path / "x.wav"), text]) == 2
    assert f"--lexicon {lexicon}['two words']: a key must be one word" in capsys.readouterr().err

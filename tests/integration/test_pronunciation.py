"""Pronunciation control with the real model, on every route: a lexicon (phonemes or a
respelling), Kokoro's inline markup and phoneme input each change what is said, checked by
the phonemes the front end makes AND by ear (Whisper hears a made-up word as the real word the
lexicon says it is); POST /v1/audio/phonemize round-trips; bad phonemes are coded errors."""

from __future__ import annotations

import json
import wave
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import httpx
import openai
import pytest
from websockets.asyncio.client import connect

from tests.support.server import LiveServer
from tests.support.session_client import collect, next_frame, send_json
from voicestream.cli import main
from voicestream.engine.text.options import TextOptions

if TYPE_CHECKING:
    from voicestream.engine.onnx.engine import OnnxEngine

# "blorptang" is no word: misaki spells it out of its letters, and Whisper hears anything but
# "umbrella". Said as "umbrella", the sentence is an ordinary one.
TEXT = "Please bring the blorptang tomorrow."
SAID = "Please bring the umbrella tomorrow."
UMBRELLA = "/ˌʌmbɹˈɛlə/"  # misaki's phonemes of "umbrella" (checked below)
RESPELLED = {"blorptang": "umbrella"}
WRITTEN = {"blorptang": UMBRELLA}
MARKUP = f"Please bring the [blorptang]({UMBRELLA}) tomorrow."
MAX_WER = 0.2


def heard(asr: ModuleType, audio: Any, sample_rate: int = 24_000) -> str:
    return str(asr.transcribe(audio, sample_rate))


def said_right(asr: ModuleType, audio: Any) -> None:
    text = heard(asr, audio)
    assert asr.word_error_rate(SAID, text) <= MAX_WER, text


# --- the engine (the front end both engines share) ------------------------------------------------


def test_umbrella_is_what_the_lexicon_says(engine: OnnxEngine) -> None:
    assert engine.phonemes("umbrella", "af_heart") == [UMBRELLA.strip("/")]


def test_without_pronunciation_control_the_made_up_word_is_not_heard_as_umbrella(
    engine: OnnxEngine, asr: ModuleType
) -> None:
    assert UMBRELLA.strip("/") not in engine.phonemes(TEXT, "af_heart")[0]
    audio = b"".join(chunk.samples.tobytes() for chunk in engine.synthesize(TEXT))
    import numpy as np

    assert "umbrella" not in heard(asr, np.frombuffer(audio, dtype=np.float32)).lower()


@pytest.mark.parametrize(
    ("text", "options"),
    [
        (TEXT, TextOptions(lexicon=tuple(RESPELLED.items()))),
        (TEXT, TextOptions(lexicon=tuple(WRITTEN.items()))),
        (TEXT.replace("blorptang", "BLORPTANG"), TextOptions(lexicon=tuple(WRITTEN.items()))),
        (MARKUP, TextOptions()),
    ],
    ids=["respelling", "phonemes", "any-case", "inline-markup"],
)
def test_lexicon_and_markup_change_what_is_said_and_the_word_keeps_its_name(
    engine: OnnxEngine, asr: ModuleType, text: str, options: TextOptions
) -> None:
    import numpy as np

    [phonemes] = engine.phonemes(text, "af_heart", options)
    assert phonemes == engine.phonemes(SAID, "af_heart")[0]
    chunks = list(engine.synthesize(text, text_options=options))
    # Word timings name the word of the text, not the one it is said as.
    assert [word.word.strip(".") for chunk in chunks for word in chunk.words] == (
        text.replace(f"[blorptang]({UMBRELLA})", "blorptang").rstrip(".").split()
    )
    said_right(asr, np.concatenate([chunk.samples for chunk in chunks]))


def test_phoneme_input_says_what_phonemize_gave_and_times_its_groups(engine: OnnxEngine, asr: ModuleType) -> None:
    import numpy as np

    [phonemes] = engine.phonemize([TEXT], "af_heart", TextOptions(lexicon=tuple(RESPELLED.items())))
    as_input = TextOptions(phonemes=True)
    assert engine.phonemes(phonemes, "af_heart", as_input) == engine.phonemes(SAID, "af_heart")  # round trip
    chunks = list(engine.synthesize(phonemes, text_options=as_input))
    assert [word.word for chunk in chunks for word in chunk.words] == phonemes.rstrip(".").split()
    said_right(asr, np.concatenate([chunk.samples for chunk in chunks]))


def test_espeak_languages_say_markup_and_lexicon_as_written(engine: OnnxEngine) -> None:
    """espeak would read the brackets and slashes aloud; the front end splices the phonemes in."""
    plain = engine.phonemes("Hola amigo.", "ef_dora")[0]
    assert plain.startswith("ˈola ") and plain.endswith(" amˈiɣo.")
    said = engine.phonemes("Hola [Kokoro](/kˈOkəɹO/) amigo.", "ef_dora")
    assert said == [plain.replace(" amˈiɣo", " kˈOkəɹO amˈiɣo")]
    lexicon = TextOptions(lexicon=(("Kokoro", "/kˈOkəɹO/"),))
    assert engine.phonemes("Hola Kokoro amigo.", "ef_dora", lexicon) == said


# --- the routes -----------------------------------------------------------------------------------


async def test_bidi_session_lexicon_per_session_and_per_request(kokoro_server: LiveServer, asr: ModuleType) -> None:
    async with connect(kokoro_server.ws_url) as ws:
        await send_json(ws, {"type": "config", "lexicon": {"blorptang": "/ɡˈɑɹbɪʤ/"}})
        await send_json(ws, {"type": "synthesize", "text": TEXT, "request_id": "session", "words": True})
        await send_json(ws, {"text": TEXT, "request_id": "request", "lexicon": RESPELLED})  # the request's wins
        await send_json(ws, {"phonemes": (await _phonemize(kokoro_server, SAID)), "request_id": "phonemes"})
        results, others = await collect(ws, 3)
    assert [result.end and result.end["type"] for result in results] == ["synthesis_complete"] * 3
    assert "garbage" in heard(asr, bytes(results[0].audio)).lower()
    said_right(asr, bytes(results[1].audio))
    said_right(asr, bytes(results[2].audio))
    words = [word["word"] for message in others if message["type"] == "words" for word in message["words"]]
    assert [word.strip(".") for word in words] == TEXT.rstrip(".").split()  # the text's words, not "garbage"


async def test_bidi_session_refuses_bad_phonemes_naming_the_symbol(kokoro_server: LiveServer) -> None:
    async with connect(kokoro_server.ws_url) as ws:
        await send_json(ws, {"phonemes": "hˈɛlO wˈɜɹld§", "request_id": "bad"})
        error = (await next_frame(ws)).control
        await send_json(ws, {"type": "config", "lexicon": {"x": "/ks§/"}})
        config_error = (await next_frame(ws)).control
    assert error is not None and (error["code"], error["request_id"]) == ("invalid_phonemes", "bad")
    assert "symbol '§' (U+00A7 SECTION SIGN) at position 12" in error["message"]
    assert config_error is not None and config_error["code"] == "invalid_phonemes"
    assert "lexicon['x']: symbol '§'" in config_error["message"]


@pytest.mark.parametrize(
    "body", [{"text": TEXT, "lexicon": WRITTEN}, {"text": MARKUP}, {"phonemes": "plˈiz bɹˈɪŋ ði ˌʌmbɹˈɛlə təmˈɑɹO."}]
)
def test_invocations(kokoro_server: LiveServer, asr: ModuleType, body: dict[str, Any]) -> None:
    response = httpx.post(f"{kokoro_server.http_url}/invocations", json=body, timeout=120)
    assert response.status_code == 200, response.text
    said_right(asr, response.content)


def test_openai_sdk_with_a_lexicon_as_an_extra_body_field(kokoro_server: LiveServer, asr: ModuleType) -> None:
    with openai.OpenAI(base_url=f"{kokoro_server.http_url}/v1", api_key="unused", max_retries=0) as client:
        response = client.audio.speech.create(
            model="kokoro", voice="af_heart", input=TEXT, response_format="pcm", extra_body={"lexicon": RESPELLED}
        )
    said_right(asr, response.content)


def test_phonemize_round_trips(kokoro_server: LiveServer, asr: ModuleType, engine: OnnxEngine) -> None:
    text = f"{TEXT} It may rain."
    body = {"input": text, "voice": "af_heart", "lexicon": RESPELLED}
    response = httpx.post(f"{kokoro_server.http_url}/v1/audio/phonemize", json=body, timeout=60)
    assert response.status_code == 200, response.text
    phonemes = response.json()["phonemes"]
    said = [piece for sentence in (SAID, "It may rain.") for piece in engine.phonemes(sentence, "af_heart")]
    assert phonemes == " ".join(said)
    spoken = httpx.post(f"{kokoro_server.http_url}/invocations", json={"phonemes": phonemes}, timeout=120)
    assert asr.word_error_rate(f"{SAID} It may rain.", heard(asr, spoken.content)) <= MAX_WER


def test_phonemize_through_sagemakers_invocations_route(kokoro_server: LiveServer) -> None:
    """SageMaker reaches only /invocations: CustomAttributes route it (as for /v1/audio/speech)."""
    body = {"input": SAID, "voice": "af_heart"}
    direct = httpx.post(f"{kokoro_server.http_url}/v1/audio/phonemize", json=body, timeout=60)
    headers = {"X-Amzn-SageMaker-Custom-Attributes": "trace=1, route=/v1/audio/phonemize"}
    routed = httpx.post(f"{kokoro_server.http_url}/invocations", json=body, headers=headers, timeout=60)
    assert routed.status_code == direct.status_code == 200
    assert routed.json() == direct.json()


@pytest.mark.parametrize(
    ("path", "body", "code", "param", "named"),
    [
        (
            "/invocations",
            {"phonemes": "hˈɛlO§"},
            "invalid_phonemes",
            None,
            "symbol '§' (U+00A7 SECTION SIGN) at position 5",
        ),
        ("/invocations", {"text": "a [b](/b§/)"}, "invalid_phonemes", None, "inline markup '[b](/b§/)' at position 2"),
        ("/invocations", {"text": "hi", "lexicon": {"hi": 1}}, "invalid_lexicon", None, "lexicon['hi']"),
        ("/invocations", {"phonemes": "ə" * 5001}, "text_too_complex", None, "at most 5000"),
        ("/v1/audio/speech", {"input": "hi", "lexicon": {"hi": "/h§/"}}, "invalid_phonemes", "lexicon", "symbol '§'"),
        ("/v1/audio/speech", {"input": "[hi](/h§/)"}, "invalid_phonemes", "input", "symbol '§'"),
        ("/v1/audio/phonemize", {"input": "hi", "lexicon": {"hi": "/h§/"}}, "invalid_phonemes", "lexicon", "'§'"),
        ("/v1/audio/phonemize", {"input": "hi " * 700}, "text_too_long", "input", "the limit is 2000"),
        ("/v1/audio/phonemize", {"input": "9" * 1999}, "text_too_complex", "input", "at most 5000"),
    ],
)
def test_bad_pronunciation_is_a_coded_400(
    kokoro_server: LiveServer, path: str, body: dict[str, Any], code: str, param: str | None, named: str
) -> None:
    if path.startswith("/v1"):
        body = {"model": "kokoro", "voice": "af_heart", **body} if "speech" in path else {"voice": "af_heart", **body}
    response = httpx.post(f"{kokoro_server.http_url}{path}", json=body, timeout=60)
    assert response.status_code in (400, 413), response.text
    error = response.json()["error"] if path.startswith("/v1") else response.json()
    assert (error["code"], error.get("param", None)) == (code, param)
    assert named in error["message"]


async def _phonemize(server: LiveServer, text: str) -> str:
    async with httpx.AsyncClient() as client:
        response = await client.post(
            f"{server.http_url}/v1/audio/phonemize", json={"input": text, "voice": "af_heart"}, timeout=60
        )
    phonemes: str = response.json()["phonemes"]
    return phonemes


# --- the CLI --------------------------------------------------------------------------------------


def test_cli_say_through_a_server_with_a_lexicon_file(
    kokoro_server: LiveServer, asr: ModuleType, tmp_path: Path
) -> None:
    lexicon = tmp_path / "lexicon.json"
    lexicon.write_text(json.dumps(RESPELLED), encoding="utf-8")
    out = tmp_path / "said.wav"
    arguments = ["say", "--upstream", "kokoro", "--url", kokoro_server.http_url, "--lexicon", str(lexicon)]
    assert main([*arguments, "-o", str(out), TEXT]) == 0
    with wave.open(str(out)) as wav:
        said_right(asr, wav.readframes(wav.getnframes()))


@pytest.mark.model  # `say` loads the real model in this process, not through a fixture
def test_cli_say_phonemes_in_process(asr: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "said.wav"
    assert main(["say", "--phonemes", "-o", str(out), "plˈiz bɹˈɪŋ ði ˌʌmbɹˈɛlə təmˈɑɹO."]) == 0
    with wave.open(str(out)) as wav:
        said_right(asr, wav.readframes(wav.getnframes()))

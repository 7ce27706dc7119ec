"""One voice and one short reply per Kokoro language, written with that language's punctuation:
what the language gate (tests/integration/test_languages.py) and benchmarks/languages.py speak
and hear back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from voicestream.speech import Audio, BidiSession, RequestCompleted
from voicestream.wire.bidi import Flushed
from voicestream.wire.errors import ErrorMessage


@dataclass(frozen=True, slots=True)
class LanguageCase:
    language: str  # voicestream's G2P language (wire/voices.py)
    voice: str
    whisper: str  # Whisper's language code
    text: str
    pieces: int  # what the session's chunker cuts `text` into (fast first clause, then sentences)
    # CER where words are not written apart (Japanese, Chinese); Hindi: CER in Urdu letters, the
    # script Whisper writes spoken Hindi in (tests/support/asr.py, hindustani_character_error_rate)
    metric: Literal["wer", "cer", "cer-urdu"]


CASES: tuple[LanguageCase, ...] = (
    LanguageCase(
        "en-us",
        "af_heart",
        "en",
        "Thanks for calling, your table is booked for this evening. See you tonight!",
        3,
        "wer",
    ),
    LanguageCase("en-gb", "bf_emma", "en", "Good morning. The train to London leaves at half past nine.", 2, "wer"),
    LanguageCase(
        "es",
        "ef_dora",
        "es",
        "¡Buenos días! ¿Quiere una mesa para dos personas? Tenemos sitio junto a la ventana.",
        3,
        "wer",
    ),
    LanguageCase(
        "fr-fr",
        "ff_siwis",
        "fr",
        "Bonjour ! Votre table est réservée pour ce soir. Nous vous attendons avec plaisir.",
        3,
        "wer",
    ),
    LanguageCase("hi", "hf_alpha", "hi", "नमस्ते, आप कैसे हैं? मैं आज बाज़ार जा रहा हूँ।", 2, "cer-urdu"),
    LanguageCase(
        "it", "if_sara", "it", "Buongiorno! Vorrei prenotare un tavolo per due persone. Grazie mille.", 3, "wer"
    ),
    LanguageCase(
        "pt-br", "pf_dora", "pt", "Bom dia! Você gostaria de reservar uma mesa? Temos lugar perto da janela.", 3, "wer"
    ),
    LanguageCase("ja", "jf_alpha", "ja", "こんにちは。今日はとてもいい天気ですね、散歩に行きましょう！", 2, "cer"),
    LanguageCase("cmn", "zf_xiaobei", "zh", "你好。今天天气很好，我们去公园散步吧！", 2, "cer"),
)

# benchmarks/languages.py: the gate's reply and two more sentences per language.
MORE_TEXTS: dict[str, tuple[str, ...]] = {
    "en-us": ("Your package will arrive on Tuesday morning.", "Would you like me to send a reminder?"),
    "en-gb": ("Please mind the gap between the train and the platform.", "The shop closes early this evening."),
    "es": ("El pedido llegará el martes por la mañana.", "¿Le envío un recordatorio por correo?"),
    "fr-fr": ("Votre colis arrivera mardi matin.", "Voulez-vous que je vous envoie un rappel ?"),
    "hi": ("आपका पैकेट मंगलवार सुबह पहुँचेगा।", "क्या मैं आपको एक संदेश भेजूँ?"),
    "it": ("Il suo pacco arriverà martedì mattina.", "Vuole che le mandi un promemoria?"),
    "pt-br": ("Sua encomenda chegará na terça-feira de manhã.", "Quer que eu envie um lembrete?"),
    "ja": ("お荷物は火曜日の朝に届きます。", "リマインダーをお送りしましょうか？"),
    "cmn": ("您的包裹将在星期二上午送达。", "需要我给您发一个提醒吗？"),
}

# Urdu script drops short vowels, so the Hindi gate also pins the exact phonemes of its text.
HINDI_PHONEMES = "nəmˈʌsteː, ˌaːp kˈɛːseː hɛ\u0303? mɛ\u0303 ˈaːɟ baːzˈaːɾ ɟˈaː ɾˌəhaː hu\u0303"  # combining tildes


async def stream_reply(ws_url: str, voice: str, text: str) -> tuple[bytes, tuple[str, ...]]:
    """`text` streamed into a bidi session four characters at a time, as an LLM writes it, then
    flushed: (the audio of every request the chunker cut, those requests' ids). A request that
    ends in an error fails the caller at once, naming it."""
    audio = bytearray()
    async with BidiSession.websocket(ws_url, silence_timeout=120) as session:
        await session.configure(voice=voice)
        for start in range(0, len(text), 4):
            await session.append(text[start : start + 4], request_id="reply")
        await session.flush()
        flushed: Flushed | None = None
        done: set[str] = set()
        errors: list[str] = []
        async for event in session.events():
            if isinstance(event, Audio):
                audio += event.data
            elif isinstance(event, Flushed):
                flushed = event
            elif isinstance(event, RequestCompleted):
                done.add(event.request_id)
            elif isinstance(event, ErrorMessage) and event.request_id is not None:
                errors.append(f"{event.code}: {event.message}")
                done.add(event.request_id)
            if flushed is not None and done >= set(flushed.request_ids):
                break
    assert flushed is not None
    assert not errors, errors
    return bytes(audio), flushed.request_ids

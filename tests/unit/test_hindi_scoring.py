"""The Hindi ASR measure (tests/support/asr.py): Whisper base writes spoken Hindi in Urdu
script, so the Devanagari text is written in Urdu letters too and the two compared letter by
letter. Transcripts here are Whisper base's own, of Kokoro's hf_alpha (benchmarks/results/languages.json)."""

from __future__ import annotations

from tests.support.asr import error_rate, hindustani_character_error_rate

TEXT = "नमस्ते, आप कैसे हैं? मैं आज बाज़ार जा रहा हूँ।"


def test_the_same_words_in_urdu_script_score_zero() -> None:
    # Whisper joins جارہا and ends نمستی with ی where Urdu spelling has ے: neither is an error.
    assert hindustani_character_error_rate(TEXT, "نمستی آپ کیسے ہیں میں آج بازار جارہا ہوں") == 0.0


def test_a_devanagari_transcript_is_compared_in_the_same_letters() -> None:
    assert hindustani_character_error_rate(TEXT, TEXT) == 0.0


def test_a_misheard_consonant_or_long_vowel_counts() -> None:
    # भेजूँ "bhejūṅ" heard as پہجو "pahju": three of its letters wrong or missing.
    assert hindustani_character_error_rate("क्या मैं आपको एक संदेश भेजूँ?", "کیا میں آپ کو ایک سندیش پہجو") > 0.1
    assert hindustani_character_error_rate(TEXT, "نمستی آپ کیسے ہیں میں کل بازار جارہا ہوں") > 0.0  # آج -> کل


def test_words_in_another_script_are_all_wrong() -> None:
    """A transcript in Latin letters shares no letter with Urdu script: it cannot pass."""
    assert hindustani_character_error_rate(TEXT, "namaste aap kaise hain main aaj bazaar ja raha hoon") >= 1.0


def test_hindi_is_scored_by_it_and_the_others_as_before() -> None:
    assert error_rate("cer-urdu", TEXT, "نمستی آپ کیسے ہیں میں آج بازار جارہا ہوں") == 0.0
    assert error_rate("wer", "Good morning.", "good morning") == 0.0
    assert error_rate("cer", "你好。", "你好") == 0.0

"""The chunker on the punctuation of Kokoro's nine languages: sentence cuts and the fast first
clause, one table per concern, each row checked whole and fed one character at a time."""

from __future__ import annotations

import pytest

from voicestream.chunker import FIRST_CLAUSE_MIN_WORDS, SentenceChunker, split_sentences


def streamed(text: str, first_clause_min_words: int | None) -> list[str]:
    """The pieces when `text` arrives one character at a time (as an LLM's tokens may)."""
    chunker = SentenceChunker(first_clause_min_words=first_clause_min_words)
    pieces = [piece for ch in text for piece in chunker.feed(ch)]
    if (rest := chunker.flush()) is not None:
        pieces.append(rest)
    return pieces


# (language, text, the sentences it is cut into)
SENTENCES = [
    ("en-us", "It's ready. Shall we go? Yes!", ["It's ready.", "Shall we go?", "Yes!"]),
    ("en-gb", "Cheers, mate. See you at half six.", ["Cheers, mate.", "See you at half six."]),
    ("es", "¿Dónde está el tren? ¡Allí! Vamos.", ["¿Dónde está el tren?", "¡Allí!", "Vamos."]),
    ("es", "Hola. ¿qué tal? ¡vale!", ["Hola.", "¿qué tal?", "¡vale!"]),  # ¿ ¡ open, lower case or not
    ("es", "Vinieron todos, etc. ¿Y tú?", ["Vinieron todos, etc.", "¿Y tú?"]),
    ("es", "Pues bien, ¿vienes o no?", ["Pues bien, ¿vienes o no?"]),
    ("fr-fr", "Bonjour ! Comment ça va ? Très bien.", ["Bonjour !", "Comment ça va ?", "Très bien."]),
    ("fr-fr", "Il a dit : « Oui ! » Puis il est parti.", ["Il a dit : « Oui ! »", "Puis il est parti."]),
    ("fr-fr", "« C'est fini\u00a0? »\u00a0Elle rit.", ["« C'est fini\u00a0? »", "Elle rit."]),  # no-break spaces
    ("fr-fr", "« Déjà ? »\u202fOui.", ["« Déjà ? »", "Oui."]),
    ("fr-fr", "Attention ; il pleut ! Prenez un parapluie.", ["Attention ; il pleut !", "Prenez un parapluie."]),
    ("hi", "नमस्ते, आप कैसे हैं? मैं ठीक हूँ। धन्यवाद।", ["नमस्ते, आप कैसे हैं?", "मैं ठीक हूँ।", "धन्यवाद।"]),
    ("hi", "राम आया॥ सीता आई।", ["राम आया॥", "सीता आई।"]),
    ("it", "Buongiorno! Come sta? Bene, grazie.", ["Buongiorno!", "Come sta?", "Bene, grazie."]),
    ("pt-br", "Olá! Tudo bem? Sim… E você?", ["Olá!", "Tudo bem?", "Sim…", "E você?"]),
    ("ja", "こんにちは。元気ですか？はい！", ["こんにちは。", "元気ですか？", "はい！"]),
    ("ja", "「はい。」と彼は言った。次です。", ["「はい。」と彼は言った。", "次です。"]),
    ("ja", "「行こう！」『うん。』また明日。", ["「行こう！」", "『うん。』", "また明日。"]),
    ("ja", "ええと……そうですね。", ["ええと……", "そうですね。"]),
    ("cmn", "你好。今天天气很好！我们去吗？去吧。", ["你好。", "今天天气很好！", "我们去吗？", "去吧。"]),
    ("cmn", "“你好。”他说。价格是3.5元。", ["“你好。”", "他说。", "价格是3.5元。"]),
    ("cmn", "好的，我知道了；谢谢：再见", ["好的，我知道了；谢谢：再见"]),  # clause marks only: one piece
]


@pytest.mark.parametrize(
    ("language", "text", "sentences"), SENTENCES, ids=[f"{row[0]}-{i}" for i, row in enumerate(SENTENCES)]
)
def test_sentences_are_cut_at_each_languages_enders(language: str, text: str, sentences: list[str]) -> None:
    assert split_sentences(text) == sentences
    assert streamed(text, None) == sentences


# (language, text, the pieces with the default fast first clause)
FIRST_CLAUSES = [
    ("en-us", "Thanks for holding, your order shipped.", ["Thanks for holding,", "your order shipped."]),
    ("es", "Muchas gracias por esperar, su pedido salió.", ["Muchas gracias por esperar,", "su pedido salió."]),
    ("es", "Hola, ¿cómo está usted hoy?", ["Hola, ¿cómo está usted hoy?"]),  # one word: too short a clause
    (
        "fr-fr",
        "Merci de patienter : votre commande est partie.",
        ["Merci de patienter :", "votre commande est partie."],
    ),
    ("fr-fr", "Bon, on y va ?", ["Bon, on y va ?"]),
    ("hi", "आपका बहुत धन्यवाद, आपका ऑर्डर भेज दिया गया है।", ["आपका बहुत धन्यवाद,", "आपका ऑर्डर भेज दिया गया है।"]),
    (
        "it",
        "Grazie mille per l'attesa, il suo ordine è partito.",
        ["Grazie mille per l'attesa,", "il suo ordine è partito."],
    ),
    ("pt-br", "Obrigado por esperar, seu pedido foi enviado.", ["Obrigado por esperar,", "seu pedido foi enviado."]),
    ("ja", "お待たせしました、ご注文の品を発送しました。", ["お待たせしました、", "ご注文の品を発送しました。"]),
    ("ja", "はい、わかりました。", ["はい、わかりました。"]),  # two characters: too short a clause
    ("cmn", "感谢您的耐心等待，您的订单已发货。", ["感谢您的耐心等待，", "您的订单已发货。"]),
    ("cmn", "好的，没问题。", ["好的，没问题。"]),
    # Only the reply's first piece may be a clause: later ones run to their enders.
    ("cmn", "你好。谢谢你们的耐心，订单已发货。", ["你好。", "谢谢你们的耐心，订单已发货。"]),
]


@pytest.mark.parametrize(
    ("language", "text", "pieces"), FIRST_CLAUSES, ids=[f"{row[0]}-{i}" for i, row in enumerate(FIRST_CLAUSES)]
)
def test_the_fast_first_clause_ends_at_each_languages_clause_marks(language: str, text: str, pieces: list[str]) -> None:
    assert split_sentences(text, first_clause_min_words=FIRST_CLAUSE_MIN_WORDS) == pieces
    assert streamed(text, FIRST_CLAUSE_MIN_WORDS) == pieces

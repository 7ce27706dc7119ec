"""The torch engine end to end: the real kokoro KModel + KPipeline code on random weights."""

from __future__ import annotations

import re
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from voicestream.engine import create_engine
from voicestream.engine.base import AudioChunk, EngineError, UnknownVoiceError
from voicestream.engine.models.assets import AssetError, sha256_of
from voicestream.engine.models.checkpoint_digest import write_source
from voicestream.engine.models.torch_assets import CHECKPOINT_FILE, CONFIG_FILE, load_voice_tensor
from voicestream.engine.torch.engine import TorchEngine
from voicestream.wire.bidi import SAMPLE_RATE
from voicestream.wire.voices import OFFICIAL_VOICES

US_TEXT = "The quick brown fox jumps over the lazy dog."
GB_TEXT = "I can't go to the party tomorrow, sadly."
WORDS_PER_SECOND = 2.5  # conversational speech


def words_of(text: str) -> list[str]:
    return re.findall(r"[\w']+", text)


def check_speech(chunks: list[AudioChunk], text: str) -> np.ndarray:
    """Float32 24 kHz mono audio of a plausible length for `text`; returns it joined."""
    assert chunks, "no audio"
    for chunk in chunks:
        assert chunk.samples.dtype == np.float32
        assert chunk.samples.ndim == 1
    audio = np.concatenate([chunk.samples for chunk in chunks])
    assert np.isfinite(audio).all()
    assert np.abs(audio).max() <= 1.0
    assert np.abs(audio).max() > 0.01, "silent"
    expected_s = len(words_of(text)) / WORDS_PER_SECOND
    assert 0.5 * expected_s <= len(audio) / SAMPLE_RATE <= 3 * expected_s
    return audio


def check_word_timings(chunks: list[AudioChunk], text: str) -> None:
    words = [word for chunk in chunks for word in chunk.words]
    assert [word.word for word in words] == words_of(text)
    total_s = sum(chunk.duration_s for chunk in chunks)
    previous_end = 0.0
    for word in words:
        assert previous_end <= word.start_s < word.end_s <= total_s + 1e-6
        previous_end = word.end_s


def test_engine_runs_on_cuda_when_available(engine: TorchEngine) -> None:
    assert engine.device == ("cuda" if torch.cuda.is_available() else "cpu")
    assert engine.sample_rate == SAMPLE_RATE == 24_000


def test_us_voice_speaks_with_word_timings(engine: TorchEngine) -> None:
    chunks = list(engine.synthesize(US_TEXT, "af_heart"))
    check_speech(chunks, US_TEXT)
    check_word_timings(chunks, US_TEXT)


def test_gb_voice_uses_british_g2p(engine: TorchEngine) -> None:
    assert engine.phonemes(GB_TEXT, "bf_emma") != engine.phonemes(GB_TEXT, "af_heart")
    assert "ɑː" in engine.phonemes(GB_TEXT, "bf_emma")[0]  # British long "can't"
    chunks = list(engine.synthesize(GB_TEXT, "bf_emma"))
    check_speech(chunks, GB_TEXT)
    check_word_timings(chunks, GB_TEXT)


def test_blend_is_the_weighted_sum_of_pt_and_bin_voices(engine: TorchEngine) -> None:
    # af_heart comes from a .pt file, am_michael from a raw .bin file.
    blend = engine.voice_tensor("af_heart:0.7,am_michael:0.3")
    expected = 0.7 * engine.voice_tensor("af_heart") + 0.3 * engine.voice_tensor("am_michael")
    assert blend.shape == (510, 1, 256)
    assert torch.allclose(blend, expected)
    text = "Hello there, my friend."
    chunks = list(engine.synthesize(text, "af_heart:0.7,am_michael:0.3"))
    check_speech(chunks, text)
    check_word_timings(chunks, text)


def test_pt_and_bin_voice_files_hold_the_same_voice(source_dir: Path, model_dir: Path) -> None:
    from_bin = load_voice_tensor(source_dir / "voices" / "af_heart.bin")
    from_pt = load_voice_tensor(model_dir / "voices" / "af_heart.pt")
    assert from_bin.shape == from_pt.shape == (510, 1, 256)
    assert torch.equal(from_bin, from_pt)


def test_calibrated_checkpoint_gives_each_phoneme_a_realistic_length(engine: TorchEngine) -> None:
    (phonemes,) = engine.phonemes(US_TEXT, "af_heart")
    audio_s = sum(chunk.duration_s for chunk in engine.synthesize(US_TEXT, "af_heart"))
    # Two pad tokens wrap the phonemes; untrained, each would last ~0.6 s.
    assert 0.05 <= audio_s / (len(phonemes) + 2) <= 0.1


def test_speed_is_passed_through(engine: TorchEngine) -> None:
    normal = sum(chunk.duration_s for chunk in engine.synthesize(US_TEXT, "af_heart", speed=1.0))
    fast = sum(chunk.duration_s for chunk in engine.synthesize(US_TEXT, "af_heart", speed=2.0))
    assert fast < 0.8 * normal


def test_espeak_language_speaks_without_word_timings(engine: TorchEngine) -> None:
    text = "Hola, ¿cómo estás hoy?"
    chunks = list(engine.synthesize(text, "ef_dora"))
    check_speech(chunks, text)
    assert all(chunk.words == () for chunk in chunks)


def test_unknown_voice_lists_the_valid_ids(engine: TorchEngine) -> None:
    with pytest.raises(UnknownVoiceError) as raised:
        engine.synthesize("Hello.", "af_nobody")
    assert raised.value.valid == OFFICIAL_VOICES
    assert "af_heart" in str(raised.value) and "bm_george" in str(raised.value)


def test_voice_missing_from_the_model_dir_names_the_file(engine: TorchEngine) -> None:
    with pytest.raises(AssetError, match=r"voices/am_adam\.pt"):
        engine.synthesize("Hello.", "am_adam")


def test_two_threads_synthesize_at_once(engine: TorchEngine) -> None:
    requests = [(US_TEXT, "af_heart"), (GB_TEXT, "bf_emma")]
    results: dict[int, list[AudioChunk]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(len(requests))

    def speak(index: int) -> None:
        text, voice = requests[index]
        try:
            start.wait()
            results[index] = list(engine.synthesize(text, voice))
        except BaseException as error:  # re-raised in the test thread below
            errors.append(error)

    threads = [threading.Thread(target=speak, args=(index,)) for index in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for index, (text, _voice) in enumerate(requests):
        check_speech(results[index], text)
        check_word_timings(results[index], text)


def test_missing_checkpoint_names_the_file_and_the_fix(model_dir: Path, tmp_path: Path) -> None:
    shutil.copyfile(model_dir / CONFIG_FILE, tmp_path / CONFIG_FILE)
    with pytest.raises(AssetError) as raised:
        TorchEngine(tmp_path).load()
    assert str(tmp_path / CHECKPOINT_FILE) in str(raised.value)
    assert "voicestream models fetch" in str(raised.value)


def test_missing_config_names_the_file(model_dir: Path, tmp_path: Path) -> None:
    (tmp_path / CHECKPOINT_FILE).symlink_to(model_dir / CHECKPOINT_FILE)
    with pytest.raises(AssetError, match=re.escape(str(tmp_path / CONFIG_FILE))):
        TorchEngine(tmp_path).load()


def _vouch_for(directory: Path) -> None:
    """SOURCE.json recording the checkpoint's digest, so the checks after the digest's are reached."""
    write_source(directory, "test", "test", {CHECKPOINT_FILE: sha256_of(directory / CHECKPOINT_FILE)})


def test_a_checkpoint_nothing_vouches_for_is_refused_before_torch_reads_it(model_dir: Path, tmp_path: Path) -> None:
    shutil.copyfile(model_dir / CONFIG_FILE, tmp_path / CONFIG_FILE)
    shutil.copyfile(model_dir / CHECKPOINT_FILE, tmp_path / CHECKPOINT_FILE)  # without its SOURCE.json
    engine = TorchEngine(tmp_path)
    with pytest.raises(AssetError, match="unverified weights"):
        engine.load()
    assert not engine.loaded


def test_truncated_checkpoint_is_refused(model_dir: Path, tmp_path: Path) -> None:
    shutil.copyfile(model_dir / CONFIG_FILE, tmp_path / CONFIG_FILE)
    with (model_dir / CHECKPOINT_FILE).open("rb") as source:
        (tmp_path / CHECKPOINT_FILE).write_bytes(source.read(100_000))
    _vouch_for(tmp_path)
    with pytest.raises(AssetError, match="cannot be read"):
        TorchEngine(tmp_path).load()


def test_checkpoint_lacking_a_component_is_refused(model_dir: Path, tmp_path: Path) -> None:
    # KModel itself would keep the random init of the missing part without a word.
    shutil.copyfile(model_dir / CONFIG_FILE, tmp_path / CONFIG_FILE)
    full = torch.load(model_dir / CHECKPOINT_FILE, map_location="cpu", weights_only=True, mmap=True)
    torch.save({"bert_encoder": full["bert_encoder"]}, tmp_path / CHECKPOINT_FILE)
    _vouch_for(tmp_path)
    engine = TorchEngine(tmp_path)
    with pytest.raises(AssetError, match="component 'decoder' is missing"):
        engine.load()
    assert not engine.loaded


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error of a machine without CUDA")
def test_cuda_requested_without_cuda_is_a_clear_error(model_dir: Path) -> None:
    with pytest.raises(EngineError, match="CUDA is not available"):
        TorchEngine(model_dir, device="cuda").load()


def test_factory_creates_the_torch_backend(model_dir: Path) -> None:
    engine = create_engine("torch", model_dir=model_dir)
    assert isinstance(engine, TorchEngine)
    assert engine.model_dir == model_dir
    assert not engine.loaded


def test_factory_puts_weights_derived_from_the_int8_export_under_the_derived_dir(
    model_dir: Path, tmp_path: Path
) -> None:
    engine = create_engine("torch", model_dir=model_dir, derived_dir=tmp_path)
    assert isinstance(engine, TorchEngine)
    assert engine.derived_dir == tmp_path / "derived-torch"

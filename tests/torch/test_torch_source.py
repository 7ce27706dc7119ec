"""The generator's harmonic source re-computed (engine/torch/source.py), on the real model's source
module and real sentences' pitch curves (conftest.py `real_engine`: weights derived from the int8
export): kokoro's own excitation bit for bit, and continued from any pitch point, the whole
curve's, bit for bit again, the noise aside (fresh in a continuation)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.support.long_sentences import LONG_SENTENCES
from voicestream.engine.streaming.word_timings import tokenize
from voicestream.engine.torch.engine import TorchEngine
from voicestream.engine.torch.source import HarmonicSource

VOICE = "af_heart"
TEXTS = ("The museum opens at ten in the morning and closes at six in the evening.", LONG_SENTENCES[0])


@pytest.fixture(scope="module")
def module(real_engine: TorchEngine) -> Any:
    return real_engine.split.model.decoder.generator.m_source


@pytest.fixture(scope="module")
def curves(real_engine: TorchEngine) -> list[torch.Tensor]:
    """The pitch curves [1, 2 * frames] the real encoder predicts for TEXTS (voiced and unvoiced
    stretches; 1,248 points for the long sentence)."""
    split, voice = real_engine.split, real_engine.voice_tensor(VOICE)
    found = []
    for text in TEXTS:
        (piece,) = real_engine.phoneme_pieces(text, VOICE)
        ids, _ = tokenize(piece, split.model.vocab)
        found.append(split.encode(ids, voice[len(piece.text) - 1], 1.0).f0)
    assert all(bool((f0 < 10).any() and (f0 > 10).any()) for f0 in found)
    return found


def test_the_whole_source_is_kokoros_bit_for_bit_and_draws_what_it_draws(
    module: Any, curves: list[torch.Tensor], real_engine: TorchEngine
) -> None:
    upsample = real_engine.split.model.decoder.generator.f0_upsamp
    for f0 in curves:
        with torch.inference_mode():
            torch.manual_seed(31)
            theirs, _, _ = module(upsample(f0[:, None]).transpose(1, 2))
            their_next = torch.rand(4)
            torch.manual_seed(31)
            ours = HarmonicSource(module).whole(f0)
            our_next = torch.rand(4)
        assert torch.equal(ours.samples, theirs.transpose(1, 2).squeeze(1))
        assert torch.equal(our_next, their_next)  # the random stream is left where kokoro leaves it
        assert ours.cycles.shape == (1, 9, f0.shape[1])


def test_a_continuation_from_any_point_is_the_whole_curves_source(module: Any, curves: list[torch.Tensor]) -> None:
    """Head [0, j) then the continuation from j, on one pitch curve: the running phase, the voiced
    sines and (given the same noise) the excitation equal the whole computation's exactly."""
    source = HarmonicSource(module)
    spp = source.samples_per_point
    with torch.inference_mode():
        for f0 in curves:
            points = f0.shape[1]
            cycles = source.cycles(f0)
            harmonics = source.harmonics_from(f0, cycles, 0)
            noise = source.noise(f0, 0)
            whole = source.excitation(harmonics, noise)
            for join in (1, points // 3, points // 2 + 1, points - 1):
                continued = torch.cat([cycles[:, :, :join], source.cycles(f0[:, join:], cycles[:, :, join - 1])], 2)
                assert torch.equal(continued, cycles)
                tail = source.harmonics_from(f0, continued, join)
                assert torch.equal(tail, harmonics[:, join * spp :])
                head = source.excitation(harmonics[:, : join * spp], noise[:, : join * spp])
                rest = source.excitation(tail, noise[:, join * spp :])
                assert torch.equal(torch.cat([head, rest], 1), whole)
                # `continued` composes the same steps (its noise drawn afresh).
                joined = source.continued(f0, cycles[:, :, :join])
                assert torch.equal(joined.cycles, cycles)
                assert joined.samples.shape == (1, (points - join) * spp)


def test_a_float32_running_phase_would_not_continue_exactly(module: Any, curves: list[torch.Tensor]) -> None:
    """Why the features carry the sum in float64: restarted from its float32 rounding, the sum of
    a long sentence drifts from the whole one's by float32 steps (measured on the five long
    sentences, every 7th point: up to 7.6e-6 cycles, x300 x 2 pi = 0.014 rad at the samples)."""
    source = HarmonicSource(module)
    f0 = curves[-1]
    join = f0.shape[1] // 2
    with torch.inference_mode():
        cycles = source.cycles(f0)
        rounded = source.cycles(f0[:, join:], cycles[:, :, join - 1].float().double())
    assert not torch.equal(rounded.float(), cycles[:, :, join:].float())


def test_a_join_point_outside_the_curve_is_refused(module: Any, curves: list[torch.Tensor]) -> None:
    source = HarmonicSource(module)
    f0 = curves[0]
    cycles = source.cycles(f0)
    for before in (cycles[:, :, :0], cycles):
        with pytest.raises(ValueError, match="outside the pitch curve"):
            source.continued(f0, before)

"""The streaming pipeline on simulated hosts from fast to slow (tests/support/simulated_host.py):
once audio starts, the listener never runs dry on any host that decodes faster than real time,
and the windows cost a bounded share more than whole-sentence decoding. Deterministic: every run
advances an injected clock by its modelled cost, whatever this machine's speed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.support.simulated_host import FAST_RTF, TorchCpuCosts, play, sentence, simulated_pipeline
from voicestream.engine.onnx.engine import OnnxStrategy
from voicestream.engine.streaming.lookahead import LookaheadPlan
from voicestream.engine.streaming.pipeline import LEAD_IN_FRAMES, Streaming
from voicestream.engine.text.g2p import Phonemes
from voicestream.engine.torch.plan import DEFAULT_LOOKAHEAD as TORCH_LOOKAHEAD
from voicestream.engine.torch.plan import DEFAULT_WINDOWS as TORCH_WINDOWS
from voicestream.engine.torch.plan import PACING_MARGIN as TORCH_PACING_MARGIN

TEXTS: dict[str, list[Phonemes]] = {
    "short": [sentence(5)],  # ~1.7 s of speech, one window plan
    "long": [sentence(50)],  # a lookahead head, then the whole piece's encoding
    "digit-heavy": [sentence(30, letters=3)],  # many short words: more tokens per second of speech
    "paragraph": [sentence(12), sentence(9), sentence(14), sentence(10)],  # four pieces in one call
}
# Whole-sentence RTF: this repository's fast host (0.2), the Intel class (0.37), the AVX2-only
# 2-core class of issue 29 (0.6), and one slower still.
HOSTS = (0.2, 0.37, 0.6, 0.8)
WORST_GAP_S = 0.05
# Windows recompute their context: at most this much more than one encoder run and one whole
# decode per piece (a 5-word sentence's three or four windows are the worst case: four where the
# pace cuts the third short, as at RTF 0.37 here; docs/engine.md).
COMPUTE_BOUND = 1.55


@pytest.mark.parametrize("rtf", HOSTS)
@pytest.mark.parametrize("text", TEXTS)
def test_once_audio_starts_the_listener_never_runs_dry(rtf: float, text: str) -> None:
    pipeline, clock = simulated_pipeline(rtf, OnnxStrategy().streaming())
    stream = play(pipeline, clock, TEXTS[text])
    print(rtf, text, stream)
    assert stream.worst_gap_s <= WORST_GAP_S
    assert stream.compute_ratio <= COMPUTE_BOUND and stream.frame_ratio <= COMPUTE_BOUND


@pytest.mark.parametrize("text", TEXTS)
def test_a_fast_host_keeps_its_first_audio(text: str) -> None:
    """On the fast class the first window is the plan's: first audio is one short encoder run and
    a 16-frame window, as before pacing planned it."""
    pipeline, clock = simulated_pipeline(0.2, OnnxStrategy().streaming())
    stream = play(pipeline, clock, TEXTS[text])
    assert stream.first_audio_s < 0.25


@pytest.mark.parametrize("jitter", [(1.0, 1.0, 1.3), (0.8, 1.2, 1.0, 1.25)])
@pytest.mark.parametrize("text", TEXTS)
def test_runs_slower_than_measured_cost_a_short_gap_not_a_stall(jitter: tuple[float, ...], text: str) -> None:
    """A load that comes and goes (decoder runs up to 30% slower than the speed measured): a
    window may outlast the audio ahead by its own excess, and the stream recovers; it does not
    stall for seconds (the schedule's larger windows after a gap did, before)."""
    pipeline, clock = simulated_pipeline(0.6, OnnxStrategy().streaming(), jitter)
    stream = play(pipeline, clock, TEXTS[text])
    print(jitter, text, stream)
    assert stream.worst_gap_s <= 0.3


LOAD_STEP_TEXTS = {
    **TEXTS,
    "paragraph, longer sentences later": [sentence(8), sentence(20), sentence(14), sentence(25)],
}


@pytest.mark.parametrize("text", LOAD_STEP_TEXTS)
def test_a_load_that_starts_mid_call_costs_at_most_a_short_gap(text: str) -> None:
    """Another process takes one of the two cores part way through the call: from the call's
    `at`-th run on, every run takes twice the time the speed measured so far says (the fast class becoming
    the Intel one's, still faster than real time). A window in flight outlasts the audio ahead by
    its own excess at most, and the pace re-measures after it; a piece decoded in one run must
    leave room for that too (pacing.WHOLE_RUN_SHARE): with the margin alone, a later sentence's
    whole run left the listener 0.65 s short here."""
    for at in range(2, 12):
        step = (1.0,) * at + (2.0,) * 200
        pipeline, clock = simulated_pipeline(FAST_RTF, OnnxStrategy().streaming(), after_warm_up=step)
        stream = play(pipeline, clock, LOAD_STEP_TEXTS[text])
        assert stream.worst_gap_s <= 0.2, (at, stream)


@pytest.mark.parametrize("variation", [(1.08,), (1.07, 0.95, 1.07, 1.0)])
@pytest.mark.parametrize("rtf", HOSTS)
@pytest.mark.parametrize("text", TEXTS)
def test_runs_a_little_off_the_measured_speed_leave_no_gap(variation: tuple[float, ...], rtf: float, text: str) -> None:
    """After the warm-up measured the speed, runs take up to 8% longer than it says (runs vary by
    that much on a quiet host): the first window is planned with room for it (pacing.RUN_VARIATION),
    so the windows after it add to the listener's lead instead of running at the break-even, where
    such variation left gaps of up to 0.6 s at RTF 0.6-0.8."""
    pipeline, clock = simulated_pipeline(rtf, OnnxStrategy().streaming(), after_warm_up=variation)
    stream = play(pipeline, clock, TEXTS[text])
    assert stream.worst_gap_s <= WORST_GAP_S, stream


# Decoder runs over their median, in the order the engine ran them on a real 2-core AVX2-only host
# (benchmarks/results/run_variation_avx2.json, 2026-12-06, quiet, whole-sentence RTF 0.53): up to
# a fifth slower, several slow runs in a row.
# fmt: off
AVX2_HOST_RUNS = (
    0.96, 1.04, 0.83, 0.91, 1.05, 0.93, 0.94, 0.79, 1.06, 0.96, 0.96, 0.96, 0.95, 0.96, 0.87, 0.84, 1.05,
    1.13, 0.95, 1.05, 1.07, 0.94, 1.13, 0.87, 0.96, 1.1, 1.07, 1.02, 1.03, 0.95, 0.9, 1.12, 0.99, 0.99, 1.03,
    1.01, 0.92, 1.13, 0.9, 0.92, 0.87, 1.14, 1.05, 0.96, 1.03, 1.03, 0.96, 1.09, 0.81, 0.95, 0.97, 1.05,
    1.07, 1.15, 1.04, 1.03, 1.15, 1.2, 1.19, 1.14, 1.11, 1.19, 0.87, 0.81,
)
# fmt: on


def worst_gaps_replaying(runs: tuple[float, ...], starts: range, rtf: float, text: str) -> dict[int, float]:
    """The worst gap of `text`, per start: a server that has spoken a sentence before, its runs
    from then on `runs` (each over the measured speed) from that start on, cycling."""
    worst: dict[int, float] = {}
    for start in starts:
        pattern = runs[start:] + runs[:start]
        pipeline, clock = simulated_pipeline(rtf, OnnxStrategy().streaming(), after_warm_up=pattern)
        play(pipeline, clock, [sentence(15)])
        clock.now += 10.0
        worst[start] = play(pipeline, clock, TEXTS[text]).worst_gap_s
    return worst


@pytest.mark.parametrize("rtf", [0.37, 0.47, 0.6])
@pytest.mark.parametrize("text", TEXTS)
def test_runs_that_vary_as_a_real_avx2_hosts_did_leave_no_gap(rtf: float, text: str) -> None:
    """A server that has spoken a sentence before, its runs varying as the real host's did, from
    every third run of the measured pattern on: the margin (pacing.MARGIN) and the first window's
    room (pacing.RUN_VARIATION) cover a streak of slow runs. At 0.9 and 1.1 the same pattern left
    gaps of up to 0.48 s here, and the real host up to 0.15 s at the route (docs/engine-evidence.md,
    "A real AVX2-only host")."""
    worst = worst_gaps_replaying(AVX2_HOST_RUNS, range(0, len(AVX2_HOST_RUNS), 3), rtf, text)
    assert max(worst.values()) <= WORST_GAP_S, worst


# The same host's decoder runs in a later run (benchmarks/results/run_variation_avx2_encoder.json,
# RTF 0.49), which the margin and room were not chosen on: up to a third slower than their median,
# and twelve slow runs in a row.
# fmt: off
AVX2_HOST_LATER_RUNS = (
    0.832, 0.864, 0.987, 0.838, 0.881, 0.859, 0.878, 0.916, 0.88, 0.974, 0.822, 0.857, 0.883, 0.939, 0.939, 0.902,
    0.948, 1.019, 1.0, 0.966, 1.026, 0.978, 0.97, 1.017, 0.976, 0.927, 0.967, 0.894, 1.002, 0.781, 0.789, 0.955, 0.781,
    0.865, 0.883, 0.879, 1.029, 0.881, 1.037, 0.955, 0.994, 1.138, 1.042, 1.006, 1.324, 1.29, 1.308, 1.201, 1.207,
    1.215, 1.057, 1.244, 1.263, 1.253, 1.178, 1.116, 1.013, 1.125, 1.168, 1.063, 1.033, 1.058, 1.251, 1.133, 1.15,
    1.123, 1.09, 1.033, 1.018, 1.154, 0.911, 0.916, 0.925, 1.012, 1.099,
)
# fmt: on
# A gap a streak of runs slower than the room leaves: part of one run, after which the stream
# recovers (the margin and room before, 0.9 and 1.1, left 0.41 s on these runs).
SHORT_GAP_S = 0.1


@pytest.mark.parametrize("rtf", [0.37, 0.47, 0.6])
@pytest.mark.parametrize("text", TEXTS)
def test_runs_the_constants_were_not_chosen_on_leave_at_most_a_short_gap(rtf: float, text: str) -> None:
    """The later run's pattern from every one of its runs on. One stream of the 900 gaps, 63 ms: it
    met the twelve slow runs, its windows at the break-even (docs/engine-evidence.md, "The floor
    under first audio on the AVX2 class")."""
    worst = worst_gaps_replaying(AVX2_HOST_LATER_RUNS, range(len(AVX2_HOST_LATER_RUNS)), rtf, text)
    assert max(worst.values()) <= SHORT_GAP_S, worst


# --- the torch engine's plan on its own costs: a CPU where a decoder run's fixed cost is ~9 frames'


def torch_streaming(lookahead: LookaheadPlan = TORCH_LOOKAHEAD) -> Streaming:
    """What TorchEngine tells the pipeline (engine/torch/engine.py `streaming`), paced."""
    return Streaming(
        windows=TORCH_WINDOWS, lookahead=lookahead, lead_in_frames=LEAD_IN_FRAMES, pacing_margin=TORCH_PACING_MARGIN
    )


# Runs off the measured speed as on a noisy 2-core host: up to 30% slower, then faster again.
NOISY_RUNS = (1.1, 1.3, 0.9)


@pytest.mark.parametrize("variation", [(1.0,), (1.07, 0.95, 1.07, 1.0)])
@pytest.mark.parametrize("text", TEXTS)
def test_the_torch_plan_on_a_cpu_never_runs_dry(variation: tuple[float, ...], text: str) -> None:
    pipeline, clock = simulated_pipeline(TorchCpuCosts(), torch_streaming(), after_warm_up=variation)
    stream = play(pipeline, clock, TEXTS[text])
    print(variation, text, stream)
    assert stream.worst_gap_s <= WORST_GAP_S, stream


def test_the_torch_plan_on_a_noisy_cpu_never_runs_dry() -> None:
    """Sessions one after another on a host whose runs vary as a noisy 2-core VM's do: the speed
    each window is planned with was measured on other windows, of other sizes and sentences. The
    torch plan's wider pacing margin (plan.py) absorbs it; at the ONNX engine's 0.9 the 15- and
    50-word sentences here left gaps of 53 ms."""
    pipeline, clock = simulated_pipeline(TorchCpuCosts(), torch_streaming(), after_warm_up=NOISY_RUNS)
    for words in (5, 15, 50, 5, 30):
        clock.now += 10.0
        stream = play(pipeline, clock, [sentence(words)])
        assert stream.worst_gap_s <= WORST_GAP_S, (words, stream)


def test_the_torch_heads_80_tokens_keep_a_long_sentences_first_audio_near_a_short_ones() -> None:
    """With the ONNX engine's 40-token head the first window alone must buffer the whole piece's
    encoding on this host, and grows (docs/engine.md, "Lookahead on torch"); 80 tokens let several
    windows build that lead."""
    first_audio: dict[int, dict[int, float]] = {}
    for spoken in (40, 80):
        pipeline, clock = simulated_pipeline(
            TorchCpuCosts(), torch_streaming(replace(TORCH_LOOKAHEAD, spoken_tokens=spoken))
        )
        first_audio[spoken] = {}
        for words in (5, 50):
            clock.now += 10.0
            first_audio[spoken][words] = play(pipeline, clock, [sentence(words)]).first_audio_s
    print(first_audio)
    assert TORCH_LOOKAHEAD.spoken_tokens == 80
    assert first_audio[80][50] < 0.85 * first_audio[40][50]
    assert first_audio[80][50] / first_audio[80][5] < 1.6

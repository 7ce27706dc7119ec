"""The engine guarantees (tests/support/guarantees.py) on the torch engine with real weights
(derived from the int8 export, conftest.py `real_engine`), on this machine's CPU: the same bodies
run on the ONNX engine in tests/integration/test_engine_guarantees.py. Whisper's verdict is held
to the ONNX engine's, measured here on the same sentences: every other bench sentence (both
engines speaking all eleven was five minutes of the tier on the slowest class; the ONNX tier
hears all eleven)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from tests.support.guarantees import EngineGuarantees, EngineKit, bench_sentences, bench_wer
from voicestream.engine.onnx.engine import OnnxEngine, OnnxStrategy
from voicestream.engine.text.g2p import G2PSettings
from voicestream.engine.torch.engine import TorchEngine

THREADS = 2
BENCH = tuple(bench_sentences()[::2])


@pytest.fixture(scope="module")
def whole_torch(source_dir: Path, derived_dir: Path, real_engine: TorchEngine) -> Iterator[TorchEngine]:
    engine = TorchEngine(source_dir, derived_dir=derived_dir, decoder_windows=None)
    engine.load()
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def windowed_torch(source_dir: Path, derived_dir: Path, real_engine: TorchEngine) -> Iterator[TorchEngine]:
    """Windows on the plan with the leading silence kept and without the lookahead (its head is
    encoded on its own: test_torch_lookahead.py gates its seams): frame for frame the whole
    decoding's (which keeps it, being KModel.forward's samples), so the seam gate compares like
    with like."""
    engine = TorchEngine(source_dir, derived_dir=derived_dir, pacing=False, lead_in_frames=None, lookahead=None)
    engine.load()
    yield engine
    engine.close()


@cache
def onnx_wer() -> float:
    """The ONNX engine's bench WER (the main tier's engine: windows on the plan's schedule)."""
    engine = OnnxEngine(threads=THREADS, strategy=OnnxStrategy(pacing=False))
    engine.load()
    try:
        return bench_wer(engine, BENCH)
    finally:
        engine.close()


class TestTorchGuarantees(EngineGuarantees):
    @pytest.fixture
    def kit(
        self,
        real_engine: TorchEngine,
        whole_torch: TorchEngine,
        windowed_torch: TorchEngine,
        source_dir: Path,
        derived_dir: Path,
    ) -> EngineKit:
        def patient(g2p: G2PSettings) -> TorchEngine:
            engine = TorchEngine(source_dir, derived_dir=derived_dir, g2p=g2p, pacing=False)
            engine.load()
            return engine

        return EngineKit(
            engine=real_engine,
            whole=whole_torch,
            patient=patient,
            onnx_wer=onnx_wer,
            windowed=windowed_torch,
            bench=BENCH,
        )

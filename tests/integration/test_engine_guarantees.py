"""The engine guarantees (tests/support/guarantees.py) on the ONNX engine: the same bodies run on
the torch engine in tests/torch/test_torch_guarantees.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import TEST_THREADS
from tests.support.guarantees import EngineGuarantees, EngineKit
from voicestream.engine import G2PSettings, load_engine
from voicestream.engine.base import SpeechEngine
from voicestream.engine.onnx.engine import OnnxEngine, OnnxStrategy


@pytest.fixture(scope="module")
def whole_onnx(onnx_engine: OnnxEngine) -> Iterator[OnnxEngine]:
    engine = OnnxEngine(
        threads=TEST_THREADS, derived_dir=onnx_engine.derived_dir, strategy=OnnxStrategy(decoder_windows=None)
    )
    engine.load()
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def plain_onnx(onnx_engine: OnnxEngine) -> Iterator[OnnxEngine]:
    """Windows without the lookahead: its head is encoded on its own, so its frames are not the
    whole sentence's (tests/integration/test_engine_lookahead.py gates its seams)."""
    strategy = OnnxStrategy(lookahead=None, pacing=False)
    engine = OnnxEngine(threads=TEST_THREADS, derived_dir=onnx_engine.derived_dir, strategy=strategy)
    engine.load()
    yield engine
    engine.close()


def patient_onnx(g2p: G2PSettings) -> SpeechEngine:
    return load_engine("onnx", threads=TEST_THREADS, g2p=g2p)


class TestOnnxGuarantees(EngineGuarantees):
    @pytest.fixture
    def kit(self, kokoro_engine: SpeechEngine, whole_onnx: OnnxEngine, plain_onnx: OnnxEngine) -> EngineKit:
        return EngineKit(engine=kokoro_engine, whole=whole_onnx, patient=patient_onnx, windowed=plain_onnx)

"""The ONNX engine before its model is loaded (loaded, on the real Kokoro-82M:
tests/integration/test_engine_onnx.py)."""

from __future__ import annotations

import pytest

from voicestream.engine import EngineError, create_engine


def test_unloaded_engine_says_so() -> None:
    with pytest.raises(EngineError, match="not loaded"):
        create_engine("onnx").synthesize("Hello.")

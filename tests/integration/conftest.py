"""`engine`: the engine tests' ONNX engine, the session's (tests/conftest.py `onnx_engine`), so the
model is loaded once for every module rather than once per module."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from voicestream.engine.onnx.engine import OnnxEngine


@pytest.fixture
def engine(onnx_engine: OnnxEngine) -> OnnxEngine:
    return onnx_engine

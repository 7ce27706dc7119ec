"""Shared fixtures: one real Kokoro engine per test run, and the real server around it.

- `kokoro_engine`: the int8 ONNX engine, loaded once (session scope), its windows on the plan's
  schedule whatever the machine's speed (not paced); `onnx_engine`: the same engine typed as the
  OnnxEngine it is, for tests of its internals (split graphs, G2P pieces).
- `kokoro_server`: the real app under uvicorn on 127.0.0.1:<free port> with that engine and
  default limits; `.http_url`, `.ws_url`, `.runtime`, `.task_names()` (see tests/support/server.py).
- `server_factory`: start another server on the same engine with other limits, e.g.
  `with server_factory(Limits(idle_timeout_s=1)) as server: ...`.
- `asr`: offline Whisper (tests/support/asr.py): `asr.transcribe(audio)`, `asr.word_error_rate(ref, hyp)`.

Every test that uses one of the model fixtures is marked `model`; the unit tier (`make check`)
runs without them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest

from tests.support import asr as asr_module
from tests.support.server import LiveServer, start_server
from voicestream.engine.base import SpeechEngine
from voicestream.wire.bidi import Limits

if TYPE_CHECKING:
    from voicestream.engine.onnx.engine import OnnxEngine

ServerFactory = Callable[..., contextlib.AbstractContextManager[LiveServer]]

pytest_plugins = ["tests.support.worker_load"]

# Fixtures that load the real Kokoro-82M: a test that uses one is marked `model`.
MODEL_FIXTURES = frozenset({"kokoro_engine", "onnx_engine", "server_factory", "kokoro_server", "local_stack"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.model)
    # Modules with a `slow` test first, each module's tests still in order: pytest-xdist hands out
    # whole modules (--dist loadfile) in this order, so a long module dealt last left one process
    # working alone for minutes at the end of the tier.
    slow_modules = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_modules)


# The machine is small and shared: two inference threads per synthesis; VOICESTREAM_TEST_THREADS
# overrides it.
TEST_THREADS = int(os.environ.get("VOICESTREAM_TEST_THREADS", "2"))


@pytest.fixture(scope="session")
def kokoro_engine() -> SpeechEngine:
    """The production engine on its window schedule alone. Pacing (engine/streaming/pacing.py) sizes each
    window from how long the ones before took on this machine, so with it on, what a test hears
    would depend on the machine's speed and load. Pacing itself is tested with a fixed speed and a
    frozen clock (tests/unit/test_pacing.py, test_engine_onnx_streaming.py); its effect on a host
    is measured by benchmarks/first_audio_length.py."""
    from voicestream.engine.onnx.engine import OnnxEngine, OnnxStrategy

    engine = OnnxEngine(threads=TEST_THREADS, strategy=OnnxStrategy(pacing=False))
    engine.load()
    return engine


@pytest.fixture(scope="session")
def onnx_engine(kokoro_engine: SpeechEngine) -> OnnxEngine:
    from voicestream.engine.onnx.engine import OnnxEngine

    assert isinstance(kokoro_engine, OnnxEngine)
    return kokoro_engine


@pytest.fixture(scope="session")
def server_factory(kokoro_engine: SpeechEngine) -> ServerFactory:
    from voicestream.kokoro_server import create_app

    @contextlib.contextmanager
    def factory(
        limits: Limits | None = None,
        send_buffer: int | None = None,
        ws_ping_interval: float | None = 20.0,
        **app_options: Any,
    ) -> Iterator[LiveServer]:
        """`ws_ping_interval`: uvicorn's keepalive pings (its default); None for a test whose client
        stops reading on purpose, which a ping would close once the pause outlasts its timeout."""
        app = create_app(kokoro_engine, limits or Limits(), **app_options)
        with start_server(app, send_buffer=send_buffer, ws_ping_interval=ws_ping_interval) as server:
            yield server

    return factory


@pytest.fixture(scope="session")
def kokoro_server(server_factory: ServerFactory) -> Iterator[LiveServer]:
    with server_factory(Limits()) as server:
        yield server


@pytest.fixture(scope="session")
def asr() -> ModuleType:
    return asr_module

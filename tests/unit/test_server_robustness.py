"""Audio never reads as a control frame, on a scripted engine (the session surviving anything a
client sends is tested with the real model in tests/integration/test_server_robustness.py)."""

from __future__ import annotations

import pytest
from websockets.asyncio.client import connect

from tests.support.engines import ScriptedEngine
from tests.support.server import start_server
from tests.support.session_client import collect, send_json
from voicestream.kokoro_server import create_app
from voicestream.wire.bidi import Limits
from voicestream.wire.framing import parse_control_frame

# Whole-payload JSON objects disguised as PCM: one short frame and one full 40 ms frame (1920 B).
SHORT_OBJECT = b'{"type":"pong"} '
_PREFIX = b'{"type":"error","code":"x","pad":"'
FULL_FRAME_OBJECT = _PREFIX + b"a" * (1920 - len(_PREFIX) - 2) + b'"}'


@pytest.mark.parametrize("crafted", [SHORT_OBJECT, FULL_FRAME_OBJECT, FULL_FRAME_OBJECT * 3 + SHORT_OBJECT])
async def test_audio_that_is_a_json_object_is_never_sent_as_one(crafted: bytes) -> None:
    assert len(crafted) % 2 == 0 and parse_control_frame(crafted[:1920]) is not None
    app = create_app(ScriptedEngine(crafted), Limits())
    with start_server(app) as server:
        async with connect(server.ws_url) as ws:
            await send_json(ws, {"text": "anything", "request_id": "crafted"})
            (result,), others = await collect(ws, 1)  # collect() fails on any audio frame read as control
    assert others == [] and result.end is not None and result.end["type"] == "synthesis_complete"
    assert bytes(result.audio) == crafted  # every byte delivered, in order, as audio
    assert result.end["audio_bytes"] == len(crafted)
    assert result.frames > len(crafted) // 1920  # the unsafe frames were split

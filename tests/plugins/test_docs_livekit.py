"""docs/integrations.md's LiveKit example, run as written against the real local server."""

from __future__ import annotations

import pytest

from tests.plugins.conftest import ServerProcess
from tests.support.doc_blocks import doc_blocks, run_block


def test_the_livekit_example_speaks(kokoro: ServerProcess, capsys: pytest.CaptureFixture[str]) -> None:
    before = len(kokoro.log_events("request_done"))
    for code in doc_blocks("integrations.md", "livekit"):
        run_block(code, {"ws://127.0.0.1:8080": kokoro.url.replace("http://", "ws://")})
    done = kokoro.log_events("request_done")[before:]
    assert done and all(record["audio_bytes"] > 0 for record in done)
    assert " s of audio" in capsys.readouterr().out

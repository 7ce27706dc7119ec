"""docs/integrations.md's Pipecat example, run as written against the real local server."""

from __future__ import annotations

from tests.plugins.conftest import ServerProcess
from tests.support.doc_blocks import doc_blocks, run_block


def test_the_pipecat_example_speaks(kokoro: ServerProcess) -> None:
    before = len(kokoro.log_events("request_done"))
    for code in doc_blocks("integrations.md", "pipecat"):
        run_block(code, {"ws://127.0.0.1:8080": kokoro.url.replace("http://", "ws://")})
    done = kokoro.log_events("request_done")[before:]
    assert done and all(record["audio_bytes"] > 0 for record in done)

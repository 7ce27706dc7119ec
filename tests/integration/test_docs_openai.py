"""docs/integrations.md's OpenAI SDK example, run as written against the real server."""

from __future__ import annotations

import pytest

from tests.support.doc_blocks import doc_blocks, run_block
from tests.support.server import LiveServer


def test_the_openai_example_speaks(kokoro_server: LiveServer, capsys: pytest.CaptureFixture[str]) -> None:
    for code in doc_blocks("integrations.md", "openai"):
        run_block(code, {"http://127.0.0.1:8080": kokoro_server.http_url})
    printed = capsys.readouterr().out.strip()
    assert printed.endswith(" s of audio") and float(printed.split()[0]) > 1.0

"""The POST /invocations client and a server that is not there (against the real server:
tests/integration/test_client_invocations.py)."""

from __future__ import annotations

import pytest

from voicestream.speech.invocations import InvocationError, invoke


async def test_unreachable_server_is_an_invocation_error() -> None:
    with pytest.raises(InvocationError, match="ConnectError"):
        await invoke("http://127.0.0.1:1", "Hello.", read_timeout=5)

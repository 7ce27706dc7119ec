"""The torch engine served as a user runs it: `make models` places its weights (derived once from the
int8 export), then docs/engine.md's command, with no setting but the backend, speaks words that
Whisper hears.

The model files come from the shared model directory into a cache of the test's own (the user's
~/.cache after `make models`), where the same command `make models` runs derives the weights.
The port is the only thing changed (a free one, through VOICESTREAM_PORT).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.readme.readme_commands import REPO, program
from tests.support.asr import transcribe, word_error_rate
from voicestream.engine.models.torch_assets import CHECKPOINT_FILE, CONFIG_FILE
from voicestream.engine.torch.weights import DERIVED_DIR
from voicestream.texts import bench_texts

SERVE = "VOICESTREAM_BACKEND=torch .venv-torch/bin/voicestream serve --kokoro-only"
VOICESTREAM = Path(sys.prefix) / "bin" / "voicestream"  # the torch environment's, as `make models` runs it
READY_TIMEOUT_S = 600.0
MAX_WER = 0.15  # the ONNX engine's tier allows this per text (tests/integration/test_engine_onnx.py)


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def fresh_cache(source_dir: Path, cache: Path) -> Path:
    """A user's cache holding the fetched model files (links to the verified shared ones)."""
    model_dir = cache / "voicestream" / "kokoro-82m"
    (model_dir / "voices").mkdir(parents=True)
    for name in (CONFIG_FILE, "kokoro-v1.0.int8.onnx"):
        (model_dir / name).symlink_to(source_dir / name)
    for voice in (source_dir / "voices").iterdir():
        (model_dir / "voices" / voice.name).symlink_to(voice)
    return model_dir


def user_env(cache: Path, **extra: str) -> dict[str, str]:
    """This environment less any voicestream setting, with the cache at `cache`."""
    plain = {name: value for name, value in os.environ.items() if not name.startswith("VOICESTREAM_")}
    return {**plain, "XDG_CACHE_HOME": str(cache), **extra}


@pytest.fixture(scope="module")
def served(source_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cache = tmp_path_factory.mktemp("cache")
    model_dir = fresh_cache(source_dir, cache)
    # What `make models` runs in the torch environment: the files verified, the weights derived.
    done = subprocess.run(
        [str(VOICESTREAM), "models", "fetch"], env=user_env(cache), capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-4000:]
    # Placed by `models fetch`, before any server starts (the engine would otherwise derive them at load).
    assert (model_dir / DERIVED_DIR / CHECKPOINT_FILE).is_file(), done.stdout
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with program(SERVE, REPO, log, user_env(cache, VOICESTREAM_PORT=str(port))) as server:
        url = f"http://127.0.0.1:{port}"
        server.wait_until(lambda: ping(url), READY_TIMEOUT_S, "/ping 200")
        yield url
        assert server.interrupt() == 0, server.output()[-4000:]


def ping(url: str) -> bool:
    try:
        response = httpx.get(f"{url}/ping", timeout=5)
    except httpx.TransportError:
        return False
    if response.status_code != 200 and response.json().get("status") == "failed":
        raise AssertionError(f"the engine failed to load: {response.text}")
    return response.status_code == 200


def test_the_command_is_the_one_docs_engine_md_shows() -> None:
    assert SERVE in (REPO / "docs" / "engine.md").read_text()


def test_the_served_torch_engine_speaks_a_bench_text(served: str) -> None:
    """One bench text through the command: every bench sentence is heard on the engine itself
    (test_torch_guarantees.py), so the second text only doubled the time on the slowest hosts."""
    text = bench_texts()["paragraph_4_sentences"]
    response = httpx.post(f"{served}/invocations", json={"text": text, "format": "pcm"}, timeout=600)
    assert response.status_code == 200, response.text[:500]
    heard = transcribe(response.content)
    assert word_error_rate(text, heard) <= MAX_WER, heard

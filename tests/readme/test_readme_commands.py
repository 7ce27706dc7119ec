"""README.md's commands, run as a user runs them from the checkout, with the real model.

Each command is read from README's Commands table (tests/readme/readme_commands.py), so a
renamed command or a moved module breaks a test here. What a test machine cannot take as
written is replaced, and only that (`runnable`): `llm …` (any program that writes text) by
`printf`, `--play` by `--out FILE` (no sound card; the same row documents `--out`), the port
8080 by a free one (the README says `VOICESTREAM_PORT` picks it), and options whose value is a
placeholder (URL, NAME) or sits in `[...]` are left out. `voicestream call` needs a deployed
function: its `--help` is run, and every option the README shows must be in it.
"""

from __future__ import annotations

import asyncio
import re
import socket
import wave
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import numpy as np
import pytest

from tests.readme.readme_commands import REPO, commands, find, program, run
from voicestream.speech import BidiSession

READY_TIMEOUT_S = 300.0
REPLY = "Hello there. The museum opens at nine."
PLACEHOLDER_OPTION = re.compile(r"\s--[a-z-]+ (?:URL|NAME)\b")
OPTIONAL_GROUP = re.compile(r"\s\[[^\]]*\]")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def runnable(command: str, port: int | None = None, out: str = "reply.wav") -> str:
    """The README's command with what a test machine cannot take as written replaced (module doc)."""
    command = command.replace("llm …", f"printf %s '{REPLY}'")
    command = command.replace(" --play", f" --out {out}")
    command = OPTIONAL_GROUP.sub("", PLACEHOLDER_OPTION.sub("", command))
    if port is not None:
        command = command.replace("127.0.0.1:8080", f"127.0.0.1:{port}")
    return command


def ping(url: str) -> bool:
    """/ping is 200; an engine that failed to load fails the test at once, with its reason."""
    try:
        response = httpx.get(f"{url}/ping", timeout=5)
    except httpx.TransportError:
        return False
    if response.status_code != 200 and response.json().get("status") == "failed":
        raise AssertionError(f"the engine failed to load: {response.text}")
    return response.status_code == 200


def read_wav(path: Path) -> tuple[int, np.ndarray]:
    with wave.open(str(path), "rb") as wav:
        assert wav.getnchannels() == 1 and wav.getsampwidth() == 2
        return wav.getframerate(), np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")


@pytest.mark.parametrize(
    "subcommand", sorted({c.split("voicestream ", 1)[1].split()[0] for c in commands() if "voicestream " in c})
)
def test_every_option_the_readme_shows_is_in_the_commands_help(subcommand: str, tmp_path: Path) -> None:
    result = run(f"voicestream {subcommand} --help", cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    shown = {option for c in commands() if f"voicestream {subcommand}" in c for option in re.findall(r"--[a-z-]+", c)}
    assert shown <= set(re.findall(r"--[a-z-]+", result.stdout.decode())), shown


def test_voicestream_say_writes_the_blend_to_a_wav(tmp_path: Path) -> None:
    command = runnable(find("voicestream say"))
    result = run(command, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr.decode()[-4000:]
    rate, samples = read_wav(tmp_path / "out" / "say.wav")  # say's default --out
    assert rate == 24_000 and len(samples) > rate // 4  # "text": one word, over a quarter second
    assert np.abs(samples).max() > 1000  # speech, not silence


@pytest.fixture(scope="module")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`voicestream serve` (what `make serve` runs), on a free port through VOICESTREAM_PORT."""
    port = free_port()
    command = runnable(find("voicestream serve"))
    assert command == "voicestream serve", command
    directory = tmp_path_factory.mktemp("serve")
    with program(command, directory, directory / "serve.log", {"VOICESTREAM_PORT": str(port)}) as served:
        url = f"http://127.0.0.1:{port}"
        served.wait_until(lambda: ping(url), READY_TIMEOUT_S, "/ping 200")
        yield url
        assert served.interrupt() == 0, served.output()[-4000:]  # Ctrl-C: a clean stop


def test_the_openai_route_answers_the_readmes_curl(local_stack: str, tmp_path: Path) -> None:
    port = int(local_stack.rsplit(":", 1)[1])
    result = run(runnable(find("curl "), port), cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    mp3 = result.stdout
    # An MP3 stream: an ID3 tag or an MPEG audio frame's sync word first, and more than a header.
    assert mp3[:3] == b"ID3" or (mp3[0] == 0xFF and mp3[1] & 0xE0 == 0xE0), mp3[:64]
    assert len(mp3) > 2_000


def test_voicestream_speak_streams_a_piped_reply(local_stack: str, tmp_path: Path, asr: ModuleType) -> None:
    port = int(local_stack.rsplit(":", 1)[1])
    result = run(runnable(find("voicestream speak"), port), cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr.decode()[-4000:]
    assert "first audio" in (result.stdout + result.stderr).decode()  # it prints the time to first audio
    rate, samples = read_wav(tmp_path / "reply.wav")
    assert rate == 24_000
    assert asr.word_error_rate(REPLY, asr.transcribe(samples.tobytes())) <= 0.15


def test_voicestream_gradio_serves_its_page(tmp_path: Path) -> None:
    port = free_port()
    command = runnable(find("voicestream gradio"))
    assert command == "voicestream gradio", command
    with program(f"{command} --port {port}", tmp_path, tmp_path / "gradio.log") as gradio:

        def page() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 200
            except httpx.TransportError:
                return False

        gradio.wait_until(page, READY_TIMEOUT_S, "its page")
        assert f"voicestream gradio: http://127.0.0.1:{port}/ (" in gradio.output()
        page_html = httpx.get(f"http://127.0.0.1:{port}/", timeout=10).text
        assert "gradio" in page_html.lower()
        gradio.interrupt()


# ------------------------------------------------------------------ the image (Docker)


@pytest.fixture(scope="module")
def made_image(docker_engine: object) -> str:
    """`make image`, as written, in the checkout; its standard output."""
    result = run(find("make image"), cwd=REPO, timeout=1800)
    assert result.returncode == 0, (result.stdout + result.stderr).decode(errors="replace")[-4000:]
    return result.stdout.decode(errors="replace")


def test_make_image_builds_the_server_image(made_image: str) -> None:
    assert made_image.rstrip().splitlines()[-1] == "voicestream-kokoro:local", made_image[-2000:]  # the image's name
    inspected = run("docker image inspect --format '{{.Config.User}}' voicestream-kokoro:local", REPO, 60)
    user = inspected.stdout.decode().strip()
    assert user and user.split(":")[0] not in {"0", "root"}, user  # the server does not run as root


async def one_bidi_session(ws_url: str) -> bytes:
    async with BidiSession.websocket(ws_url, silence_timeout=120) as session:
        result = await session.synthesize(REPLY)
    assert result.sample_rate == 24_000 and result.format == "pcm"
    return result.audio


def test_make_run_image_serves_a_bidi_session_on_loopback(made_image: str, tmp_path: Path, asr: ModuleType) -> None:
    port = free_port()
    command = find("make run-image")
    with program(command, REPO, tmp_path / "run-image.log", {"VOICESTREAM_PORT": str(port)}) as served:
        try:
            url = f"http://127.0.0.1:{port}"
            served.wait_until(lambda: ping(url), READY_TIMEOUT_S, "/ping 200")
            audio = asyncio.run(one_bidi_session(f"ws://127.0.0.1:{port}"))
            assert asr.word_error_rate(REPLY, asr.transcribe(audio)) <= 0.15
            assert_loopback_only(port)
        finally:
            served.interrupt()
            running = run(f"docker ps --quiet --filter name=voicestream-kokoro-{port}", REPO, 60)
            assert not running.stdout.strip(), "the container outlived Ctrl-C"


def assert_loopback_only(port: int) -> None:
    """Nothing answers on the machine's other addresses: the server listens on 127.0.0.1 only."""
    addresses = run("hostname -I", REPO, 30).stdout.decode().split()
    for address in addresses:
        if ":" in address:
            continue  # IPv6: the server binds an IPv4 address
        with socket.socket() as probe:
            probe.settimeout(5)
            assert probe.connect_ex((address, port)) != 0, f"the server answers on {address}:{port}"

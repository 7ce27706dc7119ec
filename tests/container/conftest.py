"""The container tier: the real image under a real Docker engine, run as SageMaker runs it.

- `docker_engine`: the engine (tests/container/engine.py): tools installed as root on Debian,
  dockerd started when none answers (with its default bridge where one can be made; the test
  output says which) and stopped at the end of the session.
- `cpu_image`: `voicestream-kokoro:local`, built by voicestream.aws.deploy.local_image exactly as
  `make image` builds it (cached: the Debian rootfs and the base by their tags, the rest by
  Docker's layer cache).
- `serve_container(name, model_dir=..., env=...)`: `docker run --network host ... <image> serve`
  as `make run-image` starts it (local_image.run_command: its unprivileged user, the model
  directory read-only at /opt/ml/model, on 127.0.0.1) with a free port in VOICESTREAM_PORT;
  the container and its URL, /ping polled from the start (`readiness`).
- `kokoro_container`: one such container on the real model, shared by the module's tests.
- `sam_build`, `sam_env`: the SAM tier's (tests/sam/conftest.py).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.container.engine import Container, DockerEngine, ensure_tools, run_detached
from tests.sam.conftest import sam_build, sam_env  # noqa: F401 (the SAM tier's fixtures, shared)
from voicestream.aws.deploy.local_image import LOCAL_TAG, build, run_command
from voicestream.env import default_model_dir

REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 300.0


ENGINE_DESCRIPTION = pytest.StashKey[str]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Which Docker engine and network the tier ran on, in the output whatever capture says."""
    description = config.stash.get(ENGINE_DESCRIPTION, None)
    if description is not None:
        terminalreporter.write_line(description)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def docker_engine(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[DockerEngine]:
    ensure_tools()
    engine = DockerEngine.connect(tmp_path_factory.mktemp("dockerd") / "dockerd.log")
    pytestconfig.stash[ENGINE_DESCRIPTION] = engine.describe()  # said in the summary (below)
    try:
        yield engine
    finally:
        engine.close()


@pytest.fixture(scope="session")
def cpu_image(docker_engine: DockerEngine) -> str:
    started = time.monotonic()
    image = build(REPO, LOCAL_TAG)
    print(f"\n{image} built in {time.monotonic() - started:.0f} s")
    return image


@pytest.fixture(scope="session")
def model_dir() -> Path:
    path = default_model_dir()
    assert (path / "config.json").is_file(), f"no model in {path}: run `make models`"
    return path


@dataclass
class ServingContainer:
    container: Container
    port: int
    readiness: list[int | str] = field(default_factory=list)
    """Every /ping answer from the container's start until 200 ("refused" before it listens)."""

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def poll_ping(self, until: Callable[[int], bool], timeout: float = READY_TIMEOUT_S) -> int:
        """Poll /ping every 0.1 s, recording answers, until `until(status)`; the last status."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                status = httpx.get(f"{self.http_url}/ping", timeout=5).status_code
            except httpx.TransportError:
                self.readiness.append("refused")
            else:
                self.readiness.append(status)
                if until(status):
                    return status
            state = self.container.state()
            if not state["Running"]:
                raise AssertionError(f"the container exited ({state['ExitCode']}):\n{self.container.logs()[-4000:]}")
            time.sleep(0.1)
        raise AssertionError(f"/ping answered {self.readiness[-5:]} for {timeout} s:\n{self.container.logs()[-4000:]}")


StartContainer = Callable[..., contextlib.AbstractContextManager[ServingContainer]]


@pytest.fixture(scope="session")
def serve_container(cpu_image: str) -> StartContainer:
    @contextlib.contextmanager
    def start(name: str, model_dir: Path, env: dict[str, str] | None = None) -> Iterator[ServingContainer]:
        port = free_port()
        full_name = f"voicestream-test-{os.getpid()}-{name}"
        command = run_command(cpu_image, model_dir, port, name=full_name, detach=True, env=env)
        container = run_detached(command, full_name)
        try:
            yield ServingContainer(container, port)
        finally:
            container.remove()

    return start


@pytest.fixture(scope="module")
def kokoro_container(serve_container: StartContainer, model_dir: Path) -> Iterator[ServingContainer]:
    with serve_container("kokoro", model_dir) as serving:
        serving.poll_ping(lambda status: status == 200)
        yield serving

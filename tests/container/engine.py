"""A real Docker engine for the container tier: installed and started when it is not there.

- `ensure_tools()`: the docker CLI, dockerd and debootstrap; as root on Debian, missing ones
  are installed with apt-get (docker.io, debootstrap); elsewhere the tier is skipped with one
  line that names what is missing and how to get it.
- `DockerEngine.connect(log_path)`: the engine that answers `docker info`, else dockerd started
  here (root) and stopped again by `close()`. The daemon gets no bridge network and leaves
  iptables alone: every container here runs on the host's network (`--network host`).
- `Container`: one `docker run --detach` container: logs, exit state, removal.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# tool -> the Debian package that has it
TOOLS = {"docker": "docker.io", "dockerd": "docker.io", "debootstrap": "debootstrap"}
DAEMON_FLAGS = ["--bridge=none", "--iptables=false", "--ip-forward=false", "--ip-masq=false"]
INSTALL_TIMEOUT_S = 900


def is_root_on_debian() -> bool:
    return os.geteuid() == 0 and Path("/etc/debian_version").exists() and shutil.which("apt-get") is not None


def ensure_tools() -> None:
    packages = sorted({package for tool, package in TOOLS.items() if shutil.which(tool) is None})
    if not packages:
        return
    if not is_root_on_debian():
        pytest.skip(
            f"container tier not run: {', '.join(packages)} missing "
            f"(as root on Debian `apt-get install {' '.join(packages)}`, or install Docker and debootstrap)"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
        assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}"


def docker(*args: str, timeout: float = 120.0, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return result


def engine_answers() -> bool:
    return docker("info", timeout=30, check=False).returncode == 0


@dataclass
class DockerEngine:
    """The engine in use; `daemon` is set when it was started here (and is stopped by close())."""

    daemon: subprocess.Popen[bytes] | None
    log_path: Path | None

    @classmethod
    def connect(cls, log_path: Path, timeout: float = 60.0) -> DockerEngine:
        if engine_answers():
            return cls(daemon=None, log_path=None)
        if os.geteuid() != 0:
            pytest.skip("container tier not run: no Docker engine answers and only root may start dockerd here")
        with log_path.open("wb") as log:
            daemon = subprocess.Popen(["dockerd", *DAEMON_FLAGS], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not engine_answers():
            if daemon.poll() is not None or time.monotonic() > deadline:
                daemon.kill()
                daemon.wait()
                raise AssertionError(f"dockerd did not start:\n{log_path.read_text(errors='replace')[-4000:]}")
            time.sleep(0.5)
        return cls(daemon=daemon, log_path=log_path)

    def close(self) -> None:
        if self.daemon is None:
            return
        self.daemon.terminate()  # dockerd stops its containers and its containerd, then exits
        try:
            self.daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
            self.daemon.wait()


@dataclass
class Container:
    """A container started with `docker run --detach`; removed by `remove()`."""

    name: str

    def state(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(docker("inspect", "--format", "{{json .State}}", self.name).stdout)
        return loaded

    def logs(self) -> str:
        result = docker("logs", self.name, check=False)
        return result.stdout + result.stderr

    def log_records(self) -> list[dict[str, Any]]:
        """The server's JSON log lines (every line it writes is one object)."""
        return [json.loads(line) for line in self.logs().splitlines() if line.startswith("{")]

    def signal(self, name: str) -> None:
        docker("kill", "--signal", name, self.name)

    def wait_exit(self, timeout: float) -> dict[str, Any]:
        """The state once the container has stopped; raises after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while (state := self.state())["Running"]:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} still running {timeout} s later:\n{self.logs()[-4000:]}")
            time.sleep(0.1)
        return state

    def remove(self) -> None:
        with contextlib.suppress(AssertionError, subprocess.TimeoutExpired):
            docker("rm", "--force", self.name, check=False)


def run_detached(command: list[str], name: str) -> Container:
    """Start `command` (a `docker run --detach --name NAME ...` list); the container."""
    assert command[:2] == ["docker", "run"] and "--detach" in command and name in command, command
    docker("rm", "--force", name, check=False)  # a leftover of an interrupted run
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stderr[-4000:]}"
    return Container(name)

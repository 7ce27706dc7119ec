"""A real Docker engine for the container tier: installed and started when it is not there.

- `ensure_tools()`: the docker CLI, dockerd and debootstrap; as root on Debian, missing ones
  are installed with apt-get (docker.io, debootstrap); elsewhere the tier is skipped with one
  line that names what is missing and how to get it.
- `DockerEngine.connect(log_path)`: the engine that answers `docker info`, else dockerd started
  here (root) and stopped again by `close()`: with its defaults (the default bridge network,
  which `sam local invoke` needs), and only where that daemon cannot start (no bridge can be
  made: no iptables, no network privileges) again with no bridge, every container then on the
  host's network. `bridge` says which, and `describe()` says it in words.
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
# dockerd's defaults: the default bridge network (docker0) and the iptables rules it needs.
DAEMON_FLAGS: list[str] = []
# The fallback where no bridge can be made: no bridge, the host's firewall untouched.
HOST_ONLY_FLAGS = ["--bridge=none", "--iptables=false", "--ip-forward=false", "--ip-masq=false"]
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


def has_bridge() -> bool:
    return docker("network", "inspect", "bridge", timeout=30, check=False).returncode == 0


@dataclass
class DockerEngine:
    """The engine in use; `daemon` is set when it was started here (and is stopped by close())."""

    daemon: subprocess.Popen[bytes] | None
    log_path: Path | None
    bridge: bool
    why_no_bridge: str = ""

    @classmethod
    def connect(cls, log_path: Path, timeout: float = 60.0) -> DockerEngine:
        if engine_answers():
            bridge = has_bridge()
            return cls(None, None, bridge, "" if bridge else "the running engine has no default bridge network")
        if os.geteuid() != 0:
            pytest.skip("container tier not run: no Docker engine answers and only root may start dockerd here")
        try:
            return cls(start_daemon(DAEMON_FLAGS, log_path, timeout), log_path, bridge=has_bridge())
        except DaemonFailed as failed:
            # Where no bridge can be made, dockerd refuses to start at all with its defaults.
            why = f"dockerd with its default bridge did not start: {failed.last_line}"
        fallback_log = log_path.with_name(f"{log_path.stem}-host-only.log")
        try:
            return cls(start_daemon(HOST_ONLY_FLAGS, fallback_log, timeout), fallback_log, False, why)
        except DaemonFailed as failed:
            raise AssertionError(f"dockerd did not start, with or without a bridge:\n{failed.log}") from None

    def describe(self) -> str:
        started = "started here" if self.daemon else "already running"
        if self.bridge:
            return f"Docker engine ({started}): default bridge network"
        return f"Docker engine ({started}): host networking only ({self.why_no_bridge})"

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


class DaemonFailed(Exception):
    def __init__(self, log: str) -> None:
        super().__init__(log)
        self.log = log
        lines = [line for line in log.splitlines() if line.strip()]
        # dockerd's reason: its last line that says error or failed, else its last line.
        errors = [line for line in lines if "error" in line.lower() or "failed" in line.lower()]
        self.last_line = (errors or lines or ["(no output)"])[-1]


def start_daemon(flags: list[str], log_path: Path, timeout: float) -> subprocess.Popen[bytes]:
    """dockerd with `flags`, once `docker info` answers; DaemonFailed with its log otherwise."""
    with log_path.open("wb") as log:
        daemon = subprocess.Popen(["dockerd", *flags], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while not engine_answers():
        if daemon.poll() is not None or time.monotonic() > deadline:
            daemon.kill()
            daemon.wait()
            raise DaemonFailed(log_path.read_text(errors="replace")[-4000:])
        time.sleep(0.5)
    return daemon


def run_detached(command: list[str], name: str) -> Container:
    """Start `command` (a `docker run --detach --name NAME ...` list); the container."""
    assert command[:2] == ["docker", "run"] and "--detach" in command and name in command, command
    docker("rm", "--force", name, check=False)  # a leftover of an interrupted run
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stderr[-4000:]}"
    return Container(name)

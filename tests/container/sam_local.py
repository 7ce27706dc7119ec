"""`sam local invoke` with the local emulation image, and its container replayed on the host network.

SAM CLI (1.170) builds its invoke image FROM `--invoke-image` (adding its runtime interface
emulator and the function's layers), creates the container with the function's code mounted at
/var/task and Lambda's environment, and publishes the emulator's port 8080 on 127.0.0.1 of the
default bridge network; `--docker-network host` does not change that (SAM only *connects*
other networks). On an engine without a bridge network, SAM cannot reach the emulator and
stops with CONNECTION_FAILURE below.

`attempt()` runs the real `sam local invoke` and records the container SAM created
(`docker inspect`, read while SAM waits for it). `replay()` starts that same container
definition (SAM's image, entrypoint, environment, mounts, memory) on the host network, with
the emulator listening on a free port instead of a published 8080; `invoke()` then posts the
event to the emulator exactly as SAM would have.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.container.engine import Container, run_detached

CONNECTION_FAILURE = "Timed out while attempting to establish a connection to the container."
SAM_CONNECTION_TIMEOUT_S = "5"  # SAM_CLI_CONTAINER_CONNECTION_TIMEOUT: how long SAM waits before giving up


@dataclass
class SamAttempt:
    returncode: int
    output: str
    container: dict[str, Any]  # `docker inspect` of the container SAM created


def attempt(
    sam: Path, function: str, template: Path, event: Path, invoke_image: str, env: Mapping[str, str]
) -> SamAttempt:
    """`sam local invoke FUNCTION -e EVENT --invoke-image IMAGE`, its output and its container."""
    command = [
        str(sam), "local", "invoke", function, "--template", str(template), "--event", str(event),
        "--invoke-image", invoke_image, "--skip-pull-image", "--docker-network", "host",
    ]  # fmt: skip
    env = {**env, "SAM_CLI_CONTAINER_CONNECTION_TIMEOUT": SAM_CONNECTION_TIMEOUT_S}
    lines: list[str] = []
    container: dict[str, Any] = {}
    deadline = time.monotonic() + 600
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as process:
        returncode = _follow(process, lines, container, deadline)
    return SamAttempt(returncode, "".join(lines), container)


def _follow(process: subprocess.Popen[str], lines: list[str], container: dict[str, Any], deadline: float) -> int:
    """Read SAM's output to its end, inspecting its container as soon as SAM names it."""
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line)
        if line.startswith("SAM_CONTAINER_ID:"):  # printed after create, before start
            inspected = subprocess.run(
                ["docker", "inspect", line.split(":", 1)[1].strip()], capture_output=True, text=True, timeout=60
            )
            assert inspected.returncode == 0, inspected.stderr
            container.update(json.loads(inspected.stdout)[0])
        if time.monotonic() > deadline:
            process.kill()
            break
    return process.wait(timeout=60)


def replay(sam_container: Mapping[str, Any], name: str, port: int, extra_env: Mapping[str, str]) -> Container:
    """SAM's container definition, run on the host network with the emulator on `port`."""
    config, host = sam_container["Config"], sam_container["HostConfig"]
    entrypoint = list(config["Entrypoint"])
    command = ["docker", "run", "--detach", "--name", name, "--network", "host", "--workdir", config["WorkingDir"]]
    for mount in sam_container["Mounts"]:
        command += ["--volume", f"{mount['Source']}:{mount['Destination']}:{'rw' if mount['RW'] else 'ro'}"]
    for variable in config["Env"]:
        command += ["--env", variable]
    for key, value in extra_env.items():
        command += ["--env", f"{key}={value}"]
    if host.get("Memory"):
        command += ["--memory", str(host["Memory"])]
    command += ["--entrypoint", entrypoint[0], config["Image"], *entrypoint[1:]]
    command += ["--runtime-interface-emulator-address", f"127.0.0.1:{port}"]
    return run_detached(command, name)


@dataclass
class Invocation:
    payload: Any
    logs: str

    @property
    def failed(self) -> bool:
        return isinstance(self.payload, dict) and "errorType" in self.payload


def invoke(container: Container, port: int, event: Mapping[str, Any], timeout: float = 300.0) -> Invocation:
    """POST the event to the emulator (SAM's own request), once it listens; the result and logs."""
    url = f"http://127.0.0.1:{port}/2015-03-31/functions/function/invocations"
    deadline = time.monotonic() + 60
    while True:
        try:
            response = httpx.post(url, json=event, timeout=timeout)
            break
        except httpx.ConnectError:
            assert container.state()["Running"], f"the emulator exited:\n{container.logs()[-4000:]}"
            assert time.monotonic() < deadline, f"the emulator did not listen:\n{container.logs()[-4000:]}"
            time.sleep(0.2)
    assert response.status_code == 200, response.text
    time.sleep(0.2)  # the runtime flushes its last log lines after the response
    return Invocation(payload=response.json(), logs=container.logs())

"""`sam local invoke`, run as docs/deploy.md tells a user to run it, against AWS emulated on the host.

SAM CLI builds its invoke image FROM `--invoke-image` (adding its runtime interface emulator and
the function's layers), starts the function's container on Docker's default bridge network
with the function's code at /var/task and Lambda's environment, posts the event to the
emulator's published port and prints the function's result on stdout (its own and the
function's logs on stderr).

From that container the host is the bridge's gateway address (`bridge_gateway()`): a moto
server listening there is the function's AWS, named by AWS_ENDPOINT_URL in an `--env-vars`
file (the template declares the variable for the task functions: SAM passes on only declared
variables).
"""

from __future__ import annotations

import fcntl
import json
import socket
import struct
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.container.engine import docker

SIOCGIFADDR = 0x8915  # linux/sockios.h


@dataclass
class SamInvocation:
    command: list[str]
    returncode: int
    payload: Any  # the function's result: the JSON SAM prints on stdout
    logs: str  # SAM's and the function's log lines

    @property
    def failed(self) -> bool:
        return self.returncode != 0 or (isinstance(self.payload, dict) and "errorType" in self.payload)


def bridge_gateway() -> str:
    """The host's address on Docker's default bridge network: where its containers reach it. The
    network's IPAM names it when set (`--bip`); by default only the bridge interface has it."""
    inspected = json.loads(docker("network", "inspect", "bridge").stdout)[0]
    gateways = [config["Gateway"] for config in inspected["IPAM"]["Config"] if config.get("Gateway")]
    if gateways:
        return str(gateways[0])
    return interface_ipv4(inspected["Options"]["com.docker.network.bridge.name"])


def interface_ipv4(name: str) -> str:
    """A network interface's IPv4 address (SIOCGIFADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        request = struct.pack("256s", name.encode()[:15])
        return socket.inet_ntoa(fcntl.ioctl(probe.fileno(), SIOCGIFADDR, request)[20:24])


def invoke(
    sam: Path,
    function: str,
    template: Path,
    event: Path,
    invoke_image: str,
    env: Mapping[str, str],
    env_vars: Mapping[str, str] | None = None,
    env_vars_file: Path | None = None,
) -> SamInvocation:
    """`sam local invoke FUNCTION --event EVENT [--env-vars FILE]` with the local `--invoke-image`."""
    command = [
        str(sam), "local", "invoke", function, "--template", str(template), "--event", str(event),
        "--invoke-image", invoke_image, "--skip-pull-image",
    ]  # fmt: skip
    if env_vars:
        assert env_vars_file is not None
        env_vars_file.write_text(json.dumps({function: dict(env_vars)}), encoding="utf-8")
        command += ["--env-vars", str(env_vars_file)]
    result = subprocess.run(command, env=dict(env), capture_output=True, text=True, timeout=900, check=False)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    try:
        payload = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        payload = None
    return SamInvocation(command, result.returncode, payload, f"{result.stderr}\n{result.stdout}")

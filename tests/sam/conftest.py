"""The SAM application's fixtures: real SAM CLI, the real transform, one real `sam build`.

SAM CLI lives in .venv-sam (`make venv-sam`); these tests run in the main environment and call
it as a program, as a user would. Nothing here needs AWS credentials or Docker.

- `sam_env`: the environment for SAM commands: the real Python 3.12's bin first on PATH (sam
  build rejects a pyenv shim, docs/platform-facts.md#sam), a region, no telemetry, no credentials.
- `transform(**parameters)`: template.yaml through samtranslator (tests/sam/sam_transform.py),
  as CloudFormation JSON; cached per parameter set.
- `sam_build`: `sam build` of the whole application into a session temp dir (slow: once).
- `rie`: runs a built function's handler under the Lambda runtime interface emulator shipped in
  the aws-sam-cli wheel, with awslambdaric, the function dir and the layer as Lambda lays them out.
- `moto_server`: a moto server on 127.0.0.1 (module scope): its URL, for AWS_ENDPOINT_URL.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from moto.server import ThreadedMotoServer

from tests.support.cfn_yaml import load_cfn_yaml
from tests.support.sam_template import transform as transform_template

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "template.yaml"
EVENTS = REPO / "events"
VENV_SAM = REPO / ".venv-sam"
SAM = VENV_SAM / "bin" / "sam"
SAM_PYTHON = VENV_SAM / "bin" / "python"
RIE = next(iter((VENV_SAM / "lib").glob("python3.12/site-packages/samcli/local/rapid/aws-lambda-rie-x86_64")), None)
RIC_DIR = VENV_SAM / "rie"  # awslambdaric, installed there by `make venv-sam`
# The real interpreter behind the main venv (pyenv's 3.12, not its shim): what sam build and
# the emulated Lambda runtime run.
PYTHON312_BIN = Path(sys.base_prefix) / "bin"
REGION = "us-east-1"
TASK_FUNCTIONS = {"validate": "ValidateFunction", "benchmark": "BenchmarkFunction", "teardown": "TeardownFunction"}
AWS_TEST_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing"}


def require_sam() -> None:
    if not SAM.exists() or RIE is None or not RIC_DIR.exists():
        pytest.fail(f"SAM CLI environment missing at {VENV_SAM}: run `make venv-sam`")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    """template.yaml as written (before the SAM transform)."""
    return load_cfn_yaml(path)


@pytest.fixture(scope="session")
def sam_env() -> dict[str, str]:
    require_sam()
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    env.update(
        PATH=f"{PYTHON312_BIN}:{env.get('PATH', '/usr/bin:/bin')}",
        AWS_DEFAULT_REGION=REGION,
        SAM_CLI_TELEMETRY="0",
        # No credentials anywhere: every SAM command here must work without them.
        AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
        AWS_CONFIG_FILE="/nonexistent",
    )
    return env


Transform = Callable[..., dict[str, Any]]


@pytest.fixture(scope="session")
def transform(sam_env: dict[str, str]) -> Transform:
    """template.yaml (or another template) through the real SAM transform, cached per parameter set."""

    def run(template: Path = TEMPLATE, **parameters: str) -> dict[str, Any]:
        return transform_template(template, **parameters)

    return run


@pytest.fixture(scope="session")
def sam_build(sam_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`sam build` of template.yaml, offline; the build dir (with its template.yaml)."""
    build_dir = tmp_path_factory.mktemp("sam-build")
    result = subprocess.run(
        [str(SAM), "build", "--template-file", str(TEMPLATE), "--build-dir", str(build_dir)],
        cwd=REPO, capture_output=True, text=True, env=sam_env, timeout=900, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"sam build failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    assert "Build Succeeded" in result.stdout + result.stderr
    return build_dir


def event(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / f"{name}.json").read_text(encoding="utf-8"))
    return loaded


@dataclass
class Invocation:
    payload: Any
    logs: str

    @property
    def failed(self) -> bool:
        return isinstance(self.payload, dict) and "errorType" in self.payload


class Emulator:
    """One built function under aws-lambda-rie, invoked over the emulator's HTTP API."""

    def __init__(self, url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
        self.url = url
        self.process = process
        self.log_path = log_path

    def invoke(self, payload: Mapping[str, Any], timeout: float = 120.0) -> Invocation:
        offset = self.log_path.stat().st_size
        response = httpx.post(f"{self.url}/2015-03-31/functions/function/invocations", json=payload, timeout=timeout)
        assert response.status_code == 200, response.text
        time.sleep(0.2)  # the runtime flushes its last log lines after the response
        with self.log_path.open("rb") as handle:
            handle.seek(offset)
            logs = handle.read().decode(errors="replace")
        return Invocation(payload=response.json(), logs=logs)


RunEmulator = Callable[..., contextlib.AbstractContextManager[Emulator]]


@pytest.fixture(scope="session")
def rie(sam_build: Path, tmp_path_factory: pytest.TempPathFactory) -> RunEmulator:
    """Start a built function (by logical id) under the emulator, with `env` on top of Lambda's."""
    require_sam()
    assert RIE is not None
    template = load_built_template(sam_build)

    @contextlib.contextmanager
    def start(logical_id: str, env: Mapping[str, str] | None = None) -> Iterator[Emulator]:
        properties = template["Resources"][logical_id]["Properties"]
        code = sam_build / properties["CodeUri"]
        layer = sam_build / template["Resources"]["VoicestreamLayer"]["Properties"]["ContentUri"] / "python"
        port = free_port()
        variables = {
            key: value
            for key, value in template["Globals"]["Function"]["Environment"]["Variables"].items()
            if isinstance(value, str)
        }
        variables.update(
            {key: value for key, value in properties["Environment"]["Variables"].items() if isinstance(value, str)}
        )
        lambda_env = {
            "PATH": f"{PYTHON312_BIN}:/usr/bin:/bin",
            "HOME": str(tmp_path_factory.mktemp("lambda-home")),
            "LANG": "C.UTF-8",
            # Lambda's sys.path order: the function, then the layer, then the runtime's own (awslambdaric).
            "PYTHONPATH": f"{code}:{layer}:{RIC_DIR}",
            "LAMBDA_TASK_ROOT": str(code),
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_LAMBDA_FUNCTION_NAME": logical_id,
            "AWS_LAMBDA_FUNCTION_TIMEOUT": "120",
            # The X-Ray daemon is not here; tracing has nowhere to send segments.
            "POWERTOOLS_TRACE_DISABLED": "1",
            **variables,
            **(env or {}),
        }
        log_path = tmp_path_factory.mktemp("rie") / f"{logical_id}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [str(RIE), "--log-level", "error", "--runtime-interface-emulator-address", f"127.0.0.1:{port}",
                 str(PYTHON312_BIN / "python3.12"), "-s", "-m", "awslambdaric", properties["Handler"]],
                cwd=code, env=lambda_env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            wait_for_port(port, process, log_path)
            yield Emulator(f"http://127.0.0.1:{port}", process, log_path)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    return start


def wait_for_port(port: int, process: subprocess.Popen[bytes], log_path: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"process exited ({process.returncode}):\n{log_path.read_text(errors='replace')}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.1)
    raise AssertionError(f"nothing listened on {port} within {timeout} s:\n{log_path.read_text(errors='replace')}")


def load_built_template(build_dir: Path) -> dict[str, Any]:
    return load_template(build_dir / "template.yaml")


@pytest.fixture(scope="module")
def moto_server() -> Iterator[str]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()

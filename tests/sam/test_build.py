"""`sam build` offline, then the built artifacts run as Lambda would run them.

- The shared layer: the package and what the functions import, no speech engine, small.
- The speak function: its run.sh (what the Lambda Web Adapter starts) serves the app from the
  build output under uvicorn, against the real local Kokoro server, and streams speech.
- The task functions: the built handlers under the Lambda runtime emulator from the
  aws-sam-cli wheel (awslambdaric inside), each fed its events/ file; AWS calls go to a moto
  server through AWS_ENDPOINT_URL.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import json
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from moto import mock_aws

from tests.sam.conftest import (
    AWS_TEST_ENV,
    EVENTS,
    PYTHON312_BIN,
    REGION,
    TASK_FUNCTIONS,
    RunEmulator,
    event,
    free_port,
    load_built_template,
    wait_for_port,
)
from tests.statemachines.conftest import LambdaContext
from tests.statemachines.test_deploy_validate import sagemaker_in_front_of
from tests.support.server import LiveServer
from voicestream.aws.tasks.checks import ValidationSettings
from voicestream.wire.framing import SSEDecoder

# Lambda's limit is 250 MB unzipped for a function and all its layers; the adapter layer is ~5 MB.
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024
ENGINE_PACKAGES = ("numpy", "onnxruntime", "misaki", "spacy", "torch", "kokoro", "lameenc", "espeakng_loader")


def tree_size(path: Path) -> int:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file() and not item.is_symlink())


def built(sam_build: Path, logical_id: str, key: str = "CodeUri") -> Path:
    return sam_build / str(load_built_template(sam_build)["Resources"][logical_id]["Properties"][key])


def test_every_function_has_a_sample_event() -> None:
    assert {path.stem for path in EVENTS.glob("*.json")} == {"speak", *TASK_FUNCTIONS}


def test_layer_carries_the_package_but_no_engine(sam_build: Path, tmp_path: Path) -> None:
    layer = built(sam_build, "VoicestreamLayer", "ContentUri") / "python"
    assert (layer / "voicestream" / "speak" / "app.py").is_file()
    for needed in ("starlette", "uvicorn", "websockets", "aws_lambda_powertools", "strands", "awscrt"):
        assert any(layer.glob(f"{needed}*")), f"layer lacks {needed}"
    for engine in ENGINE_PACKAGES:
        assert not any(layer.glob(f"{engine}")), f"layer carries the engine dependency {engine}"
    functions = [built(sam_build, name) for name in ("SpeakFunction", *TASK_FUNCTIONS.values())]
    unzipped = tree_size(layer) + max(tree_size(function) for function in functions)
    assert unzipped < LAMBDA_UNZIPPED_LIMIT // 2, f"{unzipped / 1e6:.0f} MB unzipped"
    archive = tmp_path / "layer.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for item in layer.rglob("*"):
            bundle.write(item, item.relative_to(layer.parent))
    print(f"layer: {tree_size(layer) / 1e6:.1f} MB unzipped, {archive.stat().st_size / 1e6:.1f} MB zipped")


# ------------------------------------------------------------------- speak
@contextlib.contextmanager
def built_speak_app(sam_build: Path, kokoro_server: LiveServer, tmp_path: Path) -> Iterator[str]:
    """The speak function's run.sh from the build output, as the adapter starts it."""
    code = built(sam_build, "SpeakFunction")
    layer = built(sam_build, "VoicestreamLayer", "ContentUri") / "python"
    port = free_port()
    env = {
        "PATH": f"{PYTHON312_BIN}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(layer),  # where Lambda mounts the layer (/opt/python)
        "LAMBDA_TASK_ROOT": str(code),
        "PORT": str(port),
        "AWS_REGION": REGION,
        "POWERTOOLS_SERVICE_NAME": "speak",
        "POWERTOOLS_METRICS_NAMESPACE": "voicestream",
        "POWERTOOLS_TRACE_DISABLED": "1",
        # The deployed function names its endpoint; here the speech server is the local one.
        "KOKORO_WS_URL": kokoro_server.ws_url,
    }
    log_path = tmp_path / "speak.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(["/bin/sh", str(code / "run.sh")], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, process, log_path, timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=15)


def test_built_speak_app_streams_speech(sam_build: Path, kokoro_server: LiveServer, tmp_path: Path) -> None:
    sample = event("speak")
    readiness = load_built_template(sam_build)["Resources"]["SpeakFunction"]["Properties"]["Environment"]
    with built_speak_app(sam_build, kokoro_server, tmp_path) as url:
        health = httpx.get(url + readiness["Variables"]["AWS_LWA_READINESS_CHECK_PATH"], timeout=30)
        assert health.status_code == 200, health.text
        decoder = SSEDecoder()
        events: list[tuple[str, Any]] = []
        with httpx.stream(
            sample["requestContext"]["http"]["method"], url + sample["rawPath"],
            content=sample["body"], headers=sample["headers"], timeout=120,
        ) as response:  # fmt: skip
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            for chunk in response.iter_bytes():
                events += [(item.event, item.json()) for item in decoder.feed(chunk)]
    names = [name for name, _ in events]
    assert names[0] == "agent_start" and names[-1] == "done", names
    audio = b"".join(base64.b64decode(data["audio"]) for name, data in events if name == "audio_chunk")
    assert len(audio) > 24_000 * 2, "less than a second of 24 kHz PCM"
    assert names.count("synthesis_complete") == 2  # the event's two sentences
    done = events[-1][1]
    assert done["status"] == "complete", done


# ------------------------------------------------------------------ tasks
def test_teardown_function_empties_a_versioned_bucket(rie: RunEmulator, moto_server: str) -> None:
    sample = event("teardown")
    s3 = boto3.client(
        "s3", region_name=REGION, endpoint_url=moto_server, aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    s3.create_bucket(Bucket=sample["bucket"])
    s3.put_bucket_versioning(Bucket=sample["bucket"], VersioningConfiguration={"Status": "Enabled"})
    for index in range(30):
        key = f"benchmarks/{index % 7}.json"
        s3.put_object(Bucket=sample["bucket"], Key=key, Body=json.dumps({"run": index}).encode())
        if index % 5 == 0:
            s3.delete_object(Bucket=sample["bucket"], Key=key)  # a delete marker
    with rie("TeardownFunction", {**AWS_TEST_ENV, "AWS_ENDPOINT_URL": moto_server}) as emulator:
        result = emulator.invoke(sample)
    assert not result.failed, result.payload
    assert result.payload["done"] is True and result.payload["already_gone"] is False
    assert result.payload["deleted_versions"] == 30 and result.payload["deleted_markers"] == 6
    listing = s3.list_object_versions(Bucket=sample["bucket"])
    assert not listing.get("Versions") and not listing.get("DeleteMarkers")
    assert '"service":"teardown"' in result.logs.replace(" ", "")  # Powertools' structured log line


def test_benchmark_function_aggregates_trials(rie: RunEmulator) -> None:
    sample = event("benchmark")
    with rie("BenchmarkFunction") as emulator:
        result = emulator.invoke(sample)
    assert not result.failed, result.payload
    report = result.payload
    assert report["trials"] == len(sample["trials"])
    batch = [t["agent"]["batch"]["first_audio_s"] for t in sample["trials"]]
    bidi = [t["agent"]["bidi"]["first_audio_s"] for t in sample["trials"]]
    expected = (sum(batch) / len(batch)) / (sum(bidi) / len(bidi))
    assert report["ratios"]["agent_first_audio_batch_over_bidi"]["mean"] == pytest.approx(expected, rel=1e-3)
    assert '"_aws"' in result.logs  # the EMF metrics line


def test_validate_function_loads_and_refuses_an_event_without_an_endpoint(rie: RunEmulator) -> None:
    # Under the emulator the checks cannot reach a SageMaker endpoint (no network here): the
    # built handler loads everything it imports from the layer and answers a bad event clearly.
    sample = event("validate")
    settings = ValidationSettings.from_event(sample, default_region=REGION)
    assert settings.endpoint_name == "voicestream-kokoro" and len(settings.sentences) == 3
    with rie("ValidateFunction") as emulator:
        result = emulator.invoke({key: value for key, value in sample.items() if key != "endpoint_name"})
    assert result.failed
    assert result.payload["errorType"] == "ValueError"
    assert "endpoint_name" in result.payload["errorMessage"]


def test_validate_handler_passes_the_sample_event_against_the_real_server(
    sam_build: Path, kokoro_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The built handler, fed events/validate.json, with SageMaker's runtime played at the SDK's
    transport boundary in front of the real local Kokoro server (as tests/statemachines do)."""
    template = load_built_template(sam_build)
    variables = {
        **template["Globals"]["Function"]["Environment"]["Variables"],
        **template["Resources"]["ValidateFunction"]["Properties"]["Environment"]["Variables"],
        **AWS_TEST_ENV,
    }
    for key, value in variables.items():  # what Lambda would set from the template
        if value == {"Ref": "AWS::NoValue"}:  # CloudFormation drops the key (sam local's hook)
            continue
        monkeypatch.setenv(key, value)
    spec = importlib.util.spec_from_file_location("built_validate_app", built(sam_build, "ValidateFunction") / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    context = LambdaContext(function_name="validate", invoked_function_arn="arn:aws:lambda:us-east-1:1:function:v")
    with mock_aws(), sagemaker_in_front_of(kokoro_server, kokoro_server) as (validator, _):
        monkeypatch.setattr(module, "validator", validator)
        report = module.handler(event("validate"), context)
    assert report["passed"] is True, report["cause"]
    sentences = next(c for c in report["checks"] if c["name"] == "bidi_three_sentences")["data"]["sentences"]
    assert len(sentences) == len(event("validate")["sentences"])

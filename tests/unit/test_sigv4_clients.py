"""The shared function-URL signer, the one-line refusals of `voicestream call`, and the audio sinks."""

from __future__ import annotations

import io
import wave
from pathlib import Path

import pytest
from botocore.credentials import Credentials

from tests.statemachines.sigv4 import SignatureRejected, verify
from voicestream.aws.function_url import FunctionUrlError, refusal, resolve_region, speak_url
from voicestream.aws.sigv4 import function_url_region, signed_headers
from voicestream.clients.audio_out import AudioOutError, RawSink, WavFileSink, open_sink
from voicestream.clients.speak_command import GivenText, StdinSource

URL = "https://abcdefghijklmnopqrstuvwxyz012345.lambda-url.eu-west-1.on.aws/speak"


def test_region_comes_from_a_function_urls_host() -> None:
    assert function_url_region(URL) == "eu-west-1"
    assert function_url_region("http://127.0.0.1:8080/speak") is None
    assert resolve_region("http://127.0.0.1:8080", "us-east-2") == "us-east-2"
    with pytest.raises(FunctionUrlError, match="--region"):
        resolve_region("http://127.0.0.1:8080", None)
    assert speak_url(URL.removesuffix("speak")) == URL == speak_url(URL)


def test_the_signature_verifies_for_lambda_and_for_nothing_else() -> None:
    body = b'{"text":"Hi."}'
    headers = signed_headers(
        "POST", URL, body, region="eu-west-1", credentials=Credentials("AKID", "secret"), headers={"x-a": "1"}
    )
    verify("POST", URL, headers, body, secrets={"AKID": "secret"}, region="eu-west-1", service="lambda")
    with pytest.raises(SignatureRejected):
        verify("POST", URL, headers, body + b" ", secrets={"AKID": "secret"}, region="eu-west-1", service="lambda")
    with pytest.raises(SignatureRejected, match="signed for lambda"):
        verify("POST", URL, headers, body, secrets={"AKID": "secret"}, region="eu-west-1", service="sagemaker")


def test_refusals_are_one_line_each() -> None:
    forbidden = refusal(403, b'{"Message":"Forbidden."}', "eu-west-1")
    throttled = refusal(429, b'{"Message":"Rate Exceeded."}', "eu-west-1")
    refused = refusal(400, b'{"type":"error","code":"invalid_mode","message":"mode must be bidi or batch"}', "x")
    broken = refusal(502, b"<html>bad gateway</html>", "x")
    assert (forbidden.code, throttled.code, refused.code, broken.code) == (
        "forbidden",
        "throttled",
        "invalid_mode",
        "http_error",
    )
    for error in (forbidden, throttled, refused, broken):
        assert "\n" not in str(error)
    assert "lambda:InvokeFunctionUrl" in str(forbidden) and "Forbidden." in str(forbidden)


def test_wav_sink_fills_in_its_sizes_at_the_end(tmp_path: Path) -> None:
    sink = WavFileSink(tmp_path / "out" / "a.wav")
    for _ in range(3):
        sink.write(b"\x01\x00" * 100)
    sink.close()
    sink.close()
    with wave.open(str(tmp_path / "out" / "a.wav"), "rb") as wav:
        assert (wav.getnframes(), wav.getframerate()) == (300, 24_000)


def test_raw_sink_and_missing_destination() -> None:
    buffer = io.BytesIO()
    RawSink(buffer).write(b"\x00\x01")
    assert buffer.getvalue() == b"\x00\x01"
    with pytest.raises(AudioOutError, match="--out"):
        open_sink(None, play=False)


async def test_stdin_source_yields_pieces_as_written(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes("Caf\u00e9 at nine.".encode())  # a multi-byte character cut by no read
    with path.open("rb") as stream:
        assert "".join([piece async for piece in StdinSource(stream).stream()]) == "Caf\u00e9 at nine."
    assert [piece async for piece in GivenText("Hello.").stream()] == ["Hello."]

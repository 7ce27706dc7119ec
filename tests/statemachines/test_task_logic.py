"""The task modules' own logic, below the state machines: statistics, throttling, time bounds."""

from __future__ import annotations

import boto3
import numpy as np
import pytest
from botocore.exceptions import ClientError
from hypothesis import given
from hypothesis import strategies as st

from tests.statemachines.conftest import REGION
from voicestream.aws.clients import ThrottledError, raise_if_throttled
from voicestream.aws.tasks.checks import ValidationSettings, plausible_audio
from voicestream.aws.tasks.teardown import TIME_RESERVE_S, empty_bucket
from voicestream.stats import percentile, ratio, summarize

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@given(st.lists(finite, min_size=1, max_size=50), st.floats(min_value=0, max_value=100))
def test_percentile_matches_numpys_linear_interpolation(values: list[float], q: float) -> None:
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-9, abs=1e-6)


def test_summary_of_known_values() -> None:
    assert summarize([4.0, 1.0, 3.0, 2.0]) == {"n": 4, "mean": 2.5, "p50": 2.5, "p95": 3.85, "min": 1.0, "max": 4.0}
    assert summarize([7.0])["p95"] == 7.0
    with pytest.raises(ValueError):
        summarize([])
    with pytest.raises(ValueError):
        summarize([1.0, float("nan")])


def test_ratio_refuses_a_zero_denominator() -> None:
    assert ratio(3.0, 1.5) == 2.0
    assert ratio(1.0, 0.0) is None


def _client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "Rate exceeded"}}, "DeleteObjects")


def test_throttling_becomes_the_error_name_the_state_machine_retries() -> None:
    with pytest.raises(ThrottledError, match="emptying a bucket: throttled by AWS \\(SlowDown\\)"):
        raise_if_throttled(_client_error("SlowDown"), "emptying a bucket")
    raise_if_throttled(_client_error("AccessDenied"), "emptying a bucket")  # not throttling: no change


def test_emptying_stops_when_the_invocation_runs_out_of_time(aws: None) -> None:
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="big")
    s3.put_bucket_versioning(Bucket="big", VersioningConfiguration={"Status": "Enabled"})
    for i in range(1200):
        s3.put_object(Bucket="big", Key=f"k{i}", Body=b"x")

    first = empty_bucket(s3, "big", time_left_s=lambda: TIME_RESERVE_S - 1)

    assert first["done"] is False
    assert first["deleted_versions"] == 1000  # one batch always runs, then time is up
    second = empty_bucket(s3, "big", totals=first, time_left_s=lambda: 600.0)
    assert second["done"] is True
    assert (second["deleted_versions"], second["calls"]) == (1200, 2)


def test_plausible_audio_bounds() -> None:
    text = "x" * 40
    assert plausible_audio(text, 2500) is None
    assert "too short" in (plausible_audio(text, 100) or "")
    assert "too long" in (plausible_audio(text, 60_000) or "")


def test_validation_settings_need_an_endpoint_name() -> None:
    with pytest.raises(ValueError, match="endpoint_name"):
        ValidationSettings.from_event({}, default_region=REGION)
    settings = ValidationSettings.from_event({"endpoint_name": "e", "silence_timeout_s": 3}, default_region=REGION)
    assert (settings.region, settings.silence_timeout_s, len(settings.sentences)) == (REGION, 3.0, 3)

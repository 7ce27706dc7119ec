"""The torch engine's CPU threads sleep when idle (engine/torch/__init__.py), as the ONNX engine's do.

libgomp, PyTorch's OpenMP runtime, reads its wait policy once, as torch loads, so the check asks
the runtime itself what it read: a fresh process that creates the engine the way the server does
(`create_engine("torch")`), with OMP_DISPLAY_ENV=VERBOSE, whose startup report names the spin
count idle threads busy-wait for (0: they sleep at once; libgomp's default is 300000).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

CREATE_ENGINE = "from voicestream.engine import create_engine; create_engine('torch')"


def openmp_report(**env: str) -> dict[str, str]:
    """libgomp's settings in a fresh process that created the torch engine, OMP_WAIT_POLICY
    unset unless given."""
    environ = {key: value for key, value in os.environ.items() if not key.startswith(("OMP_", "GOMP_"))}
    done = subprocess.run(
        [sys.executable, "-c", CREATE_ENGINE],
        env={**environ, "OMP_DISPLAY_ENV": "VERBOSE", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return dict(re.findall(r"^\s+(\w+) = '([^']*)'$", done.stderr, flags=re.MULTILINE))


def test_the_engine_loads_torch_with_threads_that_sleep_when_idle() -> None:
    report = openmp_report()
    assert report["OMP_WAIT_POLICY"] == "PASSIVE"
    assert report["GOMP_SPINCOUNT"] == "0"


def test_a_wait_policy_the_user_set_wins() -> None:
    report = openmp_report(OMP_WAIT_POLICY="ACTIVE")
    assert report["OMP_WAIT_POLICY"] == "ACTIVE"
    assert int(report["GOMP_SPINCOUNT"]) > 0
